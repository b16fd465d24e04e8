"""Run the test suite with pytest; extra arguments go to pytest (``-k parsers``,
``-m reliability``, ``-m "not slow"``).

The whole suite runs on pytest-xdist workers, one per core (a third on the 2-core VM made it
no faster: 30 min 13 s), a test file per worker so that its module fixtures are made once;
files start in the order of tests/conftest.py's LONGEST_FIRST. The ``slow`` tests, which
build and run benchmarks, run beside the others: a figure measured while other work took the
machine's CPU is marked ``disturbed``, as on a shared node, and the tests check behaviour,
not speed (speed is ``./sitebench perf``'s). The tests marked ``slurm`` take a lock, one
private Slurm cluster at a time. Test files named, or a ``-n`` of the caller's, run as
given."""

import argparse
import os
import subprocess
import sys

from sitebench.common import paths

description = "run the test suite (pytest)"

#: Most workers: each may hold a Spack concretization in memory.
MAX_WORKERS = 4

section = "maintenance"

example = """
  ./sitebench test                              # every test
  ./sitebench test tests/test_compare.py -k noise -p no:cacheprovider   # extra args go to pytest
  ./sitebench test -m reliability              # bad inputs and faults
"""


def setup_parser(p):
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)


def pytest_args(args, cpus):
    """pytest's arguments for the caller's ``args`` on a machine of ``cpus`` cores."""
    # Test files or directories named on the command line replace the whole suite.
    named = [a for a in args if not a.startswith("-") and "tests" in a]
    own = any(a.startswith(("-n", "--numprocesses")) for a in args)
    workers = min(cpus, MAX_WORKERS)
    if named:
        return list(args)
    where = str(paths.ROOT / "tests")
    if own or workers < 2:
        return [where, *args]
    # --no-loadscope-reorder: files in collection order (longest first), not by test count.
    return [where, "-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder", *args]


def command(args):
    cpus = len(os.sched_getaffinity(0))
    cmd = [sys.executable, "-m", "pytest", *pytest_args(args.pytest_args, cpus)]
    return subprocess.run(cmd, cwd=paths.ROOT).returncode
