"""`./sitebench test`: the tests that time no benchmark on every core, then the slow ones
alone (src/sitebench/cli/test.py)."""

import subprocess
from types import SimpleNamespace

from conftest import ROOT

from sitebench.cli import test as test_command

TESTS = str(ROOT / "tests")


def test_the_whole_suite_runs_the_fast_tests_on_every_core_then_the_slow_ones_alone():
    fast, slow = test_command.phases(["--durations=15"], cpus=2)
    assert fast == [TESTS, "-m", "not slow", "-n", "2", "--dist", "loadfile", "--durations=15"]
    assert slow == [TESTS, "-m", "slow", "--durations=15"]
    # Workers capped: each may hold a Spack concretization.
    (fast, _) = test_command.phases([], cpus=64)
    assert fast[fast.index("-n") + 1] == str(test_command.MAX_WORKERS)


def test_files_named_or_the_callers_markers_or_workers_run_one_pytest_as_given():
    for args in (["-m", "reliability"], ["-mslow"], ["-n", "4"], ["--numprocesses=3"]):
        assert test_command.phases(args, cpus=2) == [[TESTS, *args]]
    # Test files named replace the whole suite.
    named = ["tests/test_loop.py", "-k", "twice"]
    assert test_command.phases(named, cpus=2) == [named]
    # One core: nothing to share it with.
    assert test_command.phases(["-q"], cpus=1) == [[TESTS, "-q"]]


def _codes(monkeypatch, codes):
    ran = []

    def fake_run(cmd, cwd):
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, codes[len(ran) - 1])

    monkeypatch.setattr(test_command.subprocess, "run", fake_run)
    monkeypatch.setattr(test_command.os, "sched_getaffinity", lambda pid: {0, 1})
    code = test_command.command(SimpleNamespace(pytest_args=[]))
    return code, len(ran)


def test_the_exit_code_is_the_first_failing_phases(monkeypatch):
    assert _codes(monkeypatch, [0, 0]) == (0, 2)
    assert _codes(monkeypatch, [1, 0]) == (1, 2)  # failures in the first: the slow ones run
    assert _codes(monkeypatch, [0, 1]) == (1, 2)
    assert _codes(monkeypatch, [5, 0]) == (0, 2)  # -k that selects slow tests only
    assert _codes(monkeypatch, [5, 5]) == (5, 2)  # nothing selected at all
    assert _codes(monkeypatch, [2, 0]) == (2, 1)  # Ctrl-C ends the suite
