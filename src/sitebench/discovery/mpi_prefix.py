"""A prefix of its own for each MPI a distribution installs side by side.

Debian installs Open MPI and MPICH both into ``/usr``: ``/usr/bin/mpicc`` and ``mpirun``
are alternatives pointing at one of them (``mpicc.openmpi``, ``mpicc.mpich``), so a Spack
external with prefix ``/usr`` builds and runs with whichever alternative is active. Each MPI
gets a directory of symlinks instead (as the reference BLAS does), under
``.sitebench/externals/<mpi>/``:

* ``bin/``: its own wrappers and launchers (``mpicc.mpich`` as ``mpicc``, ...);
* ``include``: the directory its C wrapper compiles with (``-I``);
* ``lib/``: its private library directory, or where that is a system directory, links to
  the libraries its wrappers link (``-lmpich``, ``-lmpichfort``...), so an RPATH to it
  finds that MPI's libraries and no other.

Spack's compiler wrapper then adds ``-I``/``-L``/RPATH of the prefix, and a binary built
against MPICH loads ``libmpich`` whatever the alternatives say.

The prefixes are the machine's, shared by every user and checkout (their paths are in the
specs' hashes, so an ordinary user's builds take root's binaries): ``detect`` uses the tree
another user made where it is the same, else replaces it in one step
(:func:`files.publish_shared`), so another checkout building or running against it
meanwhile never finds it missing; where the machine's directory can be neither used nor
written, the user's own.
"""

import re
import shlex
import subprocess
from pathlib import Path

from sitebench.common import files

#: Spack package -> the suffix of its Debian alternatives (``/usr/bin/mpicc.<suffix>``).
ALTERNATIVES_SUFFIX = {"openmpi": "openmpi", "mpich": "mpich"}

#: The programs a prefix's ``bin/`` gets, when the MPI has them.
PROGRAMS = (
    "mpicc",
    "mpicxx",
    "mpic++",
    "mpiCC",
    "mpif77",
    "mpif90",
    "mpifort",
    "mpirun",
    "mpiexec",
)

#: Programs a launcher runs from its own directory, linked beside it where they exist
#: (MPICH's hydra starts ``hydra_pmi_proxy`` from the directory of the ``mpiexec`` run).
HELPERS = {"mpich": ("hydra_pmi_proxy", "hydra_nameserver", "hydra_persist")}

#: Wrappers whose link lines name the MPI's libraries (C, C++, Fortran).
WRAPPERS = ("mpicc", "mpicxx", "mpifort")

SYSTEM_LIB_DIRS = re.compile(r"^/(usr/)?lib(32|64)?(/[a-z0-9_]+-linux-gnu[a-z0-9_]*)?/?$")


def _show(wrapper):
    """The compile and link line of an MPI wrapper (Open MPI ``--showme``, MPICH ``-show``)."""
    for flag in ("--showme", "-show"):
        proc = subprocess.run([wrapper, flag], capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip():
            return shlex.split(proc.stdout)
    return []


def alternatives_prefix(mpi, bindir="/usr/bin"):
    """{program: real path} of ``mpi``'s alternatives in ``bindir`` (empty when it has none)."""
    suffix = ALTERNATIVES_SUFFIX.get(mpi)
    if not suffix:
        return {}
    found = {}
    for program in PROGRAMS:
        path = Path(bindir) / f"{program}.{suffix}"
        if path.exists():
            found[program] = path
    return found if "mpicc" in found and ("mpirun" in found or "mpiexec" in found) else {}


def make(mpi, farm, bindir="/usr/bin"):
    """Make ``farm`` the prefix of ``mpi`` (see the module's docstring); return it, or None
    when ``mpi`` has no alternatives of its own in ``bindir``."""
    programs = alternatives_prefix(mpi, bindir)
    if not programs:
        return None
    return files.publish_tree(farm, lambda fresh: _fill(mpi, programs, fresh, bindir))


def make_shared(mpi, roots, bindir="/usr/bin"):
    """The prefix of ``mpi`` in the first of ``roots`` (directories of prefixes) where it
    can be shared (:func:`files.publish_shared`): (prefix or None, [why a root was
    passed over])."""
    programs = alternatives_prefix(mpi, bindir)
    if not programs:
        return None, []
    return files.publish_shared(mpi, roots, lambda fresh: _fill(mpi, programs, fresh, bindir))


def _fill(mpi, programs, farm, bindir):
    """Write ``mpi``'s prefix into the empty directory ``farm``."""
    (farm / "bin").mkdir()
    for program, path in programs.items():
        (farm / "bin" / program).symlink_to(path)
    for helper in HELPERS.get(mpi, ()):
        if (Path(bindir) / helper).exists():
            (farm / "bin" / helper).symlink_to(Path(bindir) / helper)
    includes, libdirs, libs = [], [], []
    for wrapper in WRAPPERS:
        if wrapper not in programs:
            continue
        for arg in _show(programs[wrapper]):
            for flag, into in (("-I", includes), ("-L", libdirs), ("-l", libs)):
                if arg.startswith(flag) and arg[2:] and arg[2:] not in into:
                    into.append(arg[2:])
    if includes:
        (farm / "include").symlink_to(includes[0])
    private = [d for d in libdirs if not SYSTEM_LIB_DIRS.match(d)]
    if private:
        (farm / "lib").symlink_to(private[0])
    else:
        (farm / "lib").mkdir()
        for libdir in libdirs:
            for lib in libs:
                for path in sorted(Path(libdir).glob(f"lib{lib}.so*")):
                    link = farm / "lib" / path.name
                    if not link.exists():
                        link.symlink_to(path)
