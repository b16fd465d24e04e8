"""The machine's binary cache: each spec built once per machine, whatever the checkout.

Every checkout has its own install tree (``.sitebench/spack-store``), so without a cache a
new clone, a second user or a CI run of a clean clone builds every benchmark again. The
machine cache is a Spack build cache outside any checkout, ``$SITEBENCH_BUILDCACHE``, else
``buildcache/`` in the user's cache (``~/.cache/sitebench/buildcache``, beside the shared
repository indexes); set the variable to a shared directory (in ``/etc/sitebench/
offline.env`` for every user of a machine or every cluster of a site) or to ``off``.

It is one more Spack binary mirror in sitebench's private scope, so every install
(``./sitebench run``'s build fixtures, ``./sitebench spack install``, the tests' throw-away
environments) takes the binary of the exact hash first (``spack install``'s default
``--use-buildcache auto``) and builds from source what it lacks. Spack's ``autopush``
pushes each spec it builds from source right after its install, unsigned (the cache is
the machine's own, not a trust boundary: ``./sitebench buildcache`` signs what leaves the
machine); it writes each file to its stage and renames it into the cache. ``spack
install`` finds binaries only through the cache's index, which :func:`refresh_index`
rebuilds when a push made it stale.

A binary moves between install trees of different lengths (checkouts, users, the tests'
throw-away trees): Spack rewrites its RPATHs and the paths compiled into it in place, which
works only for a new prefix no longer than the old one. Measured here with ``mpi-ring``
built in ``.sitebench/spack-store`` and installed into a 113-character root: Spack went
for ``patchelf``, tried to bootstrap it from the internet and the install failed. So every
tree sitebench configures is padded to :data:`PADDED_LENGTH` characters
(``config:install_tree:padded_length``, Spack's own answer): every prefix has the same
length and the same binary, installed into that 113-character root, ran with its RPATH
rewritten. Spack's hashes do not depend on the padding.

A binary is only the same build where its hash is the same, and an external's prefix is
part of the hash: the MPI and reference-BLAS prefixes sitebench makes (``discovery/
mpi_prefix.py``) live in a directory of the machine (:func:`externals_dirs`), not in a
checkout nor a home, so every checkout of every user concretizes to the same hashes. A
user who can neither write it nor find there the tree it would make gets prefixes of its
own (its cache), and detection says so.

A cache that cannot be created, written or has little room left is used read-only or
not at all, and says so once: builds go on from source. (A push that fails after that check,
the disk filled by something else meanwhile, fails its install: Spack's autopush raises.)
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

from sitebench.common import paths
from sitebench.common.files import write_atomic

ENV_VAR = "SITEBENCH_BUILDCACHE"
MIRROR = "sitebench-machine"
#: Every install tree's padded length: longer than any checkout's or test's tree root.
PADDED_LENGTH = 256
#: Below this much free space a push could fill the disk mid-file: the cache is read-only.
MIN_FREE_BYTES = 1 << 30
#: Where Spack's v3 layout keeps one manifest per pushed spec, and the index's manifest.
SPECS = Path("v3", "manifests", "spec")
INDEX = Path("v3", "manifests", "index", "index.manifest.json")
#: The newest push the index covers (see :func:`refresh_index`).
STAMP = ".sitebench-index-covers"


class Cache:
    """The machine cache as this process may use it: ``path``, and whether it may be
    written (``writable``) or only read; ``why`` says why not, when not."""

    def __init__(self, path, writable, why=""):
        self.path, self.writable, self.why = path, writable, why

    @property
    def url(self):
        return f"file://{self.path}"

    def mirror(self):
        """Its entry in Spack's mirrors.yaml."""
        return {
            "url": self.url,
            "source": False,
            "binary": True,
            "signed": False,
            "autopush": self.writable,
        }


