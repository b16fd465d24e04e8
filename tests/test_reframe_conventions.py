"""Every ReFrame configuration sitebench writes serves checks that are not sitebench's.

ReFrame's conventions for an environment (src/sitebench/sites/reframe_conventions.py): the
feature ``openmp`` with ``extras['omp_flag']``, ``mpi`` with ``cc`` building MPI programs,
the MPI wrappers calling the toolchain's own compilers. The checks of
tests/fixtures/tutorial-checks/ are written to ReFrame's tutorial conventions with plain
``rfm.RegressionTest``: they run for real on the local site, and every other configuration
(local-slurm, the emulated arm64 site, an onboarded site) loads, lists them in each of its
environments and passes a dry run.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT
from test_validate import make_sites_root

from sitebench.services.slurm.config import Layout, plan, slurm_conf
from sitebench.sites import reframe_conventions, toolchains

CHECKS = FIXTURES / "tutorial-checks"
FLEXIBLE = "FlexibleMpiHelloTest"
NAMES = ("TutorialStreamTest", "TutorialMpiHelloTest", FLEXIBLE)
REFRAME = os.path.join(os.path.dirname(sys.executable), "reframe")


def reframe(config, *args, tmp, env=None):
    return subprocess.run(
        [REFRAME, "-C", str(config), "-c", str(CHECKS), *args, "--prefix", str(tmp / "rfm")]
        + ["--perflogdir", str(tmp / "perflogs")],
        capture_output=True,
        text=True,
        cwd=tmp,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def environments(config, env=None):
    """The environments of a configuration file, loaded in a process of its own (loading
    local-slurm's sets SLURM_CONF)."""
    code = (
        "import json, runpy, sys; c = runpy.run_path(sys.argv[1])['site_configuration'];"
        "parts = [p for s in c['systems'] for p in s['partitions']];"
        "print(json.dumps([c['environments'], parts]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(config)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def configurations(tmp_path_factory):
    """{name: (reframe.py, environment variables it needs)} of every kind sitebench writes."""
    tmp = tmp_path_factory.mktemp("configs")
    # local-slurm reads the shape of the started cluster; listing and dry runs need no daemon.
    slurm_dir = tmp / "slurm"
    slurm_dir.mkdir()
    cluster = plan(1, "node", sorted(os.sched_getaffinity(0)), 1024, port=6817)
    layout = Layout(slurm_dir)
    layout.cluster_file.write_text(cluster.to_json())
    # Its slurm.conf too: without one srun (ReFrame runs `srun --version`) spends 59 s
    # looking for a configuration server in DNS.
    layout.slurm_conf.parent.mkdir(parents=True)
    layout.slurm_conf.write_text(slurm_conf(cluster, layout))
    sites = make_sites_root(tmp / "sites")
    return {
        "local-slurm": (
            ROOT / "site-configs/local-slurm/reframe.py",
            {"SITEBENCH_SLURM_DIR": str(slurm_dir)},
        ),
        "arm64-neoverse-n1": (ROOT / "site-configs/arm64-neoverse-n1/reframe.py", {}),
        "onboarded": (
            sites / "site-configs/good/reframe.py",
            {"SITEBENCH_SITES_ROOT": str(sites)},
        ),
    }


def _assert_conventions(envs, partitions):
    assert envs, "no environment"
    for env in envs:
        where = f"environment {env['name']}"
        assert env.get("cc") and env.get("cxx") and env.get("ftn"), where
        if "openmp" in env["features"]:
            assert isinstance(env["extras"].get("omp_flag"), str), where
        assert "mpi" in env["features"], where
    assert any("openmp" in env["features"] for env in envs)
    names = {env["name"] for env in envs}
    for part in partitions:
        assert set(part["environs"]) <= names


def test_the_local_sites_environments_follow_reframes_conventions():
    _assert_conventions(*environments(ROOT / "site-configs/local/reframe.py"))


@pytest.mark.parametrize("name", ["local-slurm", "arm64-neoverse-n1", "onboarded"])
def test_every_other_configuration_follows_them(configurations, name):
    config, env = configurations[name]
    _assert_conventions(*environments(config, env))


def test_omp_flag_per_compiler_and_wrappers_calling_the_toolchains_compilers():
    found, problems = toolchains.parse(
        [
            {"name": "gcc-openmpi", "c": "gcc", "mpi": "openmpi"},
            {"name": "clang-mpich", "c": "llvm", "fortran": "gcc", "mpi": "mpich"},
            {"name": "nv-openmpi", "c": "nvhpc", "mpi": "openmpi"},
            {"name": "odd-openmpi", "c": "someccc", "mpi": "openmpi"},
        ],
        "f",
    )
    assert problems == []
    compilers = {"c": "/opt/llvm/bin/clang", "cxx": "/opt/llvm/bin/clang++"}
    packages = {
        "gcc": {"externals": [{"spec": "gcc@12.2.0", "extra_attributes": {"compilers": {
            "c": "/usr/bin/gcc", "cxx": "/usr/bin/g++", "fortran": "/usr/bin/gfortran"}}}]},
        "llvm": {"externals": [{"spec": "llvm@15", "extra_attributes": {"compilers": compilers}}]},
    }  # fmt: skip
    gcc, clang, nv, odd = toolchains.reframe_environments(found, packages)
    assert gcc["extras"]["omp_flag"] == "-fopenmp" and "openmp" in gcc["features"]
    assert nv["extras"]["omp_flag"] == "-mp"
    # A compiler whose flag is not known does not claim OpenMP.
    assert "omp_flag" not in odd["extras"] and "openmp" not in odd["features"]
    # mpicc of the Clang toolchain compiles with Clang, mpifort with GCC's gfortran.
    assert ["MPICH_CC", "/opt/llvm/bin/clang"] in clang["env_vars"]
    assert ["MPICH_CXX", "/opt/llvm/bin/clang++"] in clang["env_vars"]
    assert ["MPICH_FC", "/usr/bin/gfortran"] in clang["env_vars"]
    assert ["OMPI_CC", "/usr/bin/gcc"] in gcc["env_vars"]
    assert reframe_conventions.compiler_executable(packages, "llvm@16", "c") is None


def test_tutorial_checks_run_on_the_local_site(tmp_path, monkeypatch):
    # Every toolchain of the site, default: false ones (Clang's) too.
    monkeypatch.setenv(toolchains.SELECTED, toolchains.ALL)
    report = tmp_path / "report.json"
    proc = reframe(
        ROOT / "site-configs/local/reframe.py", "-r", "--report-file", str(report), tmp=tmp_path
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    cases = [c for r in json.loads(report.read_text())["runs"] for c in r["testcases"]]
    envs = {c["environ"] for c in cases}
    assert {(c["name"].split()[0], c["environ"]) for c in cases} == {
        (n, e) for n in NAMES for e in envs
    }
    assert envs == set(toolchains.for_reframe("local")[0])
    assert all(c["result"] == "pass" for c in cases), out[-6000:]
    # What each measured on, not only that it passed: the tutorial's STREAM (one task, no
    # thread count of its own) ran a thread per CPU of this machine, allowed on all of them,
    # in every toolchain (Open MPI 4.1 bound it to one core and it counted 1 thread); the
    # flexible check ran one task under every MPI (num_tasks 0 was "mpirun -np 0": a rank
    # per slot under Open MPI, one under MPICH).
    cpus = sorted(os.sched_getaffinity(0))
    for case in cases:
        stdout = (Path(case["outputdir"]) / case["job_stdout"]).read_text()
        if case["name"].startswith("TutorialStreamTest"):
            assert case["perfvalues"]  # copy_bw and triad_bw measured
            counted = re.search(r"^Number of Threads counted = (\d+)$", stdout, re.M)
            allowed = re.search(r"^Cpus_allowed_list:\s*(\S+)$", stdout, re.M)
            assert counted and allowed, stdout
            assert int(counted.group(1)) == len(cpus), (case["environ"], stdout)
            assert cpu_list(allowed.group(1)) == cpus, (case["environ"], stdout)
        if case["name"].startswith("FlexibleMpiHelloTest"):
            assert re.findall(r"^Hello from rank \d+ of (\d+)$", stdout, re.M) == ["1"], stdout


def cpu_list(text):
    """The CPUs of a list such as /proc's Cpus_allowed_list (``0-3,8``)."""
    found = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        found += range(int(first), int(last or first) + 1)
    return found


@pytest.mark.parametrize("name", ["local-slurm", "arm64-neoverse-n1", "onboarded"])
def test_tutorial_checks_list_and_dry_run_on_every_other_configuration(
    configurations, name, tmp_path
):
    config, env = configurations[name]
    envs, _ = environments(config, env)
    listed = reframe(config, "-l", tmp=tmp_path, env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for check in NAMES:
        assert f"- {check}" in listed.stdout, listed.stdout
    # A flexible check needs the scheduler's live node list even in a dry run (none here).
    dry = reframe(config, "--dry-run", "-x", FLEXIBLE, tmp=tmp_path, env=env)
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out[-6000:]
    for check in (n for n in NAMES if n != FLEXIBLE):
        for environ in (e["name"] for e in envs):
            assert f"{check} /" in out and f"+{environ}" in out, out[-6000:]
    assert "type error" not in out


@pytest.mark.parametrize("partition", ["srun", "mpirun"])
def test_local_slurms_mpirun_partition_runs_only_the_checks_that_use_mpi(
    configurations, partition, tmp_path
):
    """Its mpirun partition has the feature mpi_checks_only: the same node as srun's, so a
    check without MPI (STREAM, sysbench) would measure it a second time there."""
    config, env = configurations["local-slurm"]
    listed = subprocess.run(
        [REFRAME, "-C", str(config), "-c", str(ROOT / "reframe-checks"), "-l"]
        + ["--system", f"local-slurm:{partition}", "-n", "StreamCheck|SysbenchCheck|HplCheck"]
        + ["--prefix", str(tmp_path / "rfm")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **env},
        timeout=600,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    checks = {line.split()[1] for line in listed.stdout.splitlines() if line.startswith("- ")}
    if partition == "srun":
        assert checks == {"StreamCheck", "SysbenchCheck", "HplCheck"}, listed.stdout
    else:
        assert checks == {"HplCheck"}, listed.stdout


def test_the_local_launcher_gives_single_and_flexible_tasks_what_they_asked():
    from types import SimpleNamespace

    from sitebench.run import launchers

    def job(tasks, per_node=None, cpus=None):
        return SimpleNamespace(
            num_tasks=tasks, num_tasks_per_node=per_node, num_cpus_per_task=cpus
        )

    launcher = launchers.SitebenchMpirun()
    assert launcher.command(job(1)) == ["mpirun", "-np", "1", "--bind-to", "none"]
    assert launcher.command(job(1, cpus=4)) == ["mpirun", "-np", "1", "--bind-to", "none"]
    # One CPU asked for: a core is what it asked; several tasks: the MPI's placement.
    assert launcher.command(job(1, cpus=1)) == ["mpirun", "-np", "1"]
    assert launcher.command(job(4)) == ["mpirun", "-np", "4"]
    # A binding or placement of the check's own is kept as it is.
    launcher.options = ["--bind-to", "socket"]
    assert launcher.command(job(1)) == ["mpirun", "-np", "1"]
    launcher.options = ["--map-by=core"]
    assert launcher.command(job(1)) == ["mpirun", "-np", "1"]
    launcher.options = []
    # Flexible: one node's worth, and no fewer than asked (num_tasks -2: at least 2).
    assert launcher.command(job(0, per_node=1))[:3] == ["mpirun", "-np", "1"]
    assert launcher.command(job(0, per_node=2)) == ["mpirun", "-np", "2"]
    assert launcher.command(job(-2)) == ["mpirun", "-np", "2"]
    assert launchers.launcher_name(launcher) == "mpirun"


def unpack_once(archive, cache, keep=lambda name: True):
    """The archive's top folder (its members ``keep`` takes) made ``cache``: unpacked aside,
    then renamed, so a test killed half-way leaves no half cache."""
    import shutil
    import tarfile

    unpacked = cache.with_name(cache.name + f".unpacked-{os.getpid()}")
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if keep(m.name)]
        tar.extractall(unpacked, members=members, filter="data")
    (top,) = unpacked.iterdir()
    top.rename(cache) if not cache.exists() else None
    shutil.rmtree(unpacked, ignore_errors=True)


def reframes_tutorial_stream():
    """ReFrame's own tutorial STREAM (``examples/tutorial/stream/``: its check and McCalpin's
    ``stream.c``), unchanged, from the source distribution of the ReFrame this checkout runs
    (PyPI, as the README's venv comes from), downloaded once per machine."""
    import shutil

    from importlib.metadata import version

    release = version("reframe-hpc")
    cache = Path.home() / ".cache" / "sitebench" / "third-party" / f"reframe-{release}"
    stream = cache / "examples" / "tutorial" / "stream"
    if (stream / "stream_build_run.py").is_file():
        return stream
    download = cache.with_name(cache.name + ".download")
    shutil.rmtree(download, ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
        + ["--dest", str(download), f"reframe-hpc=={release}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    sdists = list(download.glob("reframe_hpc-*.tar.gz"))
    if proc.returncode != 0 or not sdists:
        pytest.skip(f"ReFrame {release}'s source distribution not downloadable: {proc.stderr}")
    unpack_once(sdists[0], cache, lambda name: "/examples/tutorial/stream/" in name)
    shutil.rmtree(download, ignore_errors=True)
    return stream


def test_reframes_own_tutorial_stream_counts_a_thread_per_cpu_in_every_toolchain(tmp_path):
    """ReFrame's tutorial STREAM check (``stream_build_run.py``: ``valid_prog_environs =
    ['+openmp']``, the environment's ``omp_flag``, no thread count nor binding of its own)
    run as its authors wrote it on the local site, every toolchain: it builds, validates
    and reports, in STREAM's own line, as many threads as this machine has CPUs (under Open
    MPI 4.1's ``mpirun -np 1`` it counted 1)."""
    stream = reframes_tutorial_stream()
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [REFRAME, "-C", str(ROOT / "site-configs/local/reframe.py")]
        + ["-c", str(stream / "stream_build_run.py"), "-r", "--report-file", str(report)]
        + ["--prefix", str(tmp_path / "rfm"), "--perflogdir", str(tmp_path / "perflogs")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, toolchains.SELECTED: toolchains.ALL},
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    cases = [c for r in json.loads(report.read_text())["runs"] for c in r["testcases"]]
    openmp = {
        e["name"]
        for e in environments(
            ROOT / "site-configs/local/reframe.py", {toolchains.SELECTED: toolchains.ALL}
        )[0]
        if "openmp" in e["features"]
    }
    assert openmp and {c["environ"] for c in cases} == openmp, (openmp, out[-3000:])
    cpus = len(os.sched_getaffinity(0))
    for case in cases:
        assert case["result"] == "pass", (case["environ"], case["fail_reason"])
        stdout = (Path(case["outputdir"]) / case["job_stdout"]).read_text()
        counted = re.search(r"^Number of Threads counted = (\d+)$", stdout, re.M)
        assert counted and int(counted.group(1)) == cpus, (case["environ"], stdout[-2000:])


#: CSCS's own checks (github.com/eth-cscs/cscs-reframe-tests at this commit): their CPU
#: STREAM and DGEMM, the mixins STREAM imports and the licence, as ``git archive | gzip -n``
#: makes them (the shared tools' build-mirror.sh puts the file in the source mirror).
CSCS_COMMIT = "2f813557625e1294b277a698338f82f398bea7b8"
CSCS_SHA256 = "589d7052c223172a768d988818c3562b9710264cabf98f09b54985f31ace857f"


def cscs_checks():
    """CSCS's checks, unchanged, unpacked once per machine from the source mirror (the file
    is checked against its sha256 first)."""
    import hashlib

    cache = Path.home() / ".cache" / "sitebench" / "third-party" / f"cscs-{CSCS_COMMIT[:12]}"
    if (cache / "checks" / "microbenchmarks" / "cpu" / "dgemm" / "dgemm.py").is_file():
        return cache
    mirror = os.environ.get("SITEBENCH_MIRROR", "")
    archive = Path(mirror, "_source-cache/archive", CSCS_SHA256[:2], f"{CSCS_SHA256}.tar.gz")
    if not mirror or not archive.is_file():
        pytest.skip(
            f"CSCS's checks are not in a source mirror ($SITEBENCH_MIRROR={mirror!r}): add "
            f"`git archive --format=tar --prefix=cscs-reframe-tests-{CSCS_COMMIT}/ "
            f"{CSCS_COMMIT} LICENSE checks/mixins checks/microbenchmarks/cpu/stream "
            "checks/microbenchmarks/cpu/dgemm | gzip -n` of a clone of "
            "https://github.com/eth-cscs/cscs-reframe-tests at "
            f"_source-cache/archive/{CSCS_SHA256[:2]}/{CSCS_SHA256}.tar.gz"
        )
    data = archive.read_bytes()
    assert hashlib.sha256(data).hexdigest() == CSCS_SHA256, f"{archive} is not CSCS's archive"
    unpack_once(archive, cache)
    return cache


def run_cscs(check, *args, tmp_path, env=None):
    """``reframe -r`` of one of CSCS's check files on the local site, every toolchain: their
    report's cases, and ReFrame's output for a failure message."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [REFRAME, "-C", str(ROOT / "site-configs/local/reframe.py"), "-c", str(check), "-r"]
        + [*args, "--report-file", str(report), "--prefix", str(tmp_path / "rfm")]
        + ["--perflogdir", str(tmp_path / "perflogs")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, toolchains.SELECTED: toolchains.ALL, **(env or {})},
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    cases = [c for r in json.loads(report.read_text())["runs"] for c in r["testcases"]]
    every = environments(
        ROOT / "site-configs/local/reframe.py", {toolchains.SELECTED: toolchains.ALL}
    )[0]
    return cases, {e["name"]: e for e in every}, out


def test_cscs_stream_unchanged_puts_a_thread_on_each_core_in_every_toolchain(tmp_path):
    """CSCS's STREAM (``stream.py``: one task per socket, a thread per core of the socket,
    ``OMP_PROC_BIND=spread``, arrays 4x the last-level cache from ReFrame's topology) as its
    authors wrote it; only ``valid_systems`` (``+remote``) and ``valid_prog_environs`` are
    set from the command line, and Python finds the mixin it imports on ``PYTHONPATH``, as
    at CSCS. OpenMP's own affinity display says on which CPUs each thread ran: one thread
    per CPU, every CPU of this machine, under Open MPI and MPICH alike."""
    checks = cscs_checks()
    cases, envs, out = run_cscs(
        checks / "checks/microbenchmarks/cpu/stream/stream.py",
        "-S",
        "valid_systems=*",
        "-S",
        "valid_prog_environs=+openmp",
        tmp_path=tmp_path,
        env={
            "PYTHONPATH": str(checks / "checks/mixins"),
            "OMP_DISPLAY_AFFINITY": "TRUE",
            "OMP_AFFINITY_FORMAT": "sitebench-affinity thread %n of %N on CPUs %A",
        },
    )
    openmp = {name for name, e in envs.items() if "openmp" in e["features"]}
    assert openmp and {c["environ"] for c in cases} == openmp, out[-3000:]
    cpus = sorted(os.sched_getaffinity(0))
    for case in cases:
        where = case["environ"]
        assert case["result"] == "pass" and case["perfvalues"], (where, case["fail_reason"])
        # libgomp writes the affinity display to stderr, LLVM's libomp to stdout.
        text = "".join(
            (Path(case["outputdir"]) / case[name]).read_text()
            for name in ("job_stdout", "job_stderr")
        )
        counted = re.search(r"^Number of Threads counted = (\d+)$", text, re.M)
        assert counted and int(counted.group(1)) == len(cpus), (where, text[-2000:])
        placed = re.findall(
            r"^sitebench-affinity thread (\d+) of (\d+) on CPUs (\S+)$", text, re.M
        )
        threads = {int(n): cpu_list(where_) for n, total, where_ in placed}
        assert sorted(threads) == list(range(len(cpus))), (where, placed)
        assert sorted(c for cs in threads.values() for c in cs) == cpus, (where, placed)


def test_cscs_flexible_dgemm_unchanged_gets_one_task_and_the_sites_blas(tmp_path):
    """CSCS's DGEMM (``dgemm.py``: ``num_tasks = 0``, a thread per core, ``dgemm_`` from
    the BLAS Cray's compiler wrapper links). It keeps its environments to CSCS's own
    system names, so ReFrame's ``--skip-prgenv-check`` runs it in every environment; its
    matrices are set smaller from the command line (their 6144x12288x3072 took 6 min 25 s
    for three toolchains here). The flexible check gets one task, and its sanity (one
    tested node per task) holds, under Open MPI and MPICH alike; the program links the
    site's BLAS through the environment's ``ldflags``."""
    checks = cscs_checks()
    cases, envs, out = run_cscs(
        checks / "checks/microbenchmarks/cpu/dgemm/dgemm.py",
        "-S",
        "valid_systems=*",
        "--skip-prgenv-check",
        "-S",
        "executable_opts=1024,1024,512",
        "--keep-stage-files",
        tmp_path=tmp_path,
    )
    assert {c["environ"] for c in cases} == set(envs), out[-3000:]
    for case in cases:
        where = case["environ"]
        assert "blas" in envs[where]["features"], envs[where]
        assert case["result"] == "pass" and case["perfvalues"], (where, case["fail_reason"])
        stdout = (Path(case["outputdir"]) / case["job_stdout"]).read_text()
        tested = re.findall(r"^(\S+):\s+Time for \d+ DGEMM operations", stdout, re.M)
        assert len(tested) == 1, (where, stdout[-2000:])
        script = (Path(case["outputdir"]) / "rfm_job.sh").read_text()
        assert re.search(r"^mpirun -np 1\b", script, re.M), (where, script)
        (program,) = (tmp_path / "rfm" / "stage").glob(f"*/*/{where}/DGEMMTest/DGEMMTest")
        linked = subprocess.run(["ldd", str(program)], capture_output=True, text=True)
        assert re.search(r"lib(open)?blas", linked.stdout), (where, linked.stdout)


def test_the_sites_blas_is_linked_as_a_cray_wrapper_links_libsci(tmp_path):
    """The ``blas`` provider's external: at /usr by name, elsewhere by its library directory
    (rpath too), a provider that is not an external skipped; none, no flags."""
    lib64 = tmp_path / "openblas" / "lib64"
    lib64.mkdir(parents=True)
    (lib64 / "libopenblas.so.0").write_bytes(b"")
    ext = {"externals": [{"spec": "openblas@0.3.26", "prefix": str(tmp_path / "openblas")}]}
    flags = reframe_conventions.blas_ldflags
    assert flags({"openblas": ext}) == [
        "-Wl,--as-needed",
        f"-L{lib64}",
        f"-Wl,-rpath,{lib64}",
        "-lopenblas",
    ]
    usr = {"externals": [{"spec": "netlib-lapack@3.11.0", "prefix": "/usr"}]}
    providers = {"all": {"providers": {"blas": ["netlib-lapack", "openblas"]}}}
    assert flags({**providers, "netlib-lapack": usr, "openblas": ext}) == [
        "-Wl,--as-needed",
        "-lblas",
    ]
    # A provider without an external (Spack builds it): the next one that is.
    assert flags({**providers, "netlib-lapack": {}, "openblas": ext})[-1] == "-lopenblas"
    assert flags({"openblas": {"externals": [{"spec": "openblas", "prefix": "/nowhere"}]}}) == []
    assert flags({}) == []
