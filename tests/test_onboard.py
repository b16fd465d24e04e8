"""``./sitebench onboard NAME``: a site from the recorded detection of tests/fixtures/onboarding/.

Every test writes into a temporary sites root ($SITEBENCH_SITES_ROOT). Onboarding this
machine for real, and running the new site, is test_modules.py's (its sites come from
environment modules, beside what is on PATH).
"""

import json
from pathlib import Path
import os
import shutil
import subprocess

import pytest
import yaml
from conftest import FIXTURES, ROOT
from test_validate import cli, local_toolchains, recorded_vm

from sitebench.onboarding import onboard

from sitebench.common.files import reframe_executable

from sitebench.sites import toolchains
from sitebench.discovery import local_site
from sitebench.onboarding import validate
from sitebench.common.errors import SitebenchError

RECORDED = FIXTURES / "onboarding"


@pytest.fixture
def sites_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "site-configs" / "local").mkdir(parents=True)
    (root / "environments" / "local").mkdir(parents=True)
    shutil.copy(ROOT / "site-configs/local/reframe.py", root / "site-configs/local/reframe.py")
    shutil.copy(ROOT / "environments/local/spack.yaml", root / "environments/local/spack.yaml")
    local_toolchains(root)
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(root))
    monkeypatch.delenv("SITEBENCH_MIRROR", raising=False)
    monkeypatch.delenv(toolchains.SELECTED, raising=False)
    return root


#: Where the recorded MPIs get their prefixes in this test (test_validate.recorded_vm).
MPI_ROOT = None


@pytest.fixture(autouse=True)
def mpi_root(tmp_path):
    global MPI_ROOT
    MPI_ROOT = tmp_path / "mpi"  # set for each test (kept through monkeypatch.undo())
    return MPI_ROOT


def vm(mpis=("openmpi",)):
    return recorded_vm(MPI_ROOT, mpis)


def cluster():
    detection = vm()  # the hand-written scheduler outputs of a bigger cluster
    detection.sinfo = (RECORDED / "two-partitions" / "sinfo.txt").read_text()
    detection.scontrol = (RECORDED / "two-partitions" / "scontrol.txt").read_text()
    return detection


