"""Slurm's ``scrontab``, which Debian 12 builds but installs in no package, built by the
tests from Debian's own source package of the installed Slurm, against its installed
``libslurmfull``, once per user (tests/debian_unpacked.py's cache and lock):
``~/.cache/sitebench/test-debs/scrontab-<version>/bin/scrontab``.

The source comes through apt with a private list of ``deb-src`` lines naming the mirrors
the host's apt uses (the host needs none), so apt verifies it as it verifies packages.
Only ``src/scrontab`` is compiled; Debian's patches edit configure.ac, so it is
regenerated first (sview's glib/gtk macros stubbed: the GUI is not built).
"""

import subprocess
from pathlib import Path

import debian_unpacked
from debian_unpacked import Unavailable, apt_get
from sitebench.sites import qemu_site

SLURM_LIBS = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
GTK_STUBS = "AC_DEFUN([AM_PATH_GLIB_2_0], [$3])\nAC_DEFUN([AM_PATH_GTK_2_0], [$3])\n"


def installed_slurm():
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "slurm-client"], capture_output=True, text=True
    )
    if proc.returncode != 0 or not proc.stdout:
        raise Unavailable("slurm-client is not installed (README's apt line for the tests)")
    if not Path(SLURM_LIBS, "libslurmfull.so").is_file():
        raise Unavailable(f"no {SLURM_LIBS}/libslurmfull.so to link scrontab against")
    return proc.stdout


def scrontab():
    """The path of a ``scrontab`` for the installed Slurm; :class:`Unavailable` says why not."""
    version = installed_slurm()
    tree = debian_unpacked.made_once(f"scrontab-{version}", lambda work: _build(work, version))
    return tree / "bin" / "scrontab"


def _run(argv, cwd, what, timeout=1200):
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        # A build that fails here is a real problem of this recipe: said whole, not skipped.
        raise RuntimeError(f"{what} failed in {cwd}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def _build(work, version):
    archive, security = qemu_site.debian_mirrors()
    apt = work / "apt"
    (apt / "lists" / "partial").mkdir(parents=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True)
    suite = qemu_site.SUITE  # the host's Debian release, whose Slurm is installed
    (apt / "sources.list").write_text(
        f"deb-src {archive} {suite} main\n"
        f"deb-src {archive} {suite}-updates main\n"
        f"deb-src {security} {suite}-security main\n"
    )
    private = [
        f"-oDir::Etc::SourceList={apt / 'sources.list'}",
        "-oDir::Etc::SourceParts=/nonexistent",
        f"-oDir::State::Lists={apt / 'lists'}",
        f"-oDir::Cache={apt / 'cache'}",
        "-oDebug::NoLocking=1",
    ]
    apt_get([*private, "update"], work, what="apt-get update (Debian's deb-src lists)")
    apt_get(
        [*private, "source", "--download-only", f"slurm-wlm={version}"],
        work,
        what=f"apt-get source slurm-wlm={version}",
    )
    dsc = next(work.glob("slurm-wlm_*.dsc"))
    _run(["dpkg-source", "-x", dsc.name, "src"], work, "dpkg-source -x")
    (work / "stubs").mkdir()
    (work / "stubs" / "gtk.m4").write_text(GTK_STUBS)
    src = work / "src"
    _run(["autoreconf", "-fi", "-I", str(work / "stubs")], src, "autoreconf")
    build = src / "build"
    build.mkdir()
    _run(
        ["../configure", "--prefix=/usr", "--libdir=${prefix}/lib/x86_64-linux-gnu",
         "--sysconfdir=/etc/slurm", "--without-rpath", "--disable-debug"],
        build,
        "configure",
    )  # fmt: skip
    link = f"-Wl,-rpath={SLURM_LIBS} -L{SLURM_LIBS} -lslurmfull"
    _run(
        ["make", "-C", "src/scrontab", "scrontab", "LIB_SLURM_BUILD=", f"LIB_SLURM={link}"],
        build,
        "make scrontab",
    )
    tree = work / "tree"
    (tree / "bin").mkdir(parents=True)
    (build / "src/scrontab/scrontab").rename(tree / "bin" / "scrontab")
    return tree
