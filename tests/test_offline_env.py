"""The caller's environment wins over the offline settings file, in the launcher and in
every module that reads the file (sites/qemu_site.py)."""

import hashlib
import os
import subprocess

from conftest import ROOT
from sitebench.sites import qemu_site

FILE = (
    "# site settings\n"
    "SITEBENCH_MIRROR=/file/mirror\n"
    "export SITEBENCH_SPACK_GIT=/file/spack.git\n"
    "SITEBENCH_SPACK_PACKAGES_GIT='/file/packages.git'\n"
)


def launcher_env(tmp_path, env):
    """The environment ./sitebench hands to the CLI: a state dir whose venv 'python' prints
    its environment (the stamp matches, so the launcher builds no venv)."""
    state = tmp_path / "state"
    (state / "venv/bin").mkdir(parents=True, exist_ok=True)
    python = state / "venv/bin/python"
    python.write_text("#!/bin/sh\nexec env\n")
    python.chmod(0o755)
    # The launcher's stamp: sha256 of `sha256sum requirements.txt pyproject.toml`.
    listing = "".join(
        f"{hashlib.sha256((ROOT / n).read_bytes()).hexdigest()}  {ROOT / n}\n"
        for n in ("requirements.txt", "pyproject.toml")
    )
    stamp = hashlib.sha256(listing.encode()).hexdigest()
    (state / "venv/.requirements.sha256").write_text(stamp + "\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("SITEBENCH_")}
    proc = subprocess.run(
        [str(ROOT / "sitebench")],
        env={**base, "SITEBENCH_STATE_DIR": str(state), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "preparing" not in proc.stderr, proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def test_the_launcher_lets_the_caller_win(tmp_path):
    settings = tmp_path / "offline.env"
    settings.write_text(FILE)
    got = launcher_env(
        tmp_path,
        {"SITEBENCH_OFFLINE_ENV": str(settings), "SITEBENCH_MIRROR": "/caller/mirror"},
    )
    assert got["SITEBENCH_MIRROR"] == "/caller/mirror"  # set by the caller: kept
    assert got["SITEBENCH_SPACK_GIT"] == "/file/spack.git"  # not set: the file's
    assert got["SITEBENCH_SPACK_PACKAGES_GIT"] == "/file/packages.git"


def test_the_launcher_reads_the_file_when_the_caller_sets_nothing(tmp_path):
    settings = tmp_path / "offline.env"
    settings.write_text(FILE)
    got = launcher_env(tmp_path, {"SITEBENCH_OFFLINE_ENV": str(settings)})
    assert got["SITEBENCH_MIRROR"] == "/file/mirror"
    missing = launcher_env(tmp_path, {"SITEBENCH_OFFLINE_ENV": str(tmp_path / "none")})
    assert "SITEBENCH_MIRROR" not in missing


def test_qemu_site_lets_the_caller_win_as_the_launcher_does(tmp_path):
    settings = tmp_path / "offline.env"
    settings.write_text(FILE)
    caller = {"SITEBENCH_OFFLINE_ENV": str(settings), "SITEBENCH_MIRROR": "/caller/mirror"}
    assert qemu_site.offline_settings(caller) == {
        "SITEBENCH_MIRROR": "/caller/mirror",
        "SITEBENCH_SPACK_GIT": "/file/spack.git",
        "SITEBENCH_SPACK_PACKAGES_GIT": "/file/packages.git",
    }
    # The same file and environment through the launcher give the same values.
    through_launcher = launcher_env(tmp_path, caller)
    for key, value in qemu_site.offline_settings(caller).items():
        assert through_launcher[key] == value
