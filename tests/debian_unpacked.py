"""Debian packages the tests need beyond the README's apt lines, prepared by the tests
themselves: ``apt-get download`` then ``dpkg -x`` into a tree of their own, once per user
under ``~/.cache/sitebench/test-debs/<name>/`` (``$SITEBENCH_CACHE_DIR`` moves it), never
installed (GCC 11 installed would become a second compiler of the local site; the Tcl
Environment Modules conflict with Lmod as packages).

Made under a lock (``flock``) beside the tree, in a directory renamed into place when
whole: two pytest-xdist workers, or two checkouts, asking at once download once and both
get the whole tree. Where apt cannot fetch the packages (no mirror, stale lists), the
reason is raised as :class:`Unavailable` and the test that needed them skips with it.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from sitebench.common import files, paths

#: Debian's GCC 11 (C, C++, Fortran) and the Tcl Environment Modules, by tree name.
GCC11 = (
    "gcc-11",
    "g++-11",
    "gfortran-11",
    "cpp-11",
    "gcc-11-base",
    "libgcc-11-dev",
    "libstdc++-11-dev",
    "libgfortran-11-dev",
)
ENVMOD = ("environment-modules",)
#: Where the system's runtime libraries are (the unpacked GCC's links point at them).
SYSTEM_LIBS = Path("/usr/lib/x86_64-linux-gnu")
COMPLETE = ".complete"


class Unavailable(Exception):
    """The packages could not be had here; the message says why and what would help."""


def root():
    return paths.user_cache_dir() / "test-debs"


def made_once(name, make):
    """The tree ``root()/name``, made once by ``make(work)``, which returns it made in
    ``work`` (a directory of its own beside the tree, removed after)."""
    final = root() / name
    if (final / COMPLETE).is_file():
        return final
    with files.one_at_a_time(root() / f".{name}.lock"):
        if (final / COMPLETE).is_file():  # made by whoever held the lock before us
            return final
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root()))
        try:
            tree = make(work)
            (tree / COMPLETE).write_text(f"{name}\n")
            if final.exists():  # left by an interrupted older layout: replaced
                shutil.rmtree(final)
            tree.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def unpacked(name, packages, finish=None, timeout=600):
    """The tree of ``packages`` unpacked together at ``root()/name``, made once;
    ``finish(tree)`` completes it before it is renamed into place."""

    def make(work):
        tree = _download_and_unpack(work, packages, timeout)
        if finish:
            finish(tree)
        return tree

    return made_once(name, make)


def apt_get(argv, cwd, timeout=600, what=None):
    """Run ``apt-get argv`` in ``cwd``; :class:`Unavailable` with apt's errors if it fails."""
    what = what or f"apt-get {' '.join(argv)}"
    try:
        proc = subprocess.run(
            ["apt-get", *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise Unavailable(f"{what}: {err}") from None
    if proc.returncode != 0:
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("E:")] or [
            proc.stderr.strip()[-300:]
        ]
        raise Unavailable(
            f"{what} failed ({'; '.join(errors)}): apt cannot reach a Debian mirror, "
            "or its lists are stale (apt-get update)"
        )
    return proc


def _download_and_unpack(work, packages, timeout):
    debs = work / "debs"
    debs.mkdir()
    apt_get(["download", *packages], debs, timeout, f"apt-get download {' '.join(packages)}")
    tree = work / "tree"
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), str(tree)], check=True, capture_output=True)
    return tree


def link_system_runtime(tree):
    """GCC's private directory links its runtime (libstdc++.so, libgcc_s.so, ...) to the
    shared libraries beside it, which belong to other packages: point them at the
    system's, as an installed GCC 11's are."""
    lib = tree / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True, exist_ok=True)
    for link in (tree / "usr/lib/gcc").rglob("*"):
        if link.is_symlink() and not link.exists():
            target = Path(os.readlink(link)).name
            if (SYSTEM_LIBS / target).exists() and not (lib / target).exists():
                (lib / target).symlink_to(SYSTEM_LIBS / target)


def gcc11():
    """Debian's GCC 11 unpacked: its ``usr/bin/gcc-11``, ``g++-11``, ``gfortran-11``."""
    return unpacked("gcc-11", GCC11, finish=link_system_runtime)


def envmod():
    """Debian's environment-modules unpacked: its ``modulecmd.tcl``."""
    return unpacked("environment-modules", ENVMOD)
