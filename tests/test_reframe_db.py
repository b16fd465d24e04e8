"""Importing ReFrame's results database: one run per session, never twice, the DB untouched.

The database is real: ReFrame itself runs a tiny check twice with its results storage on
(tests/fixtures/reframe-db/README.md); damaged variants are copies of it.
"""

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import FIXTURES
from sitebench.results import figures
from sitebench.common.errors import SitebenchError
from sitebench.common.files import reframe_executable
from sitebench.results.reframe_db import SOURCE, default_db_path, import_db
from sitebench.results.rundirs import Incoming, load_run, run_dirs

CHECK = FIXTURES / "reframe-db" / "echo_number.py"
VALUES = (1.5, 2.5)  # one session each, in this order


@dataclass
class Db:
    path: Path
    reports: list  # the report file ReFrame wrote beside each session, in order
    uuids: list


@pytest.fixture(scope="module")
def reframe_db(tmp_path_factory):
    """ReFrame run twice, storage on, into a private HOME: a real results.db."""
    home = tmp_path_factory.mktemp("rfm-home")
    db = home / "reports" / "results.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RFM_")}
    env.update(
        HOME=str(home),
        TMPDIR=str(home),  # ReFrame's own log files
        RFM_ENABLE_RESULTS_STORAGE="1",
        RFM_SQLITE_DB_FILE=str(db),
    )
    reports = []
    for i, value in enumerate(VALUES):
        report = home / f"report-{i}.json"
        cmd = [reframe_executable(), "-c", str(CHECK), "--prefix", str(home / f"run-{i}")]
        cmd += ["--report-file", str(report), "-S", f"value={value}", "-r"]
        proc = subprocess.run(cmd, cwd=home, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        reports.append(report)
    uuids = [json.loads(r.read_text())["session_info"]["uuid"] for r in reports]
    return Db(db, reports, uuids)


def copy_db(db, tmp_path):
    dest = tmp_path / "copy" / "results.db"
    dest.parent.mkdir()
    shutil.copy2(db.path, dest)
    return dest


def edit_session(path, uuid, change):
    """Rewrite one session's stored report with ``change(report)`` (on a copy only)."""
    with sqlite3.connect(path) as conn:
        (blob,) = conn.execute("SELECT json_blob FROM sessions WHERE uuid = ?", (uuid,)).fetchone()
        blob = change(json.loads(blob))
        try:
            start = json.loads(blob)["session_info"]["time_start_unix"]
        except ValueError:
            start = None  # a damaged report: the row keeps its start
        conn.execute(
            "UPDATE sessions SET json_blob = ?, session_start_unix = coalesce(?, "
            "session_start_unix) WHERE uuid = ?",
            (blob, start, uuid),
        )
    conn.close()


def stamp(unix):
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(unix))


def test_each_session_becomes_one_run(reframe_db, results_root):
    made = import_db("local", reframe_db.path)
    assert sorted(made) == run_dirs("local") and len(made) == 2
    runs = [load_run(path) for path in made]
    for run, report_file, uuid in zip(runs, reframe_db.reports, reframe_db.uuids):
        # The same bytes as ReFrame's own --report-file of that session.
        assert (run.path / "report.json").read_bytes() == report_file.read_bytes()
        info = run.report["session_info"]
        assert run.name.startswith(stamp(info["time_start_unix"]) + "-")
        prov = run.provenance
        assert prov["source"] == SOURCE and prov["site"] == "local"
        assert prov["reframe_db"]["path"] == str(reframe_db.path)
        assert prov["reframe_db"]["session_uuid"] == uuid
        assert prov["reframe_db"]["schema_version"] == "1.0"
        assert prov["reframe_version"] == info["version"]
        assert prov["host"]["hostname"] == info["hostname"]
        assert prov["started"] == time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(info["time_start_unix"])
        )
        assert prov["finished"] >= prov["started"]
        # The builtin 'generic' system has no processor: the arch is unknown, and said so.
        assert prov["cpu_arch"] is None and prov["cpu_arch_note"]
    df = figures.frame(runs)
    assert list(df["value"]) == list(VALUES)
    assert set(df["figure"]) == {"number"} and set(df["check"]) == {"EchoNumber"}
    assert set(df["unit"]) == {"widgets"} and set(df["system"]) == {"generic"}
    assert list(df["reference"]) == [2.0, 2.0]
    assert list(df["lower"]) == [-0.5, -0.5] and list(df["upper"]) == [0.5, 0.5]
    recorded = [
        entry[0]
        for r in reframe_db.reports
        for case in json.loads(r.read_text())["runs"][0]["testcases"]
        for entry in case["perfvalues"].values()
    ]
    assert list(df["value"]) == recorded


