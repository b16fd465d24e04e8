"""The loop's steps as an ordinary user, in a checkout only that user can read.

The test user (``sitebench-test``, made with ``useradd`` when missing) gets a copy of this
checkout's working tree (tracked and untracked files, as ``git clone`` plus the edits not
yet committed) in a 0700 directory it owns, its own state directory
(``SITEBENCH_STATE_DIR``: the venv the launcher makes, the store, the report) and the PATH
Debian gives an ordinary user: no sbin directory. Each command runs through ``runuser``
with nothing of root's environment but pip's settings; none may end in a traceback.
Needs root to make the user (skips, saying so, otherwise).
"""

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT

from sitebench.parsers import java_pingpong
from sitebench.results.rundirs import case_folder
from sitebench.services import programs
from sitebench.spack import buildcache
from sitebench.discovery import local_site

USER = "sitebench-test"
#: Debian's PATH for an ordinary user (/etc/login.defs ENV_PATH, /etc/profile): no sbin.
ORDINARY_PATH = "/usr/local/bin:/usr/bin:/bin"


def _skip_reason():
    if os.geteuid() != 0:
        return (
            "NOT ROOT: making the test user (useradd) and acting as it (runuser) need root; "
            "run ./sitebench test as root to test the loop as an ordinary user"
        )
    missing = [p for p in ("useradd", "runuser", "git") if not programs.which(p)]
    if missing:
        return f"missing {', '.join(missing)} (Debian: passwd, util-linux, git)"
    return None


def _ensure_user():
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            [programs.which("useradd"), "--no-create-home", "--shell", "/bin/sh", USER],
            check=True,
        )
        return pwd.getpwnam(USER)


def _chown_tree(top, uid, gid):
    os.lchown(top, uid, gid)
    for parent, dirs, files in os.walk(top):
        for name in dirs + files:
            os.lchown(os.path.join(parent, name), uid, gid)


