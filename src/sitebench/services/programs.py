"""System programs found where distributions install them, whoever runs sitebench.

An ordinary user's PATH on Debian has no sbin directory, yet ``ldconfig``, ``slurmctld``,
``munged``, ``mariadbd``, ``chroot`` and ``debootstrap`` live there: a bare
``subprocess.run(["ldconfig", ...])`` dies with ``FileNotFoundError`` for that user
only. Every such program is looked up here, on PATH first and then in the sbin
directories.
"""

import os
import shutil

from sitebench.common.errors import SitebenchError

#: Where system programs live when PATH lacks them (searched after PATH, in this order).
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def search_path():
    """PATH with the sbin directories it lacks appended."""
    dirs = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d]
    return os.pathsep.join(dirs + [d for d in SBIN_DIRS if d not in dirs])


def which(name):
    """The program ``name`` on PATH or in the sbin directories, or None."""
    return shutil.which(name, path=search_path())


def require(name, package, purpose):
    """The program ``name``, or a SitebenchError naming what needs it and what to install."""
    found = which(name)
    if found is None:
        raise SitebenchError(
            f"{purpose} needs `{name}`, found neither on PATH nor in {', '.join(SBIN_DIRS)}",
            f"install it (Debian: apt-get install {package})",
        )
    return found


def resolved(argv):
    """``argv`` with its program made absolute where found (left as is otherwise, so the
    caller's own error names it)."""
    return [which(argv[0]) or argv[0], *argv[1:]]
