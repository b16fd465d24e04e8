"""The results store: ``results/<site>/<run>/``, written atomically, never overwritten.

A run directory holds ReFrame's own JSON report (``report.json``), the part of it
comparison reads (``figures.json``, :mod:`.figures_file`), its perflogs (``perflogs/``),
the benchmarks' output (``output/``) and the provenance (``provenance/``). It is assembled in a hidden ``.incoming-*``
directory beside its final place and renamed into place in one step, so a
reader never sees half a run. The run name is the UTC start time plus a
random suffix; two runs of one site in the same second get different names,
and the rename refuses to replace an existing (non-empty) run. A writer that fails
(a full disk) or is killed leaves only its hidden ``.incoming-*`` behind: never read as
a run, reported by :func:`leftovers` (and :func:`load_runs`), kept for inspection.
"""

import json
import os
import re
import secrets
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.results import figures_file, runfiles

REPORT = figures_file.REPORT_FILE
#: What the index reads of a run where it has one (runs stored before 2026-11-28: report.json).
FIGURES = figures_file.FIGURES_FILE
PROVENANCE = "provenance/provenance.json"
TOPOLOGY = "provenance/topology.json"
INCOMING = ".incoming-"
#: In a run being assembled: who assembles it (host, pid, process start), so that one left
#: by a killed writer is told apart from one still being written (:func:`leftovers`).
WRITER = ".writer"
ABANDONED = "ABANDONED"
ABANDONED_SUFFIX = ".abandoned"


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
        # Another writer of the site may draw the same name in the same second: draw again.
        for _ in range(100):
            self.name = new_run_name(when)
            self.path = self.site_dir / f"{INCOMING}{self.name}"
            try:
                self.path.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise SitebenchError(
                f"could not find a free run name in {self.site_dir} (100 draws)",
                f"remove leftover {INCOMING}* directories of {self.site_dir} once inspected",
            )
        pid = os.getpid()
        writer = {"host": socket.gethostname(), "pid": pid, "start": _process_start(pid)}
        (self.path / WRITER).write_text(json.dumps(writer) + "\n")

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
            (final / WRITER).unlink(missing_ok=True)
            return final
        raise SitebenchError(
            f"could not find a free run name in {self.site_dir}",
            f"the assembled run is kept in {self.path}; move it to a new name by hand",
        )

    def discard(self, reason):
        """Remove an assembly nothing was written into (a session that wrote no report):
        there is nothing to inspect, and a leftover would be named by every later run.
        One that holds anything is kept, marked abandoned, as :meth:`abandon` does."""
        written = [p for p in self.path.iterdir() if p.name != WRITER]
        if written:
            self.abandon(reason)
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        return True

    def abandon(self, reason):
        """Keep a failed assembly for inspection, clearly marked, never as a run."""
        try:
            (self.path / ABANDONED).write_text(reason + "\n")
        except OSError:
            pass  # e.g. the disk is full: the hidden name and the dead writer still tell

    def failed(self, err, kept=None):
        """A write into the run failed (a full disk, permissions): mark the assembly
        abandoned and return the error to raise. Nothing becomes visible."""
        what = err.strerror or str(err)
        if getattr(err, "filename", None):
            what += f" ({err.filename})"
        elif isinstance(err, shutil.Error) and err.args and err.args[0]:
            # copytree's list of (source, destination, why): the first why says it.
            what = re.sub(r"^\[Errno \d+\] ", "", str(err.args[0][0][2]))
        self.abandon(f"writing the run failed: {what}")
        try:  # the name says it too where the disk had no room for the marker
            self.path = self.path.rename(self.path.with_name(self.path.name + ABANDONED_SUFFIX))
        except OSError:
            pass
        return SitebenchError(
            f"could not store the run {self.site}/{self.name}: {what}; nothing was stored"
            + (f" (ReFrame's output is kept in {kept})" if kept else ""),
            f"make room on (or repair) the file system of {self.site_dir} and run again; "
            f"the partial copy is kept hidden in {self.path}: remove it once inspected",
        )