def directory():
    """The machine cache's directory, or None when ``$SITEBENCH_BUILDCACHE`` is ``off``."""
    given = os.environ.get(ENV_VAR, "").strip()
    if given.lower() in ("off", "none", "0", "no"):
        return None
    if given:
        return Path(given.removeprefix("file://")).expanduser().resolve()
    return paths.user_cache_dir() / "buildcache"


#: Where the prefixes sitebench makes for externals live, shared by every user.
EXTERNALS_ENV_VAR = "SITEBENCH_EXTERNALS_DIR"
MACHINE_EXTERNALS = Path("/var/cache/sitebench/externals")


def externals_dir():
    """The user's own directory of external prefixes (used where the machine's cannot be)."""
    return paths.user_cache_dir() / "externals"


def externals_dirs():
    """Where a prefix sitebench makes for an external may live, in order: the machine's
    (``$SITEBENCH_EXTERNALS_DIR``, else ``/var/cache/sitebench/externals``), shared by
    every user and checkout, so that an ordinary user's specs hash as root's and take
    root's binaries; then the user's own (:func:`externals_dir`)."""
    given = os.environ.get(EXTERNALS_ENV_VAR, "").strip()
    machine = Path(given).expanduser().resolve() if given else MACHINE_EXTERNALS
    return [machine, externals_dir()] if machine != externals_dir() else [machine]


def _probe_write(path):
    """None if a file can be created and renamed in ``path``, else the reason."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".sitebench-probe-", dir=path)
        os.close(fd)
        os.replace(tmp, tmp + ".done")  # what Spack's push does with every file
        os.unlink(tmp + ".done")
    except OSError as err:
        return err.strerror or str(err)
    return None


def machine_cache():
    """The machine cache made ready, or None (off, or it cannot even be created)."""
    path = directory()
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        _say(f"binary cache {path} cannot be created ({err.strerror}): building from source")
        return None
    if not os.access(path, os.R_OK | os.X_OK):
        _say(f"binary cache {path} cannot be read: building from source")
        return None
    reason = _probe_write(path)
    if reason is None and shutil.disk_usage(path).free < MIN_FREE_BYTES:
        reason = f"less than {MIN_FREE_BYTES >> 30} GiB free"
    if reason:
        _say(
            f"binary cache {path} is not writable ({reason}): its binaries are used, "
            "what it lacks is built from source and not pushed"
        )
        return Cache(path, False, reason)
    return Cache(path, True)


def _say(message):
    print(f"==> {message}", file=sys.stderr)


def _newest_push(path):
    """The mtime of the newest change to the cache's spec manifests (a push adds or
    renames a file in a per-package folder, which changes that folder's mtime)."""
    top = path / SPECS
    try:
        folders = [top, *(p for p in top.iterdir() if p.is_dir())]
        return max(p.stat().st_mtime for p in folders)
    except (FileNotFoundError, ValueError):
        return None


def _covered(path):
    """The newest push the cache's index covers (written before Spack read the manifests:
    a push during the update leaves the index stale, not wrongly fresh)."""
    try:
        return float((path / STAMP).read_text())
    except (OSError, ValueError):
        return None


def index_is_stale(path):
    """True when a spec was pushed after the cache's index was last rebuilt."""
    newest = _newest_push(path)
    if newest is None:
        return False
    covered = _covered(path)
    return covered is None or newest > covered or not (path / INDEX).is_file()


def refresh_index(spack, cache):
    """Rebuild ``cache``'s index when stale, so that ``spack install`` finds every binary
    pushed so far; return whether it did. A failure costs builds, never the run."""
    if cache is None or not cache.writable or not index_is_stale(cache.path):
        return False
    newest = _newest_push(cache.path)
    proc = spack.run("buildcache", "update-index", cache.url, capture=True, check=False)
    if proc.returncode != 0:
        _say(f"binary cache {cache.path}: its index was not updated: {proc.stderr.strip()}")
        return False
    try:
        write_atomic(cache.path / STAMP, f"{newest}\n")
    except OSError:
        pass  # the next run rebuilds the index once more
    return True
