"""Import ReFrame's own results database into the results store.

ReFrame (4.7 and later) can keep every session in an SQLite file: the ``storage``
section of its configuration (``enable``, ``sqlite_db_file``, default
``${HOME}/.reframe/reports/results.db``) or ``RFM_ENABLE_RESULTS_STORAGE`` and
``RFM_SQLITE_DB_FILE``. Its schema, version ``1.0`` (``metadata.schema_version``, the
same from ReFrame 4.7 to 4.10), is read from ``reframe/frontend/reporting/storage.py``::

    sessions(uuid, session_start_unix, session_end_unix, json_blob, report_file)
    testcases(name, system, partition, environ, job_completion_time_unix,
              session_uuid, uuid)
    metadata(schema_version)

``json_blob`` is the session's whole run report, the very dictionary ReFrame writes with
``--report-file`` (``session_info``, ``runs``, ``restored_cases``); ``testcases`` only
indexes it. Each session becomes one run ``results/<site>/<run>/``, named after the
session's start: ``report.json`` (the report, laid out as ReFrame's report file) and
``provenance/provenance.json`` (``"source": "reframe-db"``, the database and the session).
The database keeps no perflogs and no output, so the run has none.

A session already in the site's store is skipped: one imported before (its UUID in the
provenance) or one of sitebench's own runs of a site that also keeps the database (its
UUID in the report). The database is opened read-only and never changed. A file that is
missing or is not such a database is an error; a session whose report cannot be read is
reported and skipped while the others are imported.
"""

import contextlib
import json
import os
import re
import sqlite3
import sys
import time
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.run.provenance import sitebench_checkout
from sitebench.results import figures_file
from sitebench.results.rundirs import PROVENANCE, REPORT, Incoming, run_dirs

SOURCE = "reframe-db"
#: The schema versions of ReFrame's results DB this module reads.
SCHEMA_VERSIONS = ("1.0",)
#: The report data versions (``session_info.data_version``) of ReFrame 4.x: 4.0 to 4.2.
DATA_MAJOR = "4"
#: Seconds to wait for a ReFrame storing a session (its own sqlite_conn_timeout default).
BUSY_TIMEOUT = 60.0
NO_ARCH = "unknown: ReFrame's report does not record the processor"
_TABLES = {
    "sessions": {"uuid", "session_start_unix", "session_end_unix", "json_blob", "report_file"},
    "metadata": {"schema_version"},
}
# The session UUID near the top of a report.json: ReFrame writes session_info first.
_SESSION_UUID = re.compile(r'"session_info":\s*\{[^{}]*?"uuid":\s*"([^"]+)"')


class _BadSession(Exception):
    """A session of the database whose report cannot be imported; the message says why."""


def default_db_path(config_file=None):
    """The results DB ReFrame itself would use with ``config_file`` (None: its builtin one).

    As ReFrame resolves it: ``RFM_SQLITE_DB_FILE``, else ``storage/sqlite_db_file`` of the
    configuration for the system ReFrame detects, else ``${HOME}/.reframe/reports/results.db``
    (the schema's default); variables expanded as ReFrame does."""
    from reframe.core import config
    from reframe.core.exceptions import ReframeError
    from reframe.utility import osext

    value = os.environ.get("RFM_SQLITE_DB_FILE")
    if not value:
        try:
            site_config = config.load_config(*([str(config_file)] if config_file else []))
            site_config.select_subconfig()
            value = site_config.get("storage/0/sqlite_db_file")
        except (ReframeError, OSError) as err:
            raise SitebenchError(
                f"cannot read ReFrame's configuration {config_file or '<builtin>'}: {err}",
                "give the path of the results database explicitly",
            ) from None
    return Path(osext.expandvars(value)).expanduser()