def test_import_again_adds_nothing(reframe_db, tmp_path):
    root = tmp_path / "results"
    first = import_db("local", reframe_db.path, results_root=root)
    assert import_db("local", reframe_db.path, results_root=root) == []
    assert run_dirs("local", root) == sorted(first)
    # Another site's store is another store.
    assert len(import_db("other", reframe_db.path, results_root=root)) == 2


def test_session_stored_by_sitebench_itself_is_not_imported_again(reframe_db, results_root):
    incoming = Incoming("local")
    shutil.copy2(reframe_db.reports[0], incoming.path / "report.json")
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text('{"site": "local"}')
    own = incoming.commit()
    made = import_db("local", reframe_db.path)
    assert [load_run(p).provenance["reframe_db"]["session_uuid"] for p in made] == [
        reframe_db.uuids[1]
    ]
    assert run_dirs("local") == sorted([own, *made])


def test_database_is_never_changed(reframe_db, results_root):
    folder = reframe_db.path.parent

    def state():
        return {
            p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in folder.iterdir()
        }

    before = state()
    import_db("local", reframe_db.path)
    assert state() == before  # no byte changed, no lock or journal left beside it


@pytest.mark.reliability_input
def test_missing_file_is_an_error_naming_it(tmp_path, results_root):
    missing = tmp_path / "nowhere" / "results.db"
    with pytest.raises(SitebenchError, match="does not exist") as err:
        import_db("local", missing)
    assert str(missing) in str(err.value) and err.value.fix
    with pytest.raises(SitebenchError, match="is not a file"):
        import_db("local", tmp_path)
    assert run_dirs("local") == []


@pytest.mark.reliability_input
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_database_is_an_error_naming_it(reframe_db, tmp_path, results_root, damage):
    path = copy_db(reframe_db, tmp_path)
    if damage == "garbage":
        path.write_bytes(os.urandom(8192))
    else:
        path.write_bytes(path.read_bytes()[:4096])  # its first page only
    with pytest.raises(SitebenchError, match="not a readable SQLite database") as err:
        import_db("local", path)
    assert str(path) in str(err.value) and err.value.fix
    assert run_dirs("local") == []


@pytest.mark.reliability_input
def test_other_sqlite_file_is_not_a_reframe_db(tmp_path, results_root):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE sessions(id INTEGER, name TEXT)")
    conn.close()
    with pytest.raises(SitebenchError, match="not a ReFrame results database") as err:
        import_db("local", path)
    assert str(path) in str(err.value)


