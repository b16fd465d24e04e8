"""Run the test suite with pytest; extra arguments go to pytest (``-k parsers``,
``-m reliability``, ``-m "not slow"``)."""

import argparse
import subprocess
import sys

from sitebench.common import paths

description = "run the test suite (pytest)"


def setup_parser(p):
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)


def command(args):
    # Test files or directories named on the command line replace the whole suite.
    named = [a for a in args.pytest_args if not a.startswith("-") and "tests" in a]
    where = [] if named else [str(paths.ROOT / "tests")]
    cmd = [sys.executable, "-m", "pytest", *where, *args.pytest_args]
    return subprocess.run(cmd, cwd=paths.ROOT).returncode
