"""The installed roots of a site's environment, listed once before ReFrame starts.

Each build fixture would otherwise start Spack twice (``spack install <root>``, then
``spack find``) only to learn that nothing needs building: 2.8 s a fixture on the local
site, 7 fixtures a run. One ``spack find`` here answers for all of them. A fixture whose
root is not listed (a first run, a build that failed) installs it itself, as it does
under plain ``reframe``.
"""

import json
import os
import sys
from pathlib import Path

from sitebench.common.files import write_atomic

#: One line per installed spec, as ``spack find --format`` prints it; a build fixture
#: (:mod:`sitebench.run.spack_build`) keeps its root's line as ``spack-spec.txt``.
SPEC_FORMAT = "{prefix}\t{name}@{version}{variants} arch={architecture} /{hash}"


def root_hashes(env_dir):
    """The DAG hashes of the roots in the environment's ``spack.lock``."""
    lock = json.loads((Path(env_dir) / "spack.lock").read_text())
    return {root["hash"] for root in lock.get("roots", [])}


def table(env_dir, found):
    """The table's text: its environment, then the lines of ``found`` (``spack find``'s
    SPEC_FORMAT output, installed specs only) that are roots of the lock."""
    roots = root_hashes(env_dir)
    lines = [line for line in found.splitlines() if line.rpartition(" /")[2] in roots]
    return "".join(f"{line}\n" for line in [f"# {os.path.realpath(env_dir)}", *lines])


def write(spack, env_dir, dest):
    """List the installed roots into ``dest``; return it, or None where Spack could not
    say (each fixture then asks Spack itself)."""
    proc = spack.run("-e", env_dir, "find", "--format", SPEC_FORMAT, capture=True, check=False)
    if proc.returncode != 0:
        print(
            f"sitebench: warning: `spack find` failed (exit {proc.returncode}); "
            "each build fixture asks Spack itself",
            file=sys.stderr,
        )
        return None
    write_atomic(dest, table(env_dir, proc.stdout))
    return dest


def hashes(table_path):
    """The hashes of the roots a table written by :func:`write` lists as installed."""
    lines = Path(table_path).read_text().splitlines()[1:]  # after its "# <environment>"
    return {line.rpartition(" /")[2] for line in lines}
