"""`./sitebench test`: the whole suite on every core, a test file per worker, files in
collection order (src/sitebench/cli/test.py, tests/conftest.py)."""

from types import SimpleNamespace

import conftest
from conftest import ROOT

from sitebench.cli import test as test_command

TESTS = str(ROOT / "tests")


def test_the_whole_suite_runs_on_every_core_a_file_per_worker():
    assert test_command.pytest_args(["--durations=15"], cpus=2) == [
        TESTS,
        "-n",
        "2",
        "--dist",
        "loadfile",
        "--no-loadscope-reorder",
        "--durations=15",
    ]
    # A caller's marker selects within the same run.
    assert test_command.pytest_args(["-m", "slow"], cpus=2)[1:3] == ["-n", "2"]
    # Workers capped: each may hold a Spack concretization.
    args = test_command.pytest_args([], cpus=64)
    assert args[args.index("-n") + 1] == str(test_command.MAX_WORKERS)


def test_files_named_or_the_callers_workers_run_as_given():
    for args in (["-n", "4"], ["--numprocesses=3"], ["-n0"]):
        assert test_command.pytest_args(args, cpus=2) == [TESTS, *args]
    # Test files named replace the whole suite.
    named = ["tests/test_loop.py", "-k", "twice"]
    assert test_command.pytest_args(named, cpus=2) == named
    # One core: nothing to share it with.
    assert test_command.pytest_args(["-q"], cpus=1) == [TESTS, "-q"]


def test_the_exit_code_is_pytests(monkeypatch):
    ran = []

    def fake_run(cmd, cwd):
        ran.append(cmd)
        return SimpleNamespace(returncode=1)

    monkeypatch.setattr(test_command.subprocess, "run", fake_run)
    monkeypatch.setattr(test_command.os, "sched_getaffinity", lambda pid: {0, 1})
    assert test_command.command(SimpleNamespace(pytest_args=["-q"])) == 1
    assert len(ran) == 1 and ran[0][-1] == "-q" and "loadfile" in ran[0]


def _item(name):
    return SimpleNamespace(path=ROOT / "tests" / name, name=name)


def test_the_longest_files_are_collected_first_the_rest_in_their_order():
    first, second = conftest.LONGEST_FIRST[:2]
    items = [_item("test_a.py"), _item(second), _item("test_b.py"), _item(first)]
    conftest.pytest_collection_modifyitems(items)
    assert [i.name for i in items] == [first, second, "test_a.py", "test_b.py"]
    # Every name in the list is a test file: a renamed one would silently drop out.
    assert all((ROOT / "tests" / name).is_file() for name in conftest.LONGEST_FIRST)