def test_onboarding_this_vm_writes_every_file(sites_root, tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    report = onboard.onboard("vm-site", mirror=str(mirror), detection=vm())
    site, env = sites_root / "site-configs" / "vm-site", sites_root / "environments" / "vm-site"
    assert sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()) == [
        "README.md",
        "references.yaml",
        "reframe.py",
        "site.yaml",
        "spack/definitions.yaml",
        "spack/mirrors.yaml",
        "spack/packages.yaml",
        "spack/toolchains.yaml",
        "topology.json",
    ]
    assert [p.name for p in env.iterdir()] == ["spack.yaml"]
    assert not [p for p in site.parent.iterdir() if p.name.startswith(".")]

    packages = yaml.safe_load((site / "spack/packages.yaml").read_text())["packages"]
    assert packages["openmpi"]["externals"][0]["spec"].startswith("openmpi@4.1.4")
    assert packages["mpi"] == {"prefer": ["openmpi"]}
    assert packages["openmpi"]["externals"][0]["prefix"] == str(MPI_ROOT / "openmpi")
    assert packages["all"]["providers"]["blas"] == ["openblas"]
    assert packages["gcc"]["externals"][0]["extra_attributes"]["compilers"]["c"] == "/usr/bin/gcc"
    assert packages["mariadb"]["externals"][0]["spec"] == "mariadb@10.11.19"
    assert packages["stream"] == {"require": ["stream_array_size=17000000"]}  # 4 x 32 MiB L3
    assert "python" not in packages
    mirrors = yaml.safe_load((site / "spack/mirrors.yaml").read_text())["mirrors"]
    assert mirrors["sitebench-vm-site"]["url"] == f"file://{mirror}"
    assert json.loads((site / "topology.json").read_text())["num_cpus"] == 2
    assert yaml.safe_load((site / "references.yaml").read_text()) == {}
    assert "./sitebench references vm-site --write" in (site / "references.yaml").read_text()
    # The toolchain proposed from what was found, and its Spack files.
    declared = yaml.safe_load((site / "site.yaml").read_text())["toolchains"]
    assert declared == [
        {"name": "gcc-openmpi", "c": "gcc", "cxx": "gcc", "fortran": "gcc", "mpi": "openmpi"}
    ]
    parsed, problems = toolchains.parse(declared, "site.yaml")
    assert not problems
    for name, text in toolchains.spack_files(parsed).items():
        assert (site / "spack" / name).read_text() == text
    assert yaml.safe_load((site / "spack/definitions.yaml").read_text()) == {
        "definitions": [{"toolchains": ["%gcc-openmpi"]}]
    }
    assert "%mpi=openmpi" in (site / "spack/toolchains.yaml").read_text()
    readme = (site / "README.md").read_text()
    assert "# Site `vm-site`" in readme and "topology.json" in readme and "$" not in readme

    env_yaml = yaml.safe_load((env / "spack.yaml").read_text())["spack"]
    local = yaml.safe_load((ROOT / "environments/local/spack.yaml").read_text())["spack"]
    assert env_yaml["include"] == ["../../site-configs/vm-site/spack"]
    assert env_yaml["specs"] == local["specs"]
    assert env_yaml["definitions"] == local["definitions"]  # benchmarks x $toolchains
    # The benchmarks x toolchains first; then the Java ping-pong, one build outside them.
    assert env_yaml["specs"][0] == {"matrix": [["$benchmarks"], ["$toolchains"]]}
    assert env_yaml["concretizer"] == local["concretizer"] and env_yaml["view"] is False

    text = report.render()
    for line in (
        "compilers: gcc@12.2.0",
        "MPI: openmpi@4.1.4",
        "BLAS: openblas@0.3.21 (reference BLAS: netlib-lapack@3.11.0)",
        "MariaDB: mariadb@10.11.19",
        "CPU: x86_64_v4 AMD EPYC, 2 CPUs",
        "memory: 23.5 GiB",
        "toolchain gcc-openmpi: c gcc, cxx gcc, fortran gcc, mpi openmpi",
        "toolchains in site-configs/vm-site/site.yaml",
        "partition default: scheduler local, launcher sitebench-mpirun",
        "references.yaml is empty",
        "next: ./sitebench run --site vm-site",
    ):
        assert line in text, text
    assert "no BLAS" not in text and "no source mirror" not in text
    # The new site passes validation, ReFrame's load of its reframe.py included.
    settings = validate.validate_site("vm-site")
    assert settings["environment"] == "vm-site" and settings["toolchains"] == declared