def import_db(site, db_path, results_root=None, warn=None, cpu_arch=None):
    """Store every session of ReFrame's results DB ``db_path`` not yet in ``site``'s store.

    Returns the new run directories, oldest session first. ``warn`` gets one message per
    session skipped because its report is unreadable (default: printed to stderr).
    ``cpu_arch``: the site's CPU microarchitecture, as its admin knows it, where the
    reports do not say (without one, references cannot be proposed from these runs)."""
    warn = warn or (lambda msg: print(f"warning: {msg}; skipped", file=sys.stderr))
    db_path = Path(db_path).expanduser().absolute()
    known = _known_sessions(site, results_root)
    made = []
    with _read_only(db_path) as conn:
        schema = _schema_version(conn, db_path)
        imported = {"at": _iso(time.time()), "sitebench": sitebench_checkout()}
        for row in _session_rows(conn, db_path):
            uuid = row[0]
            if uuid in known:
                continue
            try:
                report = _report(conn, db_path, uuid)
            except _BadSession as err:
                warn(str(err))
                continue
            prov = _provenance(site, db_path, schema, row, report)
            prov["imported"] = imported
            if cpu_arch and not prov["cpu_arch"]:
                prov["cpu_arch"], prov["cpu_arch_note"] = cpu_arch, "given at import"
            made.append(_write_run(site, results_root, report, prov))
            known.add(uuid)
    return made


@contextlib.contextmanager
def _read_only(path):
    """A read-only connection to ``path``: sqlite never creates or writes the file."""
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise SitebenchError(
            f"ReFrame results database {path} {what}",
            "give the path of the site's results.db (ReFrame's storage/sqlite_db_file, "
            "by default ~/.reframe/reports/results.db); ReFrame writes one only with "
            "storage enabled (RFM_ENABLE_RESULTS_STORAGE=1)",
        )
    # A URI, percent-encoded: a path with '?', '#' or '%' stays the path.
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT)
    except sqlite3.Error as err:
        raise _unreadable(path, err) from None
    try:
        yield conn
    finally:
        conn.close()


def _unreadable(path, err):
    if "locked" in str(err):
        return SitebenchError(
            f"{path} is locked by another process ({err}); ReFrame may be storing a session",
            "import again when that ReFrame has finished",
        )
    return SitebenchError(
        f"{path} is not a readable SQLite database ({err})",
        "check the path; if it is ReFrame's results database it is damaged: "
        "restore it from a backup, or import the sessions' JSON reports instead",
    )


def _schema_version(conn, path):
    """The DB's schema version, after checking it has ReFrame's tables and columns."""
    try:
        for table, wanted in _TABLES.items():
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if not wanted <= columns:
                raise SitebenchError(
                    f"{path} is not a ReFrame results database "
                    f"(no table {table!r} with columns {', '.join(sorted(wanted))})",
                    "give the path of the results.db that ReFrame writes with its storage "
                    "enabled (storage/sqlite_db_file in its configuration)",
                )
        found = conn.execute("SELECT schema_version FROM metadata").fetchall()
    except sqlite3.Error as err:
        raise _unreadable(path, err) from None
    # No row: a DB whose creation ReFrame had not finished; it would stamp its version.
    version = found[0][0] if found else SCHEMA_VERSIONS[-1]
    if version not in SCHEMA_VERSIONS:
        raise SitebenchError(
            f"{path} is a ReFrame results database of schema version {version!r}; "
            f"sitebench reads version {', '.join(SCHEMA_VERSIONS)}",
            "export its sessions with the ReFrame that wrote it "
            "(reframe --describe-stored-sessions=UUID) or update sitebench",
        )
    return version


def _session_rows(conn, path):
    """(uuid, start, end, report_file) of every session, oldest first; blobs come later,
    one at a time, so that one unreadable session does not stop the others."""
    try:
        return conn.execute(
            "SELECT uuid, session_start_unix, session_end_unix, report_file FROM sessions "
            "ORDER BY session_start_unix, uuid"
        ).fetchall()
    except sqlite3.Error as err:
        raise _unreadable(path, err) from None


