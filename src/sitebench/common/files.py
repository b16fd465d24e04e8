"""Small file helpers shared by the modules that write configuration."""

import contextlib
import ctypes
import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def write_atomic(path, text):
    """Replace ``path`` with ``text`` in one rename: readers see the old or the new file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def reframe_executable():
    """ReFrame of sitebench's own environment (the venv), else the one on PATH."""
    return (
        shutil.which("reframe", path=os.path.dirname(sys.executable))
        or shutil.which("reframe")
        or "reframe"
    )


@contextlib.contextmanager
def one_at_a_time(lock_file):
    """Hold an exclusive ``flock`` on ``lock_file`` for the block, waiting for the process
    that holds it: work a first command does once (cloning Spack, detecting the machine)
    is then done by the first and found done by the next."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


#: How long a superseded version of a published tree is kept: a reader that went through the
#: old link an instant before the swap (a compiler opening a header) still finds its file.
SUPERSEDED_KEPT_S = 600

#: renameat2(2)'s flag that swaps two paths in one step (Linux 3.15, glibc 2.28).
_RENAME_EXCHANGE = 2


def _exchange(a, b):
    """Swap the paths ``a`` and ``b`` in one step; False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_cwd = -100  # AT_FDCWD
    done = renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), _RENAME_EXCHANGE)
    return done == 0


def tree_digest(root):
    """A digest of a tree of directories, files and symlinks: names, link targets, file
    contents. Two fills of a versioned tree that give the same digest are the same tree."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        digest.update(f"d {rel}\0".encode())
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(f"{dirpath}/{d}")]):
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                digest.update(f"l {rel}/{name} {os.readlink(path)}\0".encode())
            else:
                with open(path, "rb") as fp:
                    digest.update(f"f {rel}/{name} ".encode() + fp.read() + b"\0")
    return digest.hexdigest()[:16]


def publish_tree(path, fill):
    """Make ``path`` a tree that ``fill(directory)`` writes, so that a reader (another
    checkout's build or run) never finds it missing or half made.

    ``path`` is a symlink to a versioned sibling ``.<name>-<digest>``: ``fill`` writes a
    fresh directory aside, an identical tree already published is kept as it is, a new one
    is renamed to its version and the symlink replaced in one rename; a version no longer
    pointed to is removed :data:`SUPERSEDED_KEPT_S` after it was superseded. A ``path`` that is still a plain directory (made before
    versions) is swapped for the symlink in one step where the system can (renameat2),
    else in two renames. ``fill`` returns False to say there is nothing to publish: then
    ``path`` is left as it is and None returned; else ``path`` is returned.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One publisher at a time: another's new version is never taken for an old one.
    with one_at_a_time(path.with_name(f".{path.name}.lock")):
        return _publish(path, fill)


def _publish(path, fill):
    fresh = Path(tempfile.mkdtemp(prefix=f".{path.name}-new-", dir=path.parent))
    fresh.chmod(0o755)  # mkdtemp's 0700 would hide the tree from the user's group
    try:
        if fill(fresh) is False:
            return None
        version = path.with_name(f".{path.name}-{tree_digest(fresh)}")
        if version.is_dir():
            shutil.rmtree(fresh)
        else:
            fresh.rename(version)
        if not (path.is_symlink() and os.readlink(path) == version.name):
            _point(path, version)
        _remove_superseded(path, version)
        return path
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def _point(path, version):
    """Make the symlink ``path`` point at ``version`` in one step."""
    before = path.with_name(os.readlink(path)) if path.is_symlink() else None
    link = path.with_name(f".{path.name}-link-{os.getpid()}")
    link.unlink(missing_ok=True)
    link.symlink_to(version.name)
    if path.is_dir() and not path.is_symlink():
        if not _exchange(link, path):
            aside = path.with_name(f".{path.name}-old-{os.getpid()}")
            path.rename(aside)
            link.rename(path)
            link = aside
        shutil.rmtree(link)  # the old plain directory, now under the link's name
    else:
        link.replace(path)
    if before is not None and before.is_dir():
        os.utime(before)  # when it was superseded: removed SUPERSEDED_KEPT_S later


def _remove_superseded(path, version):
    for old in path.parent.glob(f".{path.name}-*"):
        if old == version or old.is_symlink() or not old.is_dir():
            continue
        if "-new-" in old.name or time.time() - old.stat().st_mtime > SUPERSEDED_KEPT_S:
            shutil.rmtree(old, ignore_errors=True)
