"""One nightly run at a time per site: an exclusive ``flock`` on the site's lock file.

The lock belongs to the open file of the running process, so the kernel releases it when
that process ends however it ends (SIGKILL included): there is never a stale lock to clean
up. The file itself stays; it holds the holder's pid and start time for the message a
second start prints.
"""

import fcntl
import os
import time
from contextlib import contextmanager

from sitebench.common import paths
from sitebench.common.errors import SitebenchError


class AlreadyRunning(SitebenchError):
    """Another process holds the site's nightly lock."""

    def __init__(self, site, holder, path):
        self.holder = holder
        super().__init__(
            f"a nightly run of {site} is already running ({holder}); this one did not start",
            f"wait for it to end, or stop it (kill {holder_pid(holder) or '<pid>'}); "
            f"its lock: {path}",
        )


def holder_pid(holder):
    first = holder.split()[1] if holder.startswith("pid ") else ""
    return first if first.isdigit() else None


def lock_path(site):
    return paths.state_dir() / "nightly" / site / "lock"


def holder_text(pid, started):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started))
    return f"pid {pid}, started {stamp}"


@contextmanager
def hold(site):
    """Hold ``site``'s nightly lock for the block; raise :class:`AlreadyRunning` at once
    (no waiting) when another process holds it."""
    path = lock_path(site)
    path.parent.mkdir(parents=True, exist_ok=True)
    # os.open's descriptors are not inherited by children (PEP 446): a ReFrame left behind
    # by a killed run does not keep the lock.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            raise AlreadyRunning(site, held or "holder unknown", path) from None
        text = holder_text(os.getpid(), time.time()) + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
        yield text.strip()
    finally:
        os.close(fd)  # releases the lock if held
