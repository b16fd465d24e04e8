"""The per-user external prefixes every checkout builds against (.../externals/<mpi>) are
replaced in one rename: a reader polling them while detect remakes them never finds them
missing (issue 38: a poller saw the include directory missing 83 times during one
``detect --redetect`` when they were deleted and made again)."""

import os
import shutil
import subprocess
import sys
import time

import pytest

from sitebench.common import files
from sitebench.sites import mpi_prefix

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


def test_a_reader_never_finds_a_republished_prefix_missing(tmp_path):
    farm = tmp_path / "externals" / "openmpi"
    watched = [farm / "include" / "mpi.h", farm / "lib"]
    farm.mkdir(parents=True)  # made before versions: a plain directory
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
    assert farm.is_symlink() and (farm / "include" / "mpi.h").read_text() == "/* version 1 */\n"
    # The version superseded last is kept a while (a reader may be inside it), one
    # superseded longer ago than files.SUPERSEDED_KEPT_S is removed.
    current = os.readlink(farm)
    (other,) = [p for p in farm.parent.glob(".openmpi-*") if p.name != current]
    long_ago = time.time() - files.SUPERSEDED_KEPT_S - 1
    os.utime(other, (long_ago, long_ago))
    files.publish_tree(farm, two_versions(3))  # the current tree again: nothing to swap
    left = sorted(p.name for p in farm.parent.iterdir())
    assert left == sorted(["openmpi", ".openmpi.lock", current]), left


def test_an_unchanged_prefix_is_left_as_it_is(tmp_path):
    farm = tmp_path / "openmpi"
    files.publish_tree(farm, two_versions(0))
    version, made = os.readlink(farm), farm.lstat().st_mtime_ns
    files.publish_tree(farm, two_versions(2))  # the same tree
    assert os.readlink(farm) == version and farm.lstat().st_mtime_ns == made
    assert files.publish_tree(farm, lambda fresh: False) is None
    assert os.readlink(farm) == version
    assert [p.name for p in tmp_path.iterdir() if "-new-" in p.name] == []


@pytest.mark.skipif(
    not (mpi_prefix.alternatives_prefix("openmpi") and mpi_prefix.alternatives_prefix("mpich")),
    reason="needs Debian's Open MPI and MPICH alternatives (openmpi-bin, mpich)",
)
def test_redetecting_the_mpi_prefixes_keeps_them_in_place(tmp_path):
    """The real prefixes of Debian's two MPIs, made again and again (as each ``detect``
    of each checkout does) while a reader polls their headers and libraries."""
    farms = {mpi: tmp_path / "externals" / mpi for mpi in ("openmpi", "mpich")}
    for mpi, farm in farms.items():
        # As sitebench made them before versions: plain directories, swapped for a
        # versioned one by the first make below, while the reader polls.
        farm.mkdir(parents=True)
        mpi_prefix._fill(mpi, mpi_prefix.alternatives_prefix(mpi), farm, "/usr/bin")
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
    assert all(f.is_symlink() for f in farms.values())
