"""Small file helpers shared by the modules that write configuration."""

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
