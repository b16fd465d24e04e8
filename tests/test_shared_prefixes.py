"""The per-user external prefixes every checkout builds against (.../externals/<mpi>) are
replaced in one rename: a reader polling them while detect remakes them never finds them
missing (issue 38: a poller saw the include directory missing 83 times during one
``detect --redetect`` when they were deleted and made again)."""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sitebench.common import files
from sitebench.discovery import mpi_prefix

#: Polls ``include/mpi.h``-like paths under a prefix until a stop file appears; prints
#: how many looks it made and how many found a path missing.
POLLER = r"""
import os, sys
stop, paths = sys.argv[1], sys.argv[2:]
looks = missing = 0
open(stop + ".ready", "w").close()
while not os.path.exists(stop):
    looks += 1
    missing += not all(os.path.exists(p) for p in paths)
print(looks, missing)
"""


def poll_while(tmp_path, paths, work):
    """(looks, misses) of a poller process watching ``paths`` while ``work()`` runs."""
    stop = tmp_path / "stop"
    poller = subprocess.Popen(
        [sys.executable, "-c", POLLER, str(stop), *map(str, paths)],
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "stop.ready").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        work()
    finally:
        stop.touch()
        out, _ = poller.communicate(timeout=60)
    looks, missing = map(int, out.split())
    return looks, missing


def two_versions(n):
    """Fills that alternate between two trees, so that every publish replaces the last."""

    def fill(fresh, i=n):
        (fresh / "include").mkdir()
        (fresh / "include" / "mpi.h").write_text(f"/* version {i % 2} */\n")
        (fresh / "lib").mkdir()
        (fresh / "lib" / "libmpi.so").symlink_to(f"/nowhere/libmpi.so.{i % 2}")

    return fill


def test_a_reader_never_finds_a_republished_prefix_missing(tmp_path, monkeypatch):
    farm = tmp_path / "externals" / "openmpi"
    watched = [farm / "include" / "mpi.h", farm / "lib"]
    farm.mkdir(parents=True)
    two_versions(0)(farm)

    def naive():  # the old way: delete, then make again
        for i in range(200):
            shutil.rmtree(farm)
            farm.mkdir()
            two_versions(i)(farm)

    looks, missing = poll_while(tmp_path, watched, naive)
    # The poller can see a gap: without this the test below could not fail.
    assert missing > 0, f"the poller saw no gap in {looks} looks of a delete-and-remake"

    (tmp_path / "stop").unlink()
    (tmp_path / "stop.ready").unlink()

    def publish():
        for i in range(200):
            assert files.publish_tree(farm, two_versions(i)) == farm

    looks, missing = poll_while(tmp_path, watched, publish)
    assert looks > 1000 and missing == 0, (looks, missing)
    assert (farm / "include" / "mpi.h").read_text() == "/* version 1 */\n"
    # Still a plain directory (earlier sitebench versions remove it with rmtree); the trees
    # replaced are kept aside a while (a reader may be inside one), then removed.
    assert farm.is_dir() and not farm.is_symlink()
    aside = list(farm.parent.glob(".openmpi-replaced-*"))
    assert len(aside) == 200, len(aside)
    later = time.time() + files.REPLACED_KEPT_S + 1
    monkeypatch.setattr(files.time, "time", lambda: later)
    files.publish_tree(farm, two_versions(1))  # the current tree again: nothing to swap
    left = sorted(p.name for p in farm.parent.iterdir())
    assert left == [".openmpi.lock", "openmpi"], left


def test_an_unchanged_prefix_is_left_as_it_is(tmp_path):
    farm = tmp_path / "openmpi"
    files.publish_tree(farm, two_versions(0))
    inode = farm.stat().st_ino
    files.publish_tree(farm, two_versions(2))  # the same tree
    assert farm.stat().st_ino == inode
    assert files.publish_tree(farm, lambda fresh: False) is None
    assert farm.stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.iterdir()) == [".openmpi.lock", "openmpi"]


