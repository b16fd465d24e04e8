"""Spack's own detection (``spack compiler find``, ``spack external find``) run in a
scratch user scope, so what it finds is read back as data and never lands in a user's
configuration. The local site's detection (:mod:`sitebench.discovery.local_site`) runs it
on ``PATH``, the modules' detection (:mod:`sitebench.discovery.module_externals`) in the
environment a module gives."""

import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from sitebench.common.errors import SitebenchError


def spack_detection(spack, steps, env=None):
    """Run Spack's detection commands ``steps`` (argument lists) in a scratch user scope,
    with the builtin repo of sitebench's own scope, in ``env`` (default: this process's);
    return the ``packages:`` they wrote."""
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copy(spack.config_dir / "repos.yaml", scratch)
        for args in steps:
            proc = subprocess.run(
                [spack.executable, *args],
                env={**spack.environ(env), "SPACK_USER_CONFIG_PATH": scratch},
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise SitebenchError(
                    f"`spack {' '.join(args)}` failed: {proc.stderr.strip()[-1000:]}",
                    "run it by hand with `./sitebench spack ...` to see why",
                )
        found = Path(scratch, "packages.yaml")
        if not found.is_file():
            return {}
        return (yaml.safe_load(found.read_text()) or {}).get("packages") or {}
