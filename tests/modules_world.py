"""A module tree whose compilers and MPIs live in prefixes of their own, for both module
systems (tests/test_modules.py).

* ``gcc/12``: a prefix whose ``bin/`` holds ``gcc``, ``g++`` and ``gfortran`` (Debian's
  GCC 12 under its versioned names);
* ``openmpi/<v>`` and ``mpich/<v>``: each MPI's own prefix (``sitebench.sites.mpi_prefix``,
  as detection makes them for Debian's side-by-side MPIs), versions as Debian's packages;
* ``broken/1`` fails to load, ``ghost/1`` puts a directory that does not exist on PATH.

Modulefiles are Tcl (``#%Module``): Lmod reads them too. None of the prefixes is on PATH.

The Tcl Environment Modules (``envmod``) conflict with Lmod as Debian packages; where Lmod
is installed, the test suite runs Debian's ``environment-modules`` unpacked beside it
(:func:`envmod_command`, tests/README.md says how to unpack it).
"""

import os
import shutil
import subprocess
from pathlib import Path

from sitebench.sites import mpi_prefix

LMOD = "/usr/share/lmod/lmod/libexec/lmod"
#: Where tests/README.md unpacks Debian's environment-modules when Lmod is the installed one.
ENVMOD_UNPACKED = Path("/opt/sitebench-test/environment-modules")
ENVMOD_PATHS = (
    Path("/usr/lib/x86_64-linux-gnu/modulecmd.tcl"),
    ENVMOD_UNPACKED / "usr/lib/x86_64-linux-gnu/modulecmd.tcl",
)


#: The program Spack's detection of each MPI looks for (its recipe's ``executables``).
DETECTED_BY = {"openmpi": ("ompi_info",), "mpich": ("mpichversion",)}


def envmod_command():
    for path in ENVMOD_PATHS:
        if path.is_file() and shutil.which("tclsh"):
            return str(path)
    return None


def lmod_command():
    return LMOD if Path(LMOD).is_file() else None


def debian_version(package):
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True
    )
    return proc.stdout.split("-")[0].split(":")[-1] if proc.returncode == 0 else ""


def _modulefile(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#%Module\n" + "".join(f"{line}\n" for line in lines))


def build(root):
    """Make the tree under ``root``; return {"modulepath", "gcc", "openmpi", "mpich"}
    (module names) and the prefixes."""
    root = Path(root)
    tree = root / "modulefiles"
    world = {"modulepath": str(tree)}
    gcc = root / "gcc-12"
    (gcc / "bin").mkdir(parents=True)
    for name, debian in (("gcc", "gcc-12"), ("g++", "g++-12"), ("gfortran", "gfortran-12")):
        (gcc / "bin" / name).symlink_to(shutil.which(debian))
    _modulefile(tree / "gcc" / "12", [f"prepend-path PATH {gcc}/bin"])
    world["gcc"] = "gcc/12"
    for mpi, package in (("openmpi", "libopenmpi-dev"), ("mpich", "libmpich-dev")):
        version = debian_version(package)
        prefix = mpi_prefix.make(mpi, root / f"{mpi}-{version}")
        # What Spack's detection runs to find and version each MPI, as in a real prefix.
        for program in DETECTED_BY[mpi]:
            (prefix / "bin" / program).symlink_to(shutil.which(program))
        _modulefile(
            tree / mpi / version,
            [f"prepend-path PATH {prefix}/bin", f"setenv SITEBENCH_TEST_MPI {mpi}"],
        )
        world[mpi] = f"{mpi}/{version}"
    _modulefile(tree / "broken" / "1", ['error "broken on purpose"'])
    _modulefile(tree / "ghost" / "1", [f"prepend-path PATH {root}/not-installed/bin"])
    return world


def environ(kind, command, modulepath, base=None):
    """A shell's environment where ``kind``'s module system is initialized with the tree:
    what a login shell of the site gives (``$LMOD_CMD`` or ``$MODULES_CMD``, MODULEPATH),
    and for envmod a ``modulecmd`` on PATH (ReFrame's envmod backend runs it)."""
    env = dict(os.environ if base is None else base)
    env.pop("LMOD_CMD", None)
    env.pop("MODULES_CMD", None)
    env["MODULEPATH"] = modulepath
    if kind == "lmod":
        env["LMOD_CMD"] = command
    else:
        env["MODULES_CMD"] = command
        shim = Path(modulepath).parent / "envmod-bin"
        shim.mkdir(exist_ok=True)
        (shim / "modulecmd").write_text(f'#!/bin/sh\nexec tclsh {command} "$@"\n')
        (shim / "modulecmd").chmod(0o755)
        env["PATH"] = f"{shim}:{env['PATH']}"
    return env
