"""Shared test fixtures. Tests that need Spack skip, saying why, where it is absent."""

import contextlib
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT / "src"))


def spack_missing_reason():
    if os.environ.get("SPACK_ROOT") or shutil.which("spack"):
        return None
    if (ROOT / ".sitebench" / "spack" / "bin" / "spack").is_file():
        return None
    if os.environ.get("SITEBENCH_SPACK_GIT"):
        return None
    return (
        "SPACK NOT AVAILABLE: no spack on PATH, no SPACK_ROOT, no clone in .sitebench/ and "
        "no SITEBENCH_SPACK_GIT; install Spack 1.1.0 to run the Spack tests"
    )


@pytest.fixture(scope="session", autouse=True)
def local_site_detected():
    """The local site detected once, before the first test, as the first `./sitebench run`
    does: its ReFrame configuration makes one environment per detected toolchain
    (site-configs/local/toolchains.yaml), so listing or running the checks needs it. Where
    Spack cannot be had, the tests that load that configuration fail, naming the detection."""
    from sitebench.discovery import local_site

    if local_site.is_detected() or spack_missing_reason():
        return
    from sitebench.spack import pinned

    local_site.detect(pinned.setup())


RELIABILITY_KINDS = ("reliability_input", "reliability_fault")


def pytest_itemcollected(item):
    """`-m reliability` selects both kinds (before pytest deselects by marker)."""
    if any(item.get_closest_marker(kind) for kind in RELIABILITY_KINDS):
        item.add_marker("reliability")


#: The test files that took longest, started first: under pytest-xdist a worker takes the
#: next file in collection order, so a long file left for last would run alone while the
#: other workers idle. Seconds of each file's tests among the 60 slowest of `./sitebench test
#: -n 2` on the 2-core VM on 2026-11-27: 495, 301, 240, 229, 171, 169, 140, 106, 103, 101.
#: A stale list costs wall time only.
LONGEST_FIRST = (
    "test_slurm_cluster.py",
    "test_modules.py",
    "test_loop.py",
    "test_spack.py",
    "test_targets.py",
    "test_buildcache.py",
    "test_nightly.py",
    "test_lock_drift.py",
    "test_recipe_npb_sysbench_osu.py",
    "test_recipe_parsec.py",
)


def pytest_collection_modifyitems(items):
    """The files of LONGEST_FIRST first, in its order; the others after, as collected."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True)
def one_slurm_cluster_at_a_time(request):
    """The tests marked ``slurm`` start the private Slurm cluster, which listens on fixed
    ports and makes network namespaces of fixed names: one such test at a time on the
    machine, whichever test worker or checkout runs it (an autouse fixture, so it is set up
    before the cluster starts and torn down after it stops)."""
    if request.node.get_closest_marker("slurm") is None:
        yield
        return
    from sitebench.common.files import one_at_a_time

    with one_at_a_time(Path(tempfile.gettempdir()) / "sitebench-tests-slurm-cluster.lock"):
        yield


@pytest.fixture(autouse=True)
def private_store(tmp_path_factory, monkeypatch):
    """Each test's results-store index in its own temporary directory, never in .sitebench/."""
    monkeypatch.setenv("SITEBENCH_STORE_DIR", str(tmp_path_factory.mktemp("store")))
    # The exchange's trust list and signing keys too, never the user's ~/.config/sitebench
    # (a short path: scheduled lines carry it, and cron takes 1000 characters a line).
    config = tempfile.mkdtemp(prefix="sbc-")
    monkeypatch.setenv("SITEBENCH_CONFIG_HOME", config)
    yield
    shutil.rmtree(config, ignore_errors=True)


@pytest.fixture(scope="session")
def spack():
    reason = spack_missing_reason()
    if reason:
        pytest.skip(reason)
    from sitebench.spack import pinned as spack_mod

    return spack_mod.setup()


@pytest.fixture
def results_root(tmp_path, monkeypatch):
    root = tmp_path / "results"
    monkeypatch.setenv("SITEBENCH_RESULTS_DIR", str(root))
    return root


def sitebench(*args, env=None, check=False):
    """Run the CLI as a user would (same Python, same environment)."""
    proc = subprocess.run(
        [sys.executable, "-m", "sitebench", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"sitebench {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def build_in_temp_env(spack, tmp_path, specs, packages=None):
    """Concretize and install ``specs`` in a throw-away environment and install tree.

    The environment includes the local site's Spack config (externals), so
    only the benchmark itself and what it needs beyond the machine is installed: from the
    machine's binary cache where an earlier test, run or checkout built it (the suite builds
    each spec at most once per machine), else from the source mirror, checksums enforced,
    and pushed to the cache. Returns the install tree.
    """

    from sitebench.discovery import local_site
    from sitebench.spack import buildcache

    if not os.environ.get("SITEBENCH_MIRROR"):
        pytest.skip(
            "NO SOURCE MIRROR: set SITEBENCH_MIRROR (a Spack source mirror) to test "
            "recipe builds; builds from upstream downloads are not tested"
        )
    local_site.detect(spack)
    settings = {
        "concretizer": {"unify": True},
        "config": {"install_tree": {"root": str(tmp_path / "store")}},
    }
    if packages:
        settings["packages"] = packages
    env_dir = local_site.write_environment(tmp_path / "env", specs, **settings)
    buildcache.refresh_index(spack, spack.buildcache)  # what earlier tests pushed
    proc = spack.run("-e", env_dir, "install", "--fresh", capture=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return tmp_path / "store"


def unjudged(spack):
    """Spack's environment for ReFrame, with no references: for tests of sanity only.

    Their runs are shortened or perturbed on purpose, so the site's references do not apply;
    the references themselves are tested in test_loop.py.
    """
    empty = ROOT / ".sitebench" / "no-references.yaml"
    empty.parent.mkdir(exist_ok=True)
    empty.write_text("{}\n")
    # One toolchain, the first (GCC with Open MPI on Debian): these tests are about the
    # checks' sanity, which test_loop and test_toolchains run in every toolchain.
    return {
        **spack.environ(),
        "SITEBENCH_REFERENCES": str(empty),
        "SITEBENCH_TOOLCHAINS": first_local_toolchain(),
    }


def first_local_toolchain():
    """The name of the local site's first detected toolchain."""
    import yaml

    from sitebench.sites import toolchains

    data = yaml.safe_load(toolchains.detected_file().read_text()) or {}
    return data["toolchains"][0]["name"]


@contextlib.contextmanager
def small_tmpfs(where, size):
    """A tmpfs of ``size`` (e.g. "2m") mounted at ``where``, for disk-full faults; unmounted
    at the end. Skips, saying why, where mounting is refused."""
    where.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(
            "CANNOT MOUNT A SMALL TMPFS (the disk-full test needs root or CAP_SYS_ADMIN): "
            + (proc.stderr.strip() or f"mount exited with {proc.returncode}")
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