def _process_start(pid):
    """A process's start time (clock ticks since boot), None if it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, ValueError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _writer_alive(writer):
    pid = writer.get("pid")
    if not isinstance(pid, int):
        return False
    start = _process_start(pid)
    if start is not None or Path("/proc/self/stat").exists():
        return start is not None and start == writer.get("start")
    try:  # no /proc: the pid alone
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _leftover_reason(path, min_age):
    try:
        if (path / ABANDONED).is_file():
            return "abandoned: " + (path / ABANDONED).read_text().strip()
        if path.name.endswith(ABANDONED_SUFFIX):
            return "abandoned: writing it failed"
        try:
            writer = json.loads((path / WRITER).read_text())
        except FileNotFoundError:
            age = time.time() - path.stat().st_mtime
            return f"unfinished, writer unknown, {age:.0f} s old" if age > min_age else None
    except FileNotFoundError:
        return None  # committed (or removed) meanwhile
    except (OSError, ValueError) as err:
        return f"unfinished, writer unreadable ({err})"
    if not isinstance(writer, dict) or writer.get("host") != socket.gethostname():
        return None  # written from another host: cannot tell whether it is still at work
    if _writer_alive(writer):
        return None
    return f"unfinished: its writer (pid {writer.get('pid')}) is gone (killed or crashed)"


def leftovers(site, root=None, min_age=60):
    """Runs left half-assembled (``.incoming-*``) by a failed or killed writer, as
    (path, why). Never runs: readers ignore them; they are kept for inspection."""
    site_dir = Path(root or paths.results_dir()) / check_name("site", site)
    if not site_dir.is_dir():
        return []
    found = []
    for path in sorted(site_dir.glob(INCOMING + "*")):
        why = _leftover_reason(path, min_age)
        if why:
            found.append((path, why))
    return found


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


#: Runs stored before 2026-11-24 kept a failed case's stage here, as ``<test>/``; read by
#: :func:`case_folder` only (runs are never rewritten; results travel between sites).
LEGACY_FAILED_STAGE = "failed-stage"

#: Files of a kept stage larger than this stay out of the run (data directories,
#: generated inputs): the logs that explain a failure are small.
MAX_KEPT_STAGE_FILE = 8 * 1024 * 1024


def cases_of(report):
    """The test cases of a loaded ReFrame report, over all its attempts (re-runs)."""
    return [case for attempt in report.get("runs", []) for case in attempt.get("testcases", [])]


def report_cases(report_path):
    """The test cases of a ReFrame report file; none where it is missing or not JSON (an
    interrupted ReFrame may have written neither)."""
    try:
        return cases_of(json.loads(Path(report_path).read_text()))
    except (OSError, json.JSONDecodeError):
        return []


def case_path(case):
    """A case's folder inside a run: ``output/<system>/<partition>/<environ>/<test>``
    (ReFrame's ``outputdir`` is absolute at run time; its last four parts name it). None
    where they are not four plain names (a report from elsewhere may say anything)."""
    outputdir = case.get("outputdir")
    parts = Path(outputdir).parts[-4:] if isinstance(outputdir, str) else ()
    if len(parts) < 4 or any(p in ("/", ".", "..") for p in parts):
        return None
    return Path("output", *parts)


def _copy_small_files(stage, dest):
    for path in sorted(stage.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        if path.stat().st_size > MAX_KEPT_STAGE_FILE:
            continue
        target = dest / path.relative_to(stage)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def keep_case_files(report_path, run_path):
    """Give every case of a run its files in its one folder (:func:`case_path`).

    ReFrame copies a case's files to its output folder when it cleans the case up. Two
    kinds never get there, and their stage would be lost with the run's scratch space: a
    failed case (ReFrame keeps its stage, leaves its output folder empty: its logs say why
    it failed) and a fixture that passed but was never cleaned up because a dependent was
    skipped (STREAM at more threads than cores). Their stage's small files go into their
    case folder, so every reader finds every case in the same place."""
    for case in report_cases(report_path):
        stage, where = Path(case.get("stagedir") or ""), case_path(case)
        if where is None or stage == Path() or not stage.is_dir():
            continue
        folder = Path(run_path) / where
        if folder.is_dir() and any(folder.iterdir()):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        _copy_small_files(stage, folder)


def case_folder(run_path, case):
    """Where a stored run keeps a case's files, or None. The one reader of case files:
    its folder (:func:`case_path`), or, in a run stored before the single layout, the
    failed case's stage under ``failed-stage/``. Only a real directory inside the run is
    returned (no step a symbolic link): read its files with :mod:`.runfiles`."""
    where = case_path(case)
    inside = where is not None and runfiles.is_dir(run_path, where)
    if inside and any((Path(run_path) / where).iterdir()):
        return Path(run_path) / where
    stagedir = case.get("stagedir")
    stage = Path(stagedir).name if isinstance(stagedir, str) else ""
    legacy = Path(LEGACY_FAILED_STAGE, stage) if stage not in ("", ".", "..") else None
    if case.get("result") == "fail" and legacy and runfiles.is_dir(run_path, legacy):
        return Path(run_path) / legacy
    return Path(run_path) / where if inside else None


def case_folder_problem(run_path, case):
    """Why the folder a case's report entry names is not read (it leaves the run, a step of
    it is a link or no directory), or None when it is fine or simply absent."""
    outputdir = case.get("outputdir")
    where = case_path(case)
    if where is None:
        leaves = not isinstance(outputdir, str) or ".." in Path(outputdir).parts
        if outputdir is not None and leaves:
            return (
                f"its outputdir {str(outputdir)[:200]!r} is not a folder inside the run; ignored"
            )
        return None
    try:
        runfiles.check_dir(run_path, where)
    except runfiles.MissingFile:
        return None
    except runfiles.UnsafeFile as err:
        return f"{err}; not read"
    return None


@dataclass
class Run:
    site: str
    name: str
    path: Path
    report: dict
    provenance: dict
    #: ``provenance/topology.json`` where the run has one (runs before host fingerprints).
    topology: dict | None = None
    #: sha256 of each file read, by its path in the run: what the store's index was made of.
    digests: dict = field(default_factory=dict)


class BadRun(Exception):
    """A run directory that cannot be read; the message says why."""


#: The files the store's index may be made of (:func:`load_run` reads these and no other):
#: ``figures.json``, or ``report.json`` in a run that has none, with the provenance.
INDEXED_FILES = (FIGURES, REPORT, PROVENANCE, TOPOLOGY)


def load_run(path):
    """A stored run's report, provenance and topology, read defensively
    (:mod:`sitebench.results.runfiles`); BadRun says why a run cannot be read."""
    path = Path(path)
    return parse_run(
        path.parent.name,
        path.name,
        path,
        lambda relative, limit: runfiles.read_bytes(path, relative, limit),
    )


def parse_run(site, name, path, read):
    """A run from its files as ``read(relative, limit)`` gives their bytes (a run's
    folder, or another site's blobs in git), with the same refusals whatever the source:
    caps, JSON, depth, types. ``path`` names the run in messages (and is where its other
    files are, for a run on disk). Its report is ``figures.json`` (ReFrame's report with
    what comparison reads) where the run has one, else ``report.json`` (older runs)."""
    digests = {}

    def read_json(relative, limit=None):
        return runfiles.parse_json(
            read(relative, runfiles.file_cap() if limit is None else limit), relative, digests
        )

    shown = FIGURES
    try:
        try:
            report = read_json(FIGURES, runfiles.report_cap())
        except runfiles.MissingFile:
            shown, report = REPORT, read_json(REPORT, runfiles.report_cap())
    except runfiles.MissingFile:
        raise BadRun(f"{path}: no {REPORT} (partial or foreign directory)") from None
    except runfiles.UnsafeFile as err:
        raise BadRun(f"{path}: {err}; not read") from None
    if not isinstance(report, dict) or not isinstance(report.get("runs"), list):
        raise BadRun(f"{path}/{shown} is not a ReFrame run report (no list 'runs')")
    try:
        provenance = read_json(PROVENANCE)
    except runfiles.UnsafeFile as err:
        raise BadRun(f"{path}: missing or unreadable {PROVENANCE} ({err})") from None
    if not isinstance(provenance, dict) or runfiles.too_deep(provenance):
        raise BadRun(
            f"{path}/{PROVENANCE} is not a JSON object of at most {runfiles.MAX_DEPTH} levels"
        )
    try:
        topology = read_json(TOPOLOGY)
    except runfiles.MissingFile:
        topology = None
    except runfiles.UnsafeFile as err:
        raise BadRun(f"{path}: {err}; not read") from None
    return Run(
        site=site,
        name=name,
        path=path,
        report=report,
        provenance=provenance,
        topology=(
            topology if isinstance(topology, dict) and not runfiles.too_deep(topology) else None
        ),
        digests=digests,
    )


def _real_dirs(folder):
    """The real (not linked), visible directories of ``folder``, sorted."""
    found = []
    for entry in os.scandir(folder):
        if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
            found.append(Path(folder) / entry.name)
    return sorted(found)


def run_dirs(site, root=None):
    """The committed runs of a site, oldest first (names sort by time)."""
    site_dir = Path(root or paths.results_dir()) / check_name("site", site)
    if site_dir.is_symlink() or not site_dir.is_dir():
        return []  # a linked site directory is never read (site_links names it)
    return _real_dirs(site_dir)


def load_runs(site, root=None, warn=None):
    """Every readable run of a site; unreadable ones are reported and skipped."""
    warn = warn or (lambda msg: print(f"warning: {msg}; skipped", file=sys.stderr))
    for path, why in leftovers(site, root):
        warn(f"{path} is not a run ({why}); remove it once inspected")
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
    return _real_dirs(root)


def links(folder):
    """The visible symbolic links of a results or site directory: never read as sites or
    runs (one could point anywhere), named so that a reader can say so."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return [folder] if folder.is_symlink() else []
    return sorted(
        Path(folder) / e.name
        for e in os.scandir(folder)
        if not e.name.startswith(".") and e.is_symlink()
    )