@pytest.mark.skipif(
    not (mpi_prefix.alternatives_prefix("openmpi") and mpi_prefix.alternatives_prefix("mpich")),
    reason="needs Debian's Open MPI and MPICH alternatives (openmpi-bin, mpich)",
)
def test_redetecting_the_mpi_prefixes_keeps_them_in_place(tmp_path):
    """The real prefixes of Debian's two MPIs, made again and again (as each ``detect``
    of each checkout does) while a reader polls their headers and libraries."""
    farms = {mpi: tmp_path / "externals" / mpi for mpi in ("openmpi", "mpich")}
    for mpi, farm in farms.items():
        # Made with a dangling extra link: the first make below replaces it, while the
        # reader polls.
        farm.mkdir(parents=True)
        mpi_prefix._fill(mpi, mpi_prefix.alternatives_prefix(mpi), farm, "/usr/bin")
        (farm / "bin" / "mpi-gone").symlink_to("/nowhere")
    watched = [f / "include" / "mpi.h" for f in farms.values()] + [
        farms["openmpi"] / "lib" / "libmpi.so",
        farms["mpich"] / "lib" / "libmpich.so",
        farms["mpich"] / "bin" / "hydra_pmi_proxy",
    ]
    assert all(p.exists() for p in watched), watched

    def redetect():
        for _ in range(5):
            for mpi, farm in farms.items():
                assert mpi_prefix.make(mpi, farm) == farm

    looks, missing = poll_while(tmp_path, watched, redetect)
    assert looks > 100 and missing == 0, (looks, missing)
    assert not any((f / "bin" / "mpi-gone").is_symlink() for f in farms.values())


def as_other_user(work):
    """``work()``'s result, computed in a child process that is uid/gid 65534 (nobody):
    another ordinary user of the machine."""
    import json
    import os

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0, said
    return json.loads(said)


@pytest.mark.skipif(
    __import__("os").geteuid() != 0, reason="NOT ROOT: acting as another user needs root"
)
def test_the_machines_prefix_is_shared_by_users_and_a_users_own_only_as_a_fallback(tmp_path):
    """Root publishes a prefix in the machine's directory, readable by all whatever its
    umask; another user making the same tree uses it as it is (so its specs hash as root's),
    and one making another tree, which it may not write there, gets its own and is told
    why. A machine directory others may write is never built against."""
    import os
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="sitebench-shared-", dir="/tmp"))
    try:
        base.chmod(0o755)  # /tmp/pytest-of-root is closed to the other user
        machine, own = base / "var" / "externals", base / "home" / "externals"
        own.parent.mkdir()
        os.chown(own.parent, 65534, 65534)
        old = os.umask(0o077)
        try:
            farm, passed = files.publish_shared("openmpi", [machine, own], two_versions(0))
        finally:
            os.umask(old)
        assert (farm, passed) == (machine / "openmpi", [])
        for path in (base / "var", machine, farm, farm / "include"):
            assert path.stat().st_mode & 0o777 == 0o755, path
        assert (farm / "include" / "mpi.h").stat().st_mode & 0o777 == 0o644

        def make(version):
            farm, passed = files.publish_shared("openmpi", [machine, own], two_versions(version))
            return str(farm), passed, (Path(farm) / "include" / "mpi.h").read_text()

        assert as_other_user(lambda: make(0)) == [str(farm), [], "/* version 0 */\n"]
        theirs, passed, header = as_other_user(lambda: make(1))
        assert theirs == str(own / "openmpi") and header == "/* version 1 */\n"
        assert passed == [f"{machine}: Permission denied"], passed
        assert (farm / "include" / "mpi.h").read_text() == "/* version 0 */\n"
        machine.chmod(0o777)
        roots = base / "root-home" / "externals"
        farm, passed = files.publish_shared("openmpi", [machine, roots], two_versions(0))
        assert farm == roots / "openmpi", farm
        assert passed == [f"{machine}: writable by others (mode 777)"], passed
    finally:
        shutil.rmtree(base, ignore_errors=True)