@pytest.mark.reliability_input
def test_unknown_schema_version_is_an_error(reframe_db, tmp_path, results_root):
    path = copy_db(reframe_db, tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE metadata SET schema_version = '9.9'")
    conn.close()
    with pytest.raises(SitebenchError, match="schema version '9.9'") as err:
        import_db("local", path)
    assert str(path) in str(err.value)
    assert run_dirs("local") == []


@pytest.mark.reliability_input
def test_corrupt_session_is_skipped_with_a_warning(reframe_db, tmp_path, results_root):
    path = copy_db(reframe_db, tmp_path)
    edit_session(path, reframe_db.uuids[0], lambda report: json.dumps(report)[:200])
    warnings = []
    made = import_db("local", path, warn=warnings.append)
    assert len(warnings) == 1
    assert reframe_db.uuids[0] in warnings[0] and str(path) in warnings[0]
    assert "not valid JSON" in warnings[0]
    assert [load_run(p).provenance["reframe_db"]["session_uuid"] for p in made] == [
        reframe_db.uuids[1]
    ]
    assert list(figures.frame([load_run(p) for p in made])["value"]) == [VALUES[1]]


def test_report_of_another_session_is_skipped(reframe_db, tmp_path, results_root):
    path = copy_db(reframe_db, tmp_path)
    other = json.loads(reframe_db.reports[1].read_text())
    edit_session(path, reframe_db.uuids[0], lambda _report: json.dumps(other))
    warnings = []
    assert len(import_db("local", path, warn=warnings.append)) == 1
    assert "is of session" in warnings[0]


def test_sessions_started_in_the_same_second_get_distinct_runs(reframe_db, tmp_path, results_root):
    path = copy_db(reframe_db, tmp_path)
    first = json.loads(reframe_db.reports[0].read_text())["session_info"]["time_start_unix"]

    def same_start(report):
        report["session_info"]["time_start_unix"] = first
        return json.dumps(report)

    edit_session(path, reframe_db.uuids[1], same_start)
    made = import_db("local", path)
    assert len(made) == 2 and made[0].name != made[1].name
    assert {p.name.split("-")[0] for p in made} == {stamp(first)}


def test_path_with_uri_characters(reframe_db, tmp_path, results_root):
    folder = tmp_path / "a?b#c%20d"
    folder.mkdir()
    path = folder / "results.db"
    shutil.copy2(reframe_db.path, path)
    assert len(import_db("local", path)) == 2


def test_default_db_path_is_reframes(tmp_path, monkeypatch):
    monkeypatch.delenv("RFM_SQLITE_DB_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_db_path() == tmp_path / ".reframe/reports/results.db"
    config = tmp_path / "settings.py"
    config.write_text(
        "site_configuration = {\n"
        "    'systems': [{'name': 'sys', 'hostnames': ['.*'], 'partitions': [\n"
        "        {'name': 'p', 'scheduler': 'local', 'launcher': 'local',\n"
        "         'environs': ['builtin']}]}],\n"
        "    'environments': [{'name': 'builtin'}],\n"
        "    'storage': [{'enable': True, 'sqlite_db_file': '${HOME}/db/results.db'}],\n"
        "}\n"
    )
    assert default_db_path(config) == tmp_path / "db/results.db"
    monkeypatch.setenv("RFM_SQLITE_DB_FILE", str(tmp_path / "env.db"))
    assert default_db_path(config) == tmp_path / "env.db"


def test_name_clash_keeps_the_sessions_time(reframe_db, results_root, monkeypatch):
    from sitebench.results import rundirs as module

    taken = results_root / "local" / "20000101T000000Z-000000"
    (taken / "provenance").mkdir(parents=True)
    (taken / "report.json").write_text("{}")
    names = iter([taken.name])
    real = module.new_run_name
    # The first name a run gets is taken; the one after the clash must be the session's.
    monkeypatch.setattr(module, "new_run_name", lambda when: next(names, None) or real(when))
    made = import_db("local", reframe_db.path)
    assert taken not in made and (taken / "report.json").read_text() == "{}"
    for path in made:
        start = load_run(path).report["session_info"]["time_start_unix"]
        assert path.name.startswith(stamp(start) + "-")


@pytest.mark.reliability_fault
def test_database_locked_by_a_writer_is_an_error_saying_so(
    reframe_db, tmp_path, results_root, monkeypatch
):
    from sitebench.results import reframe_db as module

    monkeypatch.setattr(module, "BUSY_TIMEOUT", 0.1)
    path = copy_db(reframe_db, tmp_path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")  # as ReFrame storing a session
    try:
        with pytest.raises(SitebenchError, match="locked by another process") as err:
            import_db("local", path)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert str(path) in str(err.value)
    assert len(import_db("local", path)) == 2  # once the writer is done
