"""A stored run's files, read defensively: regular files inside the run directory only.

Runs arrive from other sites (``./sitebench pull``) and are copied by hand, so a run's
files are data from elsewhere, possibly hostile. A file of a run is read only when:

* every step of its path, from the site directory down, is a real directory and the file a
  real file: a symbolic link is never followed (``lstat`` at each step, then ``O_NOFOLLOW``
  against a swap in between), so a run, site directory or file linked to ``/etc/shadow``
  reads nothing outside ``results/``;
* it is a regular file: a FIFO, socket or device is never read (a FIFO would hang the
  reader; it is opened ``O_NONBLOCK`` at most, to check it with ``fstat``);
* it is no larger than its cap (:data:`REPORT_CAP`, :data:`FILE_CAP`), checked before a byte
  is parsed;
* its path is made of plain names (no ``..``, not absolute), as a path read out of
  ``report.json`` must be before it is used.

Anything else raises :class:`UnsafeFile` (a missing file: :class:`MissingFile`), whose
message names the file and why.
"""

import functools
import hashlib
import json
import os
import stat
from pathlib import Path, PurePosixPath

from sitebench.common.errors import SitebenchError

MIB = 1024 * 1024
#: ``report.json``: ReFrame's report of a long suite is a few MiB (the largest committed one
#: 1.1 MiB); 64 MiB leaves room and keeps a hostile one from filling memory.
REPORT_CAP = 64 * MIB
#: Every other file the store or the report reads (provenance, topology, specs, OSU output).
FILE_CAP = 8 * MIB
#: Environment variables that set the caps, in bytes (tests use small ones).
REPORT_CAP_ENV = "SITEBENCH_MAX_REPORT_BYTES"
FILE_CAP_ENV = "SITEBENCH_MAX_RUN_FILE_BYTES"

_KINDS = {
    stat.S_IFLNK: "a symbolic link (not followed)",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
}


class UnsafeFile(Exception):
    """A run's file that is not read; the message names it and says why."""


class MissingFile(UnsafeFile):
    """A run's file that is not there."""


def cap(default, variable):
    """The cap ``default`` or, where set, the bytes ``$variable`` says."""
    text = os.environ.get(variable)
    if not text:
        return default
    if not text.isdigit() or int(text) <= 0:
        raise SitebenchError(
            f"{variable}={text!r} is not a number of bytes",
            f"set {variable} to a positive whole number of bytes, or unset it",
        )
    return int(text)


def report_cap():
    return cap(REPORT_CAP, REPORT_CAP_ENV)


def file_cap():
    return cap(FILE_CAP, FILE_CAP_ENV)


@functools.lru_cache(maxsize=1024)
def plain_parts(relative):
    """The names of a path inside a run; UnsafeFile unless each is a plain name."""
    text = str(relative)
    parts = PurePosixPath(text).parts
    if not parts or text.startswith("/") or "\0" in text:
        raise UnsafeFile(f"{text!r} is not a path inside the run")
    for part in parts:
        if part in (".", "..") or "\\" in part:
            raise UnsafeFile(f"{text!r} leaves the run directory ({part!r})")
    return parts


