"""Run the test suite with pytest; extra arguments go to pytest (``-k parsers``,
``-m reliability``, ``-m "not slow"``).

The whole suite runs in two phases: the tests that build or run no benchmark on every core
(pytest-xdist, a test file per worker so that its module fixtures are made once), then the
``slow`` ones, which build and time benchmarks, one at a time so that nothing else runs
beside them. Test files named, or a ``-m`` or ``-n`` of the caller's, run one pytest as
given."""

import argparse
import os
import subprocess
import sys

from sitebench.common import paths

description = "run the test suite (pytest)"

#: Most workers for the first phase: each may hold a Spack concretization in memory.
MAX_WORKERS = 4

#: pytest's exit codes that end the suite: interrupted (Ctrl-C), internal error, usage error.
INTERRUPTED_OR_BROKEN = (2, 3, 4)


def setup_parser(p):
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)


def phases(pytest_args, cpus):
    """The pytest argument lists to run one after the other."""
    # Test files or directories named on the command line replace the whole suite.
    # (Those runs, and a caller's -m or -n, are one pytest as given.)
    named = [a for a in pytest_args if not a.startswith("-") and "tests" in a]
    own = any(a.startswith(("-m", "-n", "--numprocesses")) for a in pytest_args)
    workers = min(cpus, MAX_WORKERS)
    if named:
        return [pytest_args]
    where = str(paths.ROOT / "tests")
    if own or workers < 2:
        return [[where, *pytest_args]]
    return [
        [where, "-m", "not slow", "-n", str(workers), "--dist", "loadfile", *pytest_args],
        [where, "-m", "slow", *pytest_args],
    ]


def command(args):
    cpus = len(os.sched_getaffinity(0))
    codes = []
    for pytest_args in phases(args.pytest_args, cpus):
        cmd = [sys.executable, "-m", "pytest", *pytest_args]
        codes.append(subprocess.run(cmd, cwd=paths.ROOT).returncode)
        if codes[-1] in INTERRUPTED_OR_BROKEN:
            return codes[-1]
    # pytest's 5 is "no test selected": fine for one phase (a -k matching only fast tests),
    # not for all of them.
    failed = [c for c in codes if c not in (0, 5)]
    if failed:
        return failed[0]
    return 0 if 0 in codes else codes[0]
