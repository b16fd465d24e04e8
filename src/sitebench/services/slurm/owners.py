"""Which process a private Slurm cluster was started for, so that a dead owner's cluster
is found and stopped at the next start.

A test run starts its cluster for itself and stops it at the end; when the run is killed
(pytest killed, a CI timeout) the daemons, started in sessions of their own, live on and
hold the fixed ports, and the next run cannot start. Such a start records its owner (a
pid and that process's start time, so a reused pid is not taken for it) and the
cluster's directory in a machine-wide folder; a later start stops the clusters whose
owner is gone. A cluster started with no owner (``./sitebench cluster start``, meant to
outlive the command) is never recorded here, so never stopped by another start; nor is a
system Slurm.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from sitebench.common.files import write_atomic

#: Machine-wide (the ports are) and emptied at boot, as the daemons are; the cluster
#: needs root, which may write there.
REGISTRY = Path("/run/sitebench-slurm-owners")


@dataclass(frozen=True)
class Owned:
    root: Path
    owner_pid: int
    owner_start: int

    def owner_alive(self):
        return process_start(self.owner_pid) == self.owner_start


def process_start(pid):
    """When ``pid`` started (clock ticks after boot, /proc/PID/stat field 22), None if it
    does not exist; with the pid it names one process for the machine's uptime."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: count from its closing parenthesis.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def _entry(root):
    digest = hashlib.sha256(str(Path(root).absolute()).encode()).hexdigest()[:16]
    return REGISTRY / f"{digest}.json"


def record(root, owner_pid):
    """Record that the cluster in ``root`` lives only as long as process ``owner_pid``."""
    REGISTRY.mkdir(mode=0o700, exist_ok=True)
    entry = {
        "root": str(Path(root).absolute()),
        "owner_pid": owner_pid,
        "owner_start": process_start(owner_pid),
    }
    write_atomic(_entry(root), json.dumps(entry) + "\n")


def forget(root):
    _entry(root).unlink(missing_ok=True)


def recorded():
    """Every recorded cluster (an unreadable entry is dropped: it names nothing to stop)."""
    found = []
    for path in sorted(REGISTRY.glob("*.json")) if REGISTRY.is_dir() else ():
        try:
            data = json.loads(path.read_text())
            found.append(Owned(Path(data["root"]), data["owner_pid"], data["owner_start"]))
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
    return found


def orphaned():
    """The recorded clusters whose owner has exited."""
    return [owned for owned in recorded() if not owned.owner_alive()]