def _report(conn, path, uuid):
    """The session's run report, checked to be one that sitebench can read."""
    where = f"{path}: session {uuid}"
    try:
        (blob,) = conn.execute("SELECT json_blob FROM sessions WHERE uuid = ?", (uuid,)).fetchone()
    except (sqlite3.Error, TypeError) as err:
        raise _BadSession(f"{where}: unreadable row ({err})") from None
    try:
        report = json.loads(blob)
    except (TypeError, ValueError) as err:
        raise _BadSession(f"{where}: its report is not valid JSON ({err})") from None
    info = report.get("session_info") if isinstance(report, dict) else None
    if not isinstance(info, dict) or not isinstance(report.get("runs"), list):
        raise _BadSession(f"{where}: not a ReFrame run report (no 'session_info' or 'runs')")
    if info.get("uuid") != uuid:
        raise _BadSession(f"{where}: its report is of session {info.get('uuid')!r}")
    version = str(info.get("data_version", ""))
    if version.split(".")[0] != DATA_MAJOR:
        raise _BadSession(f"{where}: report data version {version!r}, not {DATA_MAJOR}.x")
    for attempt in report["runs"]:
        cases = attempt.get("testcases") if isinstance(attempt, dict) else None
        if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
            raise _BadSession(f"{where}: a run of its report has no list of test cases")
    if not isinstance(info.get("time_start_unix"), (int, float)):
        raise _BadSession(f"{where}: its report has no start time")
    return report


def _known_sessions(site, results_root):
    """UUIDs of the ReFrame sessions already in the site's store."""
    known = set()
    for path in run_dirs(site, results_root):
        try:
            prov = json.loads((path / PROVENANCE).read_text())
            known.add(prov["reframe_db"]["session_uuid"])
        except (OSError, ValueError, TypeError, KeyError):
            pass
        known.add(_report_session(path / REPORT))
    known.discard(None)
    return known


def _report_session(path):
    """The session UUID of a stored report.json; its head is enough, as a rule."""
    try:
        with open(path, errors="replace") as fp:
            head = fp.read(65536)
        match = _SESSION_UUID.search(head)
        if match:
            return match.group(1)
        return json.loads(Path(path).read_text())["session_info"]["uuid"]
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _iso(stamp):
    if not isinstance(stamp, (int, float)):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _cpu_arch(report):
    """(the CPU architecture the report's test cases name, None or why it is unknown).

    ReFrame's report does not carry the partition's processor; a check may log it as a
    variable (``cpu_arch``) or a ``processor`` dict."""
    found = set()
    for attempt in report["runs"]:
        for case in attempt["testcases"]:
            proc = case.get("processor")
            arch = case.get("cpu_arch") or (proc.get("arch") if isinstance(proc, dict) else None)
            if isinstance(arch, str) and arch:
                found.add(arch)
    if len(found) == 1:
        return found.pop(), None
    if found:
        return None, f"unknown: the test cases name several ({', '.join(sorted(found))})"
    return None, NO_ARCH


def _provenance(site, db_path, schema, row, report):
    uuid, start, end, report_file = row
    info = report["session_info"]
    arch, arch_note = _cpu_arch(report)
    return {
        "site": site,
        "started": _iso(info.get("time_start_unix", start)),
        "finished": _iso(info.get("time_end_unix", end)),
        "source": SOURCE,
        "reframe_db": {
            "path": str(db_path),
            "session_uuid": uuid,
            "schema_version": schema,
            "data_version": info.get("data_version"),
            "report_file": report_file,
        },
        "reframe_version": info.get("version"),
        "reframe_cmdline": info.get("cmdline"),
        "cpu_arch": arch,
        "cpu_arch_note": arch_note,
        "host": {"hostname": info.get("hostname"), "user": info.get("user")},
    }


def _write_run(site, results_root, report, prov):
    incoming = Incoming(site, results_root, when=report["session_info"]["time_start_unix"])
    try:
        # Laid out as ReFrame's --report-file (indent 2, final newline): the same bytes.
        (incoming.path / REPORT).write_text(json.dumps(report, indent=2) + "\n")
        figures_file.write(incoming.path)
        (incoming.path / PROVENANCE).parent.mkdir()
        (incoming.path / PROVENANCE).write_text(json.dumps(prov, indent=2) + "\n")
    except OSError as err:
        incoming.abandon(f"import of ReFrame session failed: {err}")
        raise SitebenchError(
            f"could not write the imported session into {incoming.path}: {err}",
            "free space or fix the permissions of the results directory, then import again",
        ) from None
    return incoming.commit()
