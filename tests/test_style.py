"""The project's own Python passes flake8 and black (the recipes: see test_spack.py)."""

import subprocess
import sys

from conftest import ROOT


def test_flake8():
    proc = subprocess.run(
        [sys.executable, "-m", "flake8"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_black():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "black",
            "--check",
            "-q",
            "src",
            "tests",
            "reframe-checks",
            "site-configs",
            "docs",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_file_holds_merge_conflict_markers():
    """A merge resolved by `git add` with its markers left in (tests/README.md held two such
    blocks for a stop, and nothing read it as broken)."""
    proc = subprocess.run(
        ["git", "grep", "-n", "-E", "^(<<<<<<< |>>>>>>> |=======$)", "--", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, f"conflict markers left by a merge:\n{proc.stdout}"