@pytest.fixture(scope="module")
def checkout():
    """(the user's copy of the checkout, its state directory, its home)."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    user = _ensure_user()
    # Not tmp_path: pytest keeps /tmp/pytest-of-root at 0700, closed to the test user.
    base = Path(tempfile.mkdtemp(prefix="sitebench-unprivileged.", dir="/tmp"))
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        copy = base / "checkout"
        for rel in filter(None, listed.split("\0")):
            source = ROOT / rel
            if source.is_file() or source.is_symlink():
                (copy / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy / rel, follow_symlinks=False)
        for name in ("state", "home"):
            (base / name).mkdir()
        _chown_tree(base, user.pw_uid, user.pw_gid)
        base.chmod(0o700)  # only the test user reads its checkout
        copy.chmod(0o700)
        yield copy, base / "state", base / "home"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_user(checkout, *argv, timeout=900, extra_env=None, wrap=()):
    copy, state, home = checkout
    env = {
        **(extra_env or {}),
        "PATH": ORDINARY_PATH,
        "HOME": str(home),
        "USER": USER,
        "LOGNAME": USER,
        "LANG": "C.UTF-8",
        "SITEBENCH_STATE_DIR": str(state),
        # pip's index settings (the launcher makes the user's venv with them).
        **{k: v for k, v in os.environ.items() if k.startswith("PIP_")},
    }
    command = [*wrap, programs.which("runuser"), "-u", USER, "--", "env", "-i"]
    command += [f"{k}={v}" for k, v in env.items()] + [str(a) for a in argv]
    proc = subprocess.run(
        command,
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-6000:]
    return proc, out


@pytest.mark.slow
def test_compare_report_and_regressions_as_an_ordinary_user(checkout):
    proc, out = as_user(checkout, "./sitebench", "compare", "local", "local-slurm")
    assert proc.returncode == 0, out[-6000:]
    assert "StreamCheck" in proc.stdout
    proc, out = as_user(checkout, "./sitebench", "regressions", "local")
    assert proc.returncode in (0, 1), out[-6000:]  # 1: a drift was flagged
    proc, out = as_user(checkout, "./sitebench", "report")
    assert proc.returncode == 0, out[-6000:]
    report = checkout[1] / "report" / "index.html"
    assert report.stat().st_uid == pwd.getpwnam(USER).pw_uid and report.stat().st_size > 10_000


@pytest.mark.slow
def test_local_detection_finds_blas_without_sbin_on_path(checkout):
    # `ldconfig -p` (in /sbin) tells where the BLAS libraries are; an ordinary user's
    # detection stopped there with FileNotFoundError: ldconfig.
    script = (
        "import json; from sitebench.discovery import local_site as s; print(json.dumps("
        "{'blas': {so: s.library_dirs(so) for so in s.BLAS_LIBRARIES.values()},"
        " 'extras': sorted(s.extra_externals())}))"
    )
    python = checkout[1] / "venv" / "bin" / "python"
    if not python.exists():  # the launcher makes the venv; any command will do
        as_user(checkout, "./sitebench", "--help")
    proc, out = as_user(checkout, python, "-c", script)
    assert proc.returncode == 0, out[-6000:]
    found = json.loads(proc.stdout)
    # What root finds, with sbin on its PATH.
    assert found["blas"] == {
        so: local_site.library_dirs(so) for so in local_site.BLAS_LIBRARIES.values()
    }
    assert found["extras"] == sorted(local_site.extra_externals())


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["cluster", "start"],
            ["needs root", "SlurmUser=root", "ask the admin", "export SITEBENCH_SLURM_DIR=DIR"],
        ),
        (["cluster", "start", "--nodes", "2"], ["needs root", "network namespaces"]),
        (["qemu-run", "--site", "arm64-neoverse-n1"], ["needs root", "chroot", "sudo rule"]),
    ],
)
def test_what_needs_root_says_so_before_it_starts(checkout, argv, words):
    proc, out = as_user(checkout, "./sitebench", *argv)
    assert proc.returncode != 0
    for word in words:
        assert word in proc.stderr, out[-4000:]
    # Nothing was started or made: no cluster directory, no root.
    assert not (checkout[1] / "slurm").exists()


@pytest.mark.slow
def test_nightly_install_status_and_remove_in_the_users_own_crontab(checkout):
    if not programs.which("crontab"):
        pytest.skip("no crontab (Debian: apt-get install cron)")
    try:
        proc, out = as_user(
            checkout, "./sitebench", "nightly", "install", "--site", "local", "--at", "02:30"
        )
        assert proc.returncode == 0, out[-4000:]
        listed = subprocess.run(
            ["crontab", "-l", "-u", USER], capture_output=True, text=True
        ).stdout
        assert "nightly run --site local" in listed, listed
        proc, out = as_user(checkout, "./sitebench", "nightly", "status", "--site", "local")
        assert proc.returncode == 0 and "local" in proc.stdout, out[-4000:]
        proc, out = as_user(checkout, "./sitebench", "nightly", "remove", "--site", "local")
        assert proc.returncode == 0, out[-4000:]
        listed = subprocess.run(
            ["crontab", "-l", "-u", USER], capture_output=True, text=True
        ).stdout
        assert "nightly run --site local" not in listed
    finally:
        subprocess.run(["crontab", "-r", "-u", USER], capture_output=True)


@pytest.mark.slow
def test_publish_trust_and_pull_as_an_ordinary_user(checkout):
    """The exchange as the test user: a bare repository of its own, `publish` signing with a
    key made in its home, `trust add` of that key, and `pull` of the signed runs into another
    results directory, verified; nothing needs root."""
    copy, state, home = checkout
    bare, seed, pulled = state / "exchange.git", state / "seed", state / "pulled"
    for argv in (
        ["git", "init", "-q", "--bare", "-b", "main", bare],
        ["git", "init", "-q", "-b", "main", seed],
        [
            "git",
            "-C",
            seed,
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "seed",
        ],
        ["git", "-C", seed, "push", "-q", bare, "main"],
    ):
        proc, out = as_user(checkout, *argv)
        assert proc.returncode == 0, out
    local_runs = sorted(p.name for p in (copy / "results/local").iterdir() if p.is_dir())
    proc, out = as_user(checkout, "./sitebench", "publish", "--site", "local", "--remote", bare)
    assert proc.returncode == 0 and "published local: " in proc.stdout, out[-4000:]
    # The key may be older than this publish (another command of this module made it).
    proc, out = as_user(checkout, "./sitebench", "trust", "key", "local")
    assert proc.returncode == 0, out[-4000:]
    key = proc.stdout.splitlines()[-1].removeprefix("made ").split(": give it")[0]
    assert key.startswith(str(home)) and Path(key).stat().st_uid == pwd.getpwnam(USER).pw_uid
    proc, out = as_user(checkout, "./sitebench", "trust", "add", "local", key)
    assert proc.returncode == 0, out[-4000:]
    elsewhere = {"SITEBENCH_RESULTS_DIR": str(pulled), "SITEBENCH_STORE_DIR": str(state / "s2")}
    proc, out = as_user(checkout, "./sitebench", "pull", "--remote", bare, extra_env=elsewhere)
    assert proc.returncode == 0, out[-4000:]
    assert f"pulled local: {len(local_runs)} new runs" in proc.stdout, out[-4000:]
    # Another site's runs stay in git (figures and provenance); one comes out whole on demand.
    log = (pulled / ".exchange" / "sitebench-runs" / "local.tsv").read_text().splitlines()
    assert sorted(line.split("\t")[0] for line in log) == local_runs
    assert not (pulled / "local").exists()
    proc, out = as_user(
        checkout, "./sitebench", "show", f"local/{local_runs[-1]}", extra_env=elsewhere
    )
    assert proc.returncode == 0, out[-4000:]
    assert (pulled / "local" / local_runs[-1] / "report.json").is_file()


@pytest.fixture(scope="module")
def mpj_program():
    """(a directory the test user owns, with an MPJ home of Debian's jars and the ping-pong
    built by hand against them, and this checkout's mpj-niodev-run)."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    jars = Path("/usr/share/mpj/lib")
    beside = [Path("/usr/share/java") / n for n in ("log4j-1.2.jar", "commons-io.jar")]
    javac, jar = programs.which("javac"), programs.which("jar")
    if not ((jars / "starter.jar").is_file() and all(p.is_file() for p in beside) and javac):
        pytest.skip("needs Debian's MPJ Express and a JDK (libmpj-java, default-jdk-headless)")
    user = _ensure_user()
    recipe = ROOT / "spack-repo/spack_repo/sitebench/packages/java_pingpong"
    base = Path(tempfile.mkdtemp(prefix="sitebench-unprivileged-mpj.", dir="/tmp"))
    try:
        home = base / "mpj"
        (home / "lib").mkdir(parents=True)
        (home / "conf").mkdir()
        for path in [*jars.glob("*.jar"), *beside]:
            shutil.copyfile(path, home / "lib" / path.name)
        shutil.copyfile("/usr/share/mpj/conf/mpjexpress.conf", home / "conf/mpjexpress.conf")
        classes = base / "classes"
        subprocess.run(
            [javac, "-nowarn", "-d", classes, "-cp", home / "lib/mpj.jar",
             recipe / "JavaPingPong.java", recipe / "MpjPingPong.java"],
            check=True,
        )  # fmt: skip
        subprocess.run(
            [jar, "cfe", base / "pingpong-mpj.jar", "MpjPingPong", "-C", classes, "."],
            check=True,
        )
        shutil.copy2(recipe / "mpj-niodev-run", base / "mpj-niodev-run")
        _chown_tree(base, user.pw_uid, user.pw_gid)
        base.chmod(0o700)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_mpj_niodev_runs_as_an_ordinary_user(mpj_program):
    """mpj-niodev-run re-executes itself as uid 0 of a user namespace, where the JVM takes
    user.home=/root: MPJ's daemon could not write its job's mpjdev.conf there and the run
    hung for good (issue 38). With a home of its own the run completes and is judged as
    any other; the daemon's home is gone afterwards."""
    base = mpj_program
    env = [f"PATH={ORDINARY_PATH}", f"HOME={base}", f"MPJ_HOME={base / 'mpj'}", "LANG=C.UTF-8"]
    command = [programs.which("runuser"), "-u", USER, "--", "env", "-i", *env]
    command += [base / "mpj-niodev-run", "-np", "2", "-jar", base / "pingpong-mpj.jar"]
    before = set(Path("/tmp").glob("tmp.*"))
    proc = subprocess.run(
        [*command, "64", "5", "10", "1", "2"],
        capture_output=True,
        text=True,
        timeout=300,  # the hang it guards against: a failure, not a test waiting for good
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    found = java_pingpong.problems(
        proc.stdout, proc.stderr, api="mpj", min_size=1, max_size=64, niodev=True
    )
    assert found == [], (found, proc.stdout[-2000:], proc.stderr[-2000:])
    owned = [p for p in set(Path("/tmp").glob("tmp.*")) - before if p.owner() == USER]
    assert owned == [], owned  # the daemon's home and the script's files were removed


#: One case of every check family of the quick suite (ReFrame -n patterns on the display
#: name; a pattern with "%" is ReFrame's parameter syntax, so none has one), and the cases
#: they depend on (PARSEC's and Gadget-2's 1-thread baselines). Until issue 38 they ran as
#: root only; MPJ's niodev hung as a user. NpbJavaCheck is left out: npb-java is not a root
#: of environments/local, so it skips (reframe-checks/README.md).
FAMILY_CASES = (
    "^StreamCheck.*threads=all$",
    "^HplCheck",
    "^NpbCheck.*benchmark=cg.*ranks=all$",
    "^NpbMessagesCheck.*benchmark=cg",
    "^ParsecCheck.*benchmark=blackscholes",
    "^SysbenchCheck.*threads=1$",
    "^OsuLatencyCheck.*mapping=core.*transport=shm",
    "^JacobiCheck.*mapping=core.*ranks=all$",
    "^RingCheck.*mapping=core.*ranks=all$",
    "^PagesCheck.*benchmark=memaccess.*pages=small",
    "^JavaPingPongCheck.*device=niodev.*mapping=core",
    "^Gadget2Check.*ranks=all",
)
#: Cut down as the loop's test cuts the quick suite (tests/test_loop.py).
FAMILY_SETTINGS = {
    "NpbCheck.npb_class": "S",
    "NpbMessagesCheck.npb_class": "S",
    "HplCheck.n": "2048",
    "SysbenchCheck.run_time": "5",
    "SysbenchCheck.table_size": "10000",
    "ParsecCheck.num_options": "100000",
    "OsuLatencyCheck.max_size": "65536",
}
#: What the user may take from root's cache: the machine's binaries and Spack's indexes and
#: concretized locks. The MPI prefixes its detection finds in the machine's directory, as
#: root made them (``/var/cache/sitebench/externals``): so its specs hash as root's.
SHARED_CACHE = ("buildcache", "spack-indexes", "spack-locks")


def _mpi_prefixes(packages_yaml):
    import yaml

    packages = yaml.safe_load(Path(packages_yaml).read_text())["packages"]
    return {
        mpi: [e["prefix"] for e in (packages.get(mpi) or {}).get("externals") or []]
        for mpi in ("openmpi", "mpich")
    }


@pytest.mark.spack
@pytest.mark.slow
def test_one_case_of_every_check_family_as_an_ordinary_user(checkout):
    """./sitebench run as the test user, binaries from the machine's binary cache (copied
    into its own cache: root's home is closed to it), one toolchain: every case passes,
    the session and every case's output are the user's. The user's MPI externals are the
    machine's prefixes root made, so its specs hash as root's and come from root's builds
    (until issue 38 they were per user, and the test ran in a mount namespace that showed
    the user's cache at root's path)."""
    from sitebench.common import paths

    copy, _state, home = checkout
    user = pwd.getpwnam(USER)
    roots_cache = paths.user_cache_dir()
    cache = home / ".cache" / "sitebench"
    for name in SHARED_CACHE:
        source = roots_cache / name
        if source.is_dir() and not (cache / name).exists():
            shutil.copytree(source, cache / name, symlinks=True)
    if not (cache / "buildcache").is_dir():
        pytest.skip(f"no binary cache in {roots_cache}: run the loop's test first")
    _chown_tree(home, user.pw_uid, user.pw_gid)
    options = [a for pattern in FAMILY_CASES for a in ("-n", pattern)]
    options += [a for item in FAMILY_SETTINGS.items() for a in ("-S", "=".join(item))]
    stored = copy / "results" / "local"
    before = set(stored.iterdir())  # the example runs the checkout carries
    started = time.monotonic()
    proc, out = as_user(
        checkout, "./sitebench", "run", "--toolchain", "gcc-openmpi", "--", *options,
        timeout=2400,
    )  # fmt: skip
    took = time.monotonic() - started
    runs = sorted(set(stored.iterdir()) - before)
    mine = _mpi_prefixes(copy / "site-configs/local/spack/packages.yaml")
    assert mine == _mpi_prefixes(ROOT / "site-configs/local/spack/packages.yaml"), mine
    assert all(p.startswith(str(buildcache.externals_dirs()[0])) for p in mine["openmpi"]), mine
    assert len(runs) == 1, out[-6000:]
    report = json.loads((runs[-1] / "report.json").read_text())
    assert report["session_info"]["user"] == USER, out[-6000:]
    cases = [c for r in report["runs"] for c in r["testcases"] if not c.get("fixture")]
    by_family = {}
    for case in cases:
        by_family.setdefault(case["name"].split()[0], []).append(case)
    assert sorted(by_family) == sorted(p[1:].split(".")[0] for p in FAMILY_CASES), by_family
    failed = [(c["name"], c["fail_phase"], c["fail_reason"]) for c in cases]
    failed = [f for f, c in zip(failed, cases) if c["result"] != "pass"]
    assert failed == [], (failed, out[-4000:])
    assert proc.returncode == 0, out[-6000:]
    for case in cases:
        # The job's own files: written by the benchmark's processes, as the user.
        folder = case_folder(runs[-1], case)
        outputs = list(folder.iterdir()) if folder else []
        assert outputs, case["name"]
        assert {p.stat().st_uid for p in outputs} == {user.pw_uid}, case["name"]
    print(f"{len(cases)} cases as {USER} in {took:.0f} s")