def test_the_reframe_config_is_data_and_loads(sites_root):
    onboard.onboard("vm-site", detection=vm())
    import importlib.util

    path = sites_root / "site-configs/vm-site/reframe.py"
    spec = importlib.util.spec_from_file_location("onboarded", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (part,) = module.site_configuration["systems"][0]["partitions"]
    assert module.site_configuration["systems"][0]["name"] == "vm-site"
    assert part["scheduler"] == "local" and part["launcher"] == "sitebench-mpirun"
    assert {"spack", "mpi", "scale_quick"} <= set(part["features"])
    assert part["processor"]["arch"] == "x86_64_v4"
    assert part["extras"]["memory_bytes"] == 24684084 * 1024
    assert part["extras"]["spack_environment"] == str(sites_root / "environments/vm-site")
    assert module.site_configuration["logging"][0]["handlers_perflog"][0]["type"] == "filelog"
    # One environment per toolchain, the partition runs them all; PATH starts with its MPI.
    (env,) = module.site_configuration["environments"]
    assert env["name"] == "gcc-openmpi" and part["environs"] == ["gcc-openmpi"]
    assert {"sitebench", "mpi_openmpi", toolchains.NO_MPI_CHECKS} <= set(env["features"])
    # ReFrame's conventions, for checks that are not sitebench's: +openmp with omp_flag, +mpi.
    assert {"openmp", "mpi"} <= set(env["features"]) and env["extras"]["omp_flag"] == "-fopenmp"
    assert ["PATH", f"{MPI_ROOT / 'openmpi' / 'bin'}:$PATH"] in env["env_vars"]
    assert ["OMPI_ALLOW_RUN_AS_ROOT", "1"] in env["env_vars"]
    # Loading it leaves the local site's toolchains alone (only its perflog format is read).
    assert "'environs': ENVIRONS" in path.read_text()


def test_two_mpis_give_two_toolchains_and_environments(sites_root):
    report = onboard.onboard("two", detection=vm(("openmpi", "mpich")))
    site = sites_root / "site-configs/two"
    declared = yaml.safe_load((site / "site.yaml").read_text())["toolchains"]
    assert [t["name"] for t in declared] == ["gcc-openmpi", "gcc-mpich"]
    assert yaml.safe_load((site / "spack/definitions.yaml").read_text()) == {
        "definitions": [{"toolchains": ["%gcc-openmpi", "%gcc-mpich"]}]
    }
    spack_tcs = yaml.safe_load((site / "spack/toolchains.yaml").read_text())["toolchains"]
    assert {"spec": "%mpi=mpich", "when": "%mpi"} in spack_tcs["gcc-mpich"]
    assert "toolchain gcc-mpich: c gcc, cxx gcc, fortran gcc, mpi mpich" in report.render()
    names, environments = toolchains.for_reframe("two")
    assert names == ["gcc-openmpi", "gcc-mpich"]
    # One compiler set: the checks without MPI run once, in the first toolchain.
    assert [toolchains.NO_MPI_CHECKS in e["features"] for e in environments] == [True, False]
    assert [e["extras"]["mpi"] for e in environments] == ["openmpi", "mpich"]
    validate.validate_site("two")


def test_a_machine_without_a_toolchain_is_refused_before_writing(sites_root):
    detection = vm()
    detection.packages.pop("openmpi")
    with pytest.raises(SitebenchError, match="no toolchain found") as err:
        onboard.onboard("nompi", detection=detection)
    assert "apt-get install" in err.value.fix and "openmpi-bin" in err.value.fix
    # It names where it looked and what it found, and the modules way out.
    assert "Searched: PATH (spack compiler find" in err.value.problem
    assert "no environment modules" in err.value.problem
    assert "Found: gcc@" in err.value.problem and "MODULEPATH" in err.value.fix
    assert sorted(p.name for p in (sites_root / "site-configs").iterdir()) == ["local"]
    assert sorted(p.name for p in (sites_root / "environments").iterdir()) == ["local"]


def test_slurm_partitions_from_the_recorded_sinfo(sites_root):
    detection = vm()
    report = onboard.onboard("vm-slurm", slurm=True, detection=detection)
    parts = onboard.partitions(detection, slurm=True)
    (part,) = parts
    assert part["name"] == "local" and part["scheduler"] == "slurm" and part["launcher"] == "srun"
    assert part["access"] == ["--partition=local"] and part["max_jobs"] == 1
    assert part["processor"] == "topology.json"  # the node is this machine's shape
    assert part["extras"] == {"memory_bytes": 24105 * 2**20, "nodes": 1}
    assert "slurm" in part["features"]
    assert "partition local: scheduler slurm, launcher srun, 1 nodes" in report.render()
    assert "SLURM_MPI_TYPE=pmix" in report.render()
    validate.validate_site("vm-slurm")


def test_only_the_local_site_polls_its_jobs_every_20_ms(sites_root):
    """A local job is polled by a wait on its process, a Slurm site's by squeue or sacct: an
    onboarded Slurm site copies the local site's settings but keeps ReFrame's default rates."""
    onboard.onboard("vm-slurm", slurm=True, detection=vm())

    def setting(site, name):
        config = sites_root / "site-configs" / site / "reframe.py"
        proc = subprocess.run(
            [reframe_executable(), "-C", str(config), f"--show-config={name}"],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip().splitlines()[-1]

    rates = ("general/0/poll_rate_max", "general/0/poll_rate_min")
    assert [setting("local", n) for n in rates] == ["50", "50"]
    # ReFrame 4.10's defaults (its schemas/config.json): 10 a second, decaying to 0.1.
    assert [setting("vm-slurm", n) for n in rates] == ["10", "0.1"]
    prefix = "general/0/topology_prefix"
    assert setting("vm-slurm", prefix) == setting("local", prefix)
    # No debug records of the polls formatted on the benchmarks' CPUs, at either site.
    assert setting("local", "logging/0/level") == setting("vm-slurm", "logging/0/level")
    assert setting("local", "logging/0/level") == '"verbose"'


def test_several_partitions_node_shapes_and_states(sites_root):
    detection = cluster()
    cpu, debug = onboard.partitions(detection, slurm=True)
    assert cpu["processor"] == {
        "arch": "x86_64_v4",
        "vendor": "generic",
        "model": "AMD EPYC",
        "platform": "x86_64",
        "num_cpus": 96,
        "num_cpus_per_core": 1,
        "num_sockets": 2,
        "num_cpus_per_socket": 48,
    }
    assert cpu["extras"] == {"memory_bytes": 192000 * 2**20, "nodes": 64}
    assert debug["processor"] == "topology.json"
    text = onboard.onboard("big", slurm=True, detection=detection).render()
    assert "partition cpu has 2 node shapes: the smallest (96 CPUs)" in text
    assert "partition debug is DRAIN/up" in text
    assert "check it on a compute node" in text


def test_missing_blas_mariadb_and_mirror_are_listed_for_review(sites_root):
    detection = vm()
    detection.packages.pop("openblas")
    detection.extras.pop("mariadb")
    text = onboard.onboard("bare", detection=detection).render()
    assert "BLAS: none" in text and "MariaDB: none" in text
    assert "no BLAS found: HPL will build OpenBLAS" in text
    assert "no MariaDB found" in text and "no source mirror" in text
    packages = yaml.safe_load((sites_root / "site-configs/bare/spack/packages.yaml").read_text())[
        "packages"
    ]
    assert "blas" not in packages.get("all", {}).get("providers", {})


def test_no_compiler_stops_before_writing(sites_root):
    detection = vm()
    detection.packages.pop("gcc")
    with pytest.raises(SitebenchError, match="no C compiler"):
        onboard.onboard("nocc", detection=detection)
    assert not (sites_root / "site-configs/nocc").exists()


def test_an_existing_site_is_never_overwritten(sites_root):
    onboard.onboard("twice", detection=vm())
    before = (sites_root / "site-configs/twice/reframe.py").read_text()
    with pytest.raises(SitebenchError, match="site-configs/twice already exists") as err:
        onboard.onboard("twice", detection=vm())
    assert "choose another name" in err.value.fix
    assert (sites_root / "site-configs/twice/reframe.py").read_text() == before
    (sites_root / "environments/only-env").mkdir()
    with pytest.raises(SitebenchError, match="environments/only-env already exists"):
        onboard.onboard("only-env", detection=vm())
    assert not (sites_root / "site-configs/only-env").exists()


@pytest.mark.parametrize("name", ["../etc", "a/b", "my site", "bad\x01", "..", ".hidden", ""])
def test_a_bad_name_is_refused(sites_root, name):
    with pytest.raises(SitebenchError, match="invalid site name"):
        onboard.onboard(name, detection=vm())
    assert sorted(p.name for p in (sites_root / "site-configs").iterdir()) == ["local"]


def test_a_failure_midway_leaves_nothing(sites_root, monkeypatch):
    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(onboard, "write_readme", broken)  # after the other site files
    with pytest.raises(OSError, match="disk full"):
        onboard.onboard("half", detection=vm())
    assert sorted(p.name for p in (sites_root / "site-configs").iterdir()) == ["local"]
    assert sorted(p.name for p in (sites_root / "environments").iterdir()) == ["local"]
    monkeypatch.undo()
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(sites_root))
    real_rename = os.rename

    def rename(src, dst):  # the environment's rename fails after the site's succeeded
        if "environments" in str(dst):
            raise OSError("rename failed")
        return real_rename(src, dst)

    monkeypatch.setattr(onboard.os, "rename", rename)
    with pytest.raises(OSError, match="rename failed"):
        onboard.onboard("half", detection=vm())
    assert sorted(p.name for p in (sites_root / "site-configs").iterdir()) == ["local"]
    assert sorted(p.name for p in (sites_root / "environments").iterdir()) == ["local"]


def test_a_mirror_that_does_not_exist_is_refused(sites_root, tmp_path):
    with pytest.raises(SitebenchError, match="is not a directory"):
        onboard.onboard("m", mirror=str(tmp_path / "nowhere"), detection=vm())
    report = onboard.onboard("m", mirror="https://mirror.example.org/spack", detection=vm())
    assert "source mirror: https://mirror.example.org/spack" in report.render()


def test_recorded_detection_round_trips(tmp_path):
    detection = vm()
    detection.save(tmp_path / "again")
    assert onboard.Detection.load(tmp_path / "again") == detection
    assert detection.memory_bytes() == 24684084 * 1024


def test_cli_onboard_refuses_a_bad_name_without_traceback(sites_root):
    proc = cli("onboard", "../x", env={"SITEBENCH_SITES_ROOT": str(sites_root)})
    assert proc.returncode == 2 and "invalid site name" in proc.stderr
    assert "Traceback" not in proc.stderr


def _with_l3(topology, arch, size):
    caches = [
        dict(c, size=size) if c["type"] == "L3" else c for c in topology["topology"]["caches"]
    ]
    return {**topology, "arch": arch, "topology": {**topology["topology"], "caches": caches}}


def test_streams_arrays_beyond_2_gib_get_the_medium_code_model():
    """On a 260 MiB L3 (an Intel Xeon VM), 4 x LLC is 137 million elements a array, 3.3 GB
    of static data: GCC's small code model failed to link it ("relocation truncated")."""
    vm = json.loads((RECORDED / "vm" / "topology.json").read_text())
    assert local_site.stream_requirement(vm) == "stream_array_size=17000000"  # 32 MiB L3
    big = _with_l3(vm, "icelake", 260 * 2**20)
    assert local_site.stream_requirement(big) == (
        'stream_array_size=137000000 cflags="-mcmodel=medium"'
    )
    # aarch64's small code model reaches 4 GiB, and has no "medium".
    assert local_site.stream_requirement(_with_l3(vm, "neoverse_n1", 260 * 2**20)) == (
        "stream_array_size=137000000"
    )


def test_onboarding_a_large_cache_machine_reports_its_stream_arrays(sites_root):
    detection = vm()
    detection.topology = _with_l3(detection.topology, "icelake", 260 * 2**20)
    report = onboard.onboard("big-llc", detection=detection)
    assert "STREAM arrays of 137,000,000 elements" in report.render()
    packages = yaml.safe_load(
        (sites_root / "site-configs/big-llc/spack/packages.yaml").read_text()
    )["packages"]
    assert packages["stream"] == {
        "require": ['stream_array_size=137000000 cflags="-mcmodel=medium"']
    }


def test_mpis_given_a_prefix_of_their_own_are_named_for_review(sites_root):
    """Debian's MPIs live in /usr behind its alternatives: onboarding gives each a prefix of
    its own where mpi_prefix makes them (the machine's directory, else the user's:
    buildcache.externals_dirs), and the review names them there (it looked in
    .sitebench/externals, where none are since they moved)."""
    from sitebench.spack import buildcache

    detection = vm(("openmpi", "mpich"))
    for mpi in ("openmpi", "mpich"):
        for ext in detection.packages[mpi]["externals"]:
            ext["prefix"] = "/usr"  # as Spack finds Debian's
    text = onboard.onboard("usrmpi", detection=detection).render()
    packages = yaml.safe_load(
        (sites_root / "site-configs/usrmpi/spack/packages.yaml").read_text()
    )["packages"]
    moved = [
        mpi
        for mpi in ("openmpi", "mpich")
        for ext in (packages.get(mpi) or {}).get("externals") or []
        if Path(str(ext.get("prefix", ""))).parent in buildcache.externals_dirs()
    ]
    assert moved, packages.get("openmpi")
    assert f"{', '.join(moved)}: in /usr behind Debian's alternatives" in text, text
