"""Small file helpers shared by the modules that write configuration."""

import contextlib
import fcntl
import os
import shutil
import sys


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