def _kind(mode):
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _open_dir(name, dir_fd, shown):
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise MissingFile(f"no {shown}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFile(f"{shown} is {_kind(st.st_mode)}, not a directory")
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


def _run_fd(run_path):
    """The run directory, opened through its site directory, neither a link."""
    run_path = Path(run_path)
    site = _open_dir(str(run_path.parent), None, f"{run_path.parent.name}/")
    try:
        return _open_dir(run_path.name, site, f"{run_path.parent.name}/{run_path.name}/")
    finally:
        os.close(site)


def _walk(run_path, parts):
    """An fd of the directory holding ``parts[-1]``; every step checked."""
    fd = _run_fd(run_path)
    try:
        for i, name in enumerate(parts[:-1]):
            step = _open_dir(name, fd, "/".join(parts[: i + 1]) + "/")
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(st, shown, limit):
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{shown} is {_kind(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise UnsafeFile(
            f"{shown} is {st.st_size / MIB:.1f} MiB, over the {limit / MIB:.1f} MiB cap"
        )


def read_bytes(run_path, relative, limit=None):
    """The bytes of a run's regular file, at most ``limit`` (default :func:`file_cap`)."""
    limit = file_cap() if limit is None else limit
    parts, shown = plain_parts(relative), str(relative)
    fd = _walk(run_path, parts)
    try:
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            raise MissingFile(f"no {shown}") from None
        _check_regular(st, shown, limit)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
        handle = os.open(parts[-1], flags, dir_fd=fd)
    except OSError as err:
        raise UnsafeFile(f"{shown} cannot be opened ({err.strerror})") from None
    finally:
        os.close(fd)
    with os.fdopen(handle, "rb") as f:
        _check_regular(os.fstat(f.fileno()), shown, limit)  # swapped since the lstat?
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{shown} grew over the {limit / MIB:.1f} MiB cap while read")
    return data


def read_text(run_path, relative, limit=None):
    return read_bytes(run_path, relative, limit).decode("utf-8", errors="replace")


def read_json(run_path, relative, limit=None, digests=None):
    """A run's JSON file; UnsafeFile if it is not a plain file, too large, or not JSON.
    ``digests``: where given, the SHA-256 of the bytes read is kept there by path."""
    return parse_json(read_bytes(run_path, relative, limit), relative, digests)


def parse_json(data, relative, digests=None):
    """A run's JSON file from its bytes (read from disk or from git): UnsafeFile when it
    is not UTF-8 JSON or nests too deeply for Python to parse."""
    if digests is not None:
        digests[str(relative)] = hashlib.sha256(data).hexdigest()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise UnsafeFile(
            f"{relative} is not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None
    except json.JSONDecodeError as err:
        raise UnsafeFile(f"{relative} is not valid JSON ({err})") from None
    except RecursionError:
        raise UnsafeFile(f"{relative} is nested too deeply to be read") from None


#: Provenance and topology are a few levels deep; deeper ones are refused when read, so
#: that no later reader (json.dumps into the index, the report) meets Python's recursion limit.
MAX_DEPTH = 64


def too_deep(value, limit=MAX_DEPTH):
    """True when ``value`` (parsed JSON) nests lists and objects deeper than ``limit``."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in children)
    return False


def check_dir(run_path, relative):
    """Nothing when ``relative`` is a real directory inside the run (no step a link);
    MissingFile or UnsafeFile saying why not."""
    parts = plain_parts(relative)
    try:
        os.close(_walk(run_path, (*parts, "")))
    except OSError as err:
        raise UnsafeFile(f"{relative} cannot be opened ({err.strerror})") from None


def is_dir(run_path, relative):
    """True when ``relative`` is a real directory inside the run (no step a link)."""
    try:
        check_dir(run_path, relative)
    except UnsafeFile:
        return False
    return True


def _lstat(path):
    """(stat, None), or (None, why not a directory / None where absent)."""
    try:
        return os.lstat(path), None
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, f"cannot be read ({err.strerror})"


def stats(run_path, relatives):
    """{path: ``os.stat_result``, None where absent, or why it is not a plain file} of
    files of a run, never following a link: the store's cheap test for a changed run
    (one ``lstat`` per step; reading goes through :func:`read_bytes` all the same)."""
    base, checked, found = os.fspath(run_path), {}, {}
    for relative in relatives:
        parts = plain_parts(relative)
        # The site and run directories first, then each folder on the way: real ones only.
        steps = [os.path.dirname(base), base] + [
            os.path.join(base, *parts[: i + 1]) for i in range(len(parts) - 1)
        ]
        why = None
        for step in steps:
            if step not in checked:
                st, problem = _lstat(step)
                if st is not None and not stat.S_ISDIR(st.st_mode):
                    problem = f"{os.path.basename(step)}/ is {_kind(st.st_mode)}"
                checked[step] = problem if st is not None or problem else "absent"
            why = checked[step]
            if why:
                break
        if why:
            found[relative] = None if why == "absent" else why
            continue
        st, problem = _lstat(os.path.join(base, *parts))
        if st is not None and not stat.S_ISREG(st.st_mode):
            problem = f"is {_kind(st.st_mode)}, not a regular file"
        found[relative] = problem or st
    return found
