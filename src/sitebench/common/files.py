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


def write_atomic(path, data):
    """Replace ``path`` with ``data`` (text or bytes) in one rename, its bytes on disk
    first: readers, and a machine that lost power, see the old or the new file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def write_runs_table(path, rows):
    """Replace the tab-separated table at ``path`` with ``rows`` (site, run, fields...)."""
    write_atomic(path, "".join("\t".join(row) + "\n" for row in rows))


def read_runs_table(path, width):
    """{site: {run: (the row's other fields)}} of the rows of ``width`` tab-separated
    fields at ``path`` (others skipped; {} when it does not exist)."""
    found = {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return found
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == width:
            found.setdefault(fields[0], {})[fields[1]] = tuple(fields[2:])
    return found


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


#: How long the tree a publish replaced is kept aside: a reader that went into it an instant
#: before the swap (a compiler opening a header) still finds its file.
REPLACED_KEPT_S = 600

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
    contents. Two fills that give the same digest made the same tree."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        rel = os.path.relpath(dirpath, root)
        digest.update(f"d {rel}\0".encode())
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(f"{dirpath}/{d}")]):
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                digest.update(f"l {rel}/{name} {os.readlink(path)}\0".encode())
            else:
                with open(path, "rb") as fp:
                    digest.update(f"f {rel}/{name} ".encode() + fp.read() + b"\0")
    return digest.hexdigest()


def publish_tree(path, fill):
    """Make the directory ``path`` the tree ``fill(directory)`` writes, so that a reader
    (another checkout's build or run) never finds it missing or half made.

    ``fill`` writes a fresh directory beside ``path``; when it differs from ``path``, the two
    are swapped in one step (renameat2's RENAME_EXCHANGE; where the system has none, two
    renames) and the old tree is kept aside :data:`REPLACED_KEPT_S` seconds. ``path`` stays a
    plain directory, as earlier sitebench versions made and remove it. ``fill`` returns
    False to say there is nothing to publish: ``path`` is then left alone and None returned;
    else ``path`` is returned.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One publisher at a time: each compares against the tree the last one left.
    with one_at_a_time(path.with_name(f".{path.name}.lock")):
        _remove_replaced(path)
        fresh = Path(tempfile.mkdtemp(prefix=f".{path.name}-new-", dir=path.parent))
        fresh.chmod(0o755)  # mkdtemp's 0700 would hide the tree from the user's group
        try:
            if fill(fresh) is False:
                return None
            if path.is_dir() and not path.is_symlink():
                if tree_digest(path) == tree_digest(fresh):
                    return path
                aside = path.with_name(f".{path.name}-replaced-{time.time_ns()}-{os.getpid()}")
                if _exchange(fresh, path):
                    fresh.rename(aside)
                else:
                    path.rename(aside)
                    fresh.rename(path)
            else:
                if path.is_symlink() or path.exists():
                    path.unlink()
                fresh.rename(path)
            return path
        finally:
            shutil.rmtree(fresh, ignore_errors=True)


def publish_shared(name, roots, fill):
    """Publish the tree ``fill`` writes as ``<root>/<name>`` in the first of ``roots`` where
    every user may share it: where another user (root) already published the same tree, it
    is used as it is, read-only; else where this process may publish it
    (:func:`publish_tree`), readable by all. A root owned by another ordinary user, or
    writable by others, is passed over: what it holds is built against, never trusted.
    Returns (the path or None, ["<root>: why it was passed over", ...])."""
    passed = []

    def readable_fill(fresh):
        if fill(fresh) is False:
            return False
        for dirpath, dirnames, filenames in os.walk(fresh):  # not the umask's modes
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, 0o755 if name in dirnames else 0o644)

    for root in map(Path, roots):
        target = root / name
        why = _not_shareable(root) or _not_shareable(target)
        if why:
            passed.append(f"{root}: {why}")
            continue
        if target.is_dir() and _same_tree(target, readable_fill):
            return target, passed
        try:
            _make_readable_dirs(root)
            return publish_tree(target, readable_fill), passed
        except OSError as err:
            passed.append(f"{root}: {err.strerror or err}")
    return None, passed


def _not_shareable(path):
    """Why a tree at ``path`` may not be built against (None: it may, or is not there)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if st.st_uid not in (0, os.getuid()):
        return f"owned by uid {st.st_uid}, neither root nor this user"
    if st.st_mode & 0o022:
        return f"writable by others (mode {st.st_mode & 0o7777:o})"
    return None


def _same_tree(path, fill):
    """Whether ``fill`` writes the tree ``path`` holds (made in a temporary directory)."""
    scratch = Path(tempfile.mkdtemp(prefix="sitebench-tree-"))
    try:
        return fill(scratch) is not False and tree_digest(scratch) == tree_digest(path)
    except OSError:
        return False  # swapped while it was read: publishing compares again, under its lock
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _make_readable_dirs(path):
    """Make ``path`` and its missing parents, each readable by all (not the umask's)."""
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue  # another process made it meanwhile
        directory.chmod(0o755)


def _remove_replaced(path):
    """Remove the trees replaced more than REPLACED_KEPT_S ago, and leftovers of publishes
    that died (a ``-new-`` directory: only one publisher runs at a time)."""
    for old in path.parent.glob(f".{path.name}-*"):
        if old.is_symlink() or not old.is_dir():
            continue
        stamp = old.name.removeprefix(f".{path.name}-replaced-").split("-")[0]
        stale = not stamp.isdigit() or time.time() - int(stamp) / 1e9 > REPLACED_KEPT_S
        if "-new-" in old.name or ("-replaced-" in old.name and stale):
            shutil.rmtree(old, ignore_errors=True)
