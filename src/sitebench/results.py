"""The results store: ``results/<site>/<run>/``, written atomically, never overwritten.

A run directory holds ReFrame's own JSON report (``report.json``), its
perflogs (``perflogs/``), the benchmarks' output (``output/``) and the
provenance (``provenance/``). It is assembled in a hidden ``.incoming-*``
directory beside its final place and renamed into place in one step, so a
reader never sees half a run. The run name is the UTC start time plus a
random suffix; two runs of one site in the same second get different names,
and the rename refuses to replace an existing (non-empty) run.
"""

import json
import os
import secrets
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sitebench import paths
from sitebench.errors import SitebenchError
from sitebench.names import check_name

REPORT = "report.json"
PROVENANCE = "provenance/provenance.json"
INCOMING = ".incoming-"


def new_run_name(when=None):
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    return f"{stamp}-{secrets.token_hex(3)}"


class Incoming:
    """A run being assembled; :meth:`commit` makes it visible in one rename."""

    def __init__(self, site, root=None, when=None):
        # ``when``: the run's start (epoch seconds) where it is not now, e.g. an import.
        self.when = when
        self.site = check_name("site", site)
        self.site_dir = Path(root or paths.results_dir()) / site
        self.site_dir.mkdir(parents=True, exist_ok=True)
        self.name = new_run_name(when)
        self.path = self.site_dir / f"{INCOMING}{self.name}"
        self.path.mkdir()

    def commit(self):
        _fsync_tree(self.path)
        for _ in range(5):
            final = self.site_dir / self.name
            try:
                if final.exists():
                    raise FileExistsError(final)
                os.rename(self.path, final)  # fails on an existing non-empty run
            except OSError:
                self.name = new_run_name(self.when)
                continue
            _fsync_dir(self.site_dir)
            return final
        raise SitebenchError(
            f"could not find a free run name in {self.site_dir}",
            f"the assembled run is kept in {self.path}; move it to a new name by hand",
        )

    def abandon(self, reason):
        """Keep a failed assembly for inspection, clearly marked, never as a run."""
        marker = self.path / "ABANDONED"
        marker.write_text(reason + "\n")


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root):
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(dirpath)


def copy_into(src, dest):
    """Copy a file or tree into a run being assembled."""
    src, dest = Path(src), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True)
    elif src.is_file():
        shutil.copy2(src, dest)


#: Files of a failed case's stage larger than this stay out of the run (data directories,
#: generated inputs): the logs that explain a failure are small.
MAX_KEPT_STAGE_FILE = 8 * 1024 * 1024


def copy_failed_stages(report_path, dest):
    """Keep the small files of the stages of a run's failed cases (ReFrame keeps those)."""
    try:
        report = json.loads(Path(report_path).read_text())
    except (OSError, json.JSONDecodeError):
        return
    dest = Path(dest)
    for attempt in report.get("runs", []):
        for case in attempt.get("testcases", []):
            stage = Path(case.get("stagedir") or "")
            if case.get("result") != "fail" or not stage.is_dir() or stage == Path():
                continue
            for path in sorted(stage.rglob("*")):
                if path.is_symlink() or not path.is_file():
                    continue
                if path.stat().st_size > MAX_KEPT_STAGE_FILE:
                    continue
                target = dest / stage.name / path.relative_to(stage)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)


@dataclass
class Run:
    site: str
    name: str
    path: Path
    report: dict
    provenance: dict


class BadRun(Exception):
    """A run directory that cannot be read; the message says why."""


def load_run(path):
    path = Path(path)
    try:
        report = json.loads((path / REPORT).read_text())
    except FileNotFoundError:
        raise BadRun(f"{path}: no {REPORT} (partial or foreign directory)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadRun(f"{path}/{REPORT} is not valid JSON ({err})") from None
    if not isinstance(report, dict) or "runs" not in report:
        raise BadRun(f"{path}/{REPORT} is not a ReFrame run report (no 'runs')")
    try:
        provenance = json.loads((path / PROVENANCE).read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BadRun(f"{path}: missing or unreadable {PROVENANCE} ({err})") from None
    return Run(
        site=path.parent.name, name=path.name, path=path, report=report, provenance=provenance
    )


def run_dirs(site, root=None):
    """The committed runs of a site, oldest first (names sort by time)."""
    site_dir = Path(root or paths.results_dir()) / check_name("site", site)
    if not site_dir.is_dir():
        return []
    return sorted(p for p in site_dir.iterdir() if p.is_dir() and not p.name.startswith("."))


def load_runs(site, root=None, warn=None):
    """Every readable run of a site; unreadable ones are reported and skipped."""
    warn = warn or (lambda msg: print(f"warning: {msg}; skipped", file=sys.stderr))
    runs = []
    for path in run_dirs(site, root):
        try:
            runs.append(load_run(path))
        except BadRun as err:
            warn(str(err))
    return runs


def site_dirs(root=None):
    """The site directories of a results directory (hidden entries left out)."""
    root = Path(root or paths.results_dir())
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
