"""Hostile runs: a run from another site (or copied by hand) whose *content* is hostile must
never make the store read outside results/, hang, crash or serve stale figures.

Each case builds a results directory from a copy of a real committed run (the honest one) and
one hostile run beside it, then runs ``compare``, ``regressions`` and ``report`` as a user
does (subprocesses: a traceback would show) and asserts: no traceback, exit status 0, the
hostile run named in a one-line warning, the honest run's figures still there, and a secret
file outside results/ never in any output, in the report or in the store's files.
"""

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import ROOT, sitebench
from sitebench import report
from sitebench.report import data as report_data
from sitebench.results import compare, regress, store

HONEST = ROOT / "results/local/20261122T111440Z-ebb65a"
#: A committed run with OSU cases (the report reads their curves from output/).
WITH_OSU = ROOT / "results/local/20261125T095540Z-bb645e"
HOSTILE = "20261123T000000Z-bad000"
#: Seconds any one command may take: a reader hung on a FIFO fails the case, not the suite.
TIMEOUT = 180


@pytest.fixture
def world(results_root, tmp_path):
    """(results root, honest run, hostile run path, secret marker, secret file)."""
    marker = f"SECRET-{uuid.uuid4().hex}"
    secret = tmp_path / "secret"
    secret.write_text(marker + "\n")
    honest = results_root / "local" / HONEST.name
    shutil.copytree(HONEST, honest)
    return results_root, honest, results_root / "local" / HOSTILE, marker, secret


def copy_run(source, dest):
    shutil.copytree(source, dest)
    return dest


def leaky_report(marker, source=HONEST):
    """The honest run's report with the marker in every case's name: indexed, it would show."""
    report = json.loads((source / "report.json").read_text())
    for attempt in report["runs"]:
        for case in attempt["testcases"]:
            case["display_name"] += f" %leak={marker}"
    return json.dumps(report)


def cli(*args, env=None):
    """``conftest.sitebench`` with a time limit (a FIFO read would hang it for ever)."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "sitebench", *args],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"sitebench {' '.join(args)} hung (over {TIMEOUT} s): {err}")


def store_text():
    """Every value of every file of the store's index, as text (Parquet is compressed)."""
    parts = []
    for path in sorted(Path(os.environ["SITEBENCH_STORE_DIR"]).rglob("*")):
        if path.suffix == ".parquet":
            parts.append(pq.read_table(path).to_pandas().to_csv())
        elif path.is_file():
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def commands(honest, tmp, env=None, timed=False):
    """compare, regressions and report as a user runs them: ({name: completed process},
    the report's HTML)."""
    run = cli if timed else sitebench
    out = tmp / "report.html"
    procs = {
        "compare": run("compare", f"local/{honest.name}", "local", "--format", "csv", env=env),
        "regressions": run("regressions", "local", "--run", honest.name, env=env),
        "report": run("report", "--out", str(out), "--site", "local", env=env),
    }
    return procs, out.read_text() if out.is_file() else ""


def in_process(root, honest):
    """The same three as the commands call them, in this process (quicker): ({name:
    (output, warnings)}, the report's HTML)."""
    found = {}
    warnings = []
    a, b = compare.Side.parse(f"local/{honest.name}"), compare.Side.parse("local")
    table = compare.compare(a, b, warn=warnings.append)
    found["compare"] = (compare.render(table, a.label, b.label, "csv"), warnings)
    warnings = []
    run, earlier, df = regress.check_site("local", honest.name, warn=warnings.append)
    found["regressions"] = (regress.render("local", run, earlier, df), warnings)
    warnings = []
    made = report.make(sites=["local"], results_root=root, warn=warnings.append)
    found["report"] = ("\n".join(made.skipped), warnings)
    return found, made.html


def _results(world, tmp_path, env, timed, cli_too):
    """{name: (stdout, [warning lines])} and the report's HTML, by the CLI or in process."""
    root, honest = world[:2]
    if not cli_too:
        return in_process(root, honest)
    procs, html = commands(honest, tmp_path, env, timed)
    found = {}
    for name, proc in procs.items():
        output = proc.stdout + proc.stderr
        assert "Traceback" not in output, f"{name}:\n{output}"
        assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{output}"
        found[name] = (proc.stdout, proc.stderr.splitlines())
    return found, html


def assert_survived(
    world, tmp_path, env=None, timed=False, warned=None, cli_too=True, read_by=("compare",)
):
    """The checks every case makes; returns each command's warnings, one string each.
    ``read_by``: the commands that read what is hostile (the report reads every run)."""
    root, honest, hostile, marker, _secret = world
    found, html = _results(world, tmp_path, env, timed, cli_too)
    for name, (out, warnings) in found.items():
        text = out + "\n".join(warnings)
        assert marker not in text, f"{name} printed the secret:\n{text}"
        assert all("\n" not in w for w in warnings), warnings
    assert marker not in html, "the report shows the secret"
    assert marker not in store_text(), "the store's index holds the secret"
    # The hostile run is named, on one line, where it was read (compare reads it first).
    name = warned or f"local/{hostile.name}"
    named = [w for cmd in read_by for w in found[cmd][1] if name in w]
    assert named, {cmd: found[cmd][1] for cmd in read_by}
    if cli_too:
        assert all(w.startswith("warning: ") for w in named), named
    assert any(name in w for w in found["report"][1]), found["report"][1]
    # The honest run's figures are all there.
    assert "StreamCheck" in found["compare"][0] and "HplCheck" in found["compare"][0]
    assert honest.name in found["regressions"][0]
    assert f"run-local-{honest.name}" in html
    return {name: "\n".join(warnings) for name, (_out, warnings) in found.items()}


# -- what is read: regular files inside the run, no link followed --------------------------


@pytest.mark.reliability_input
def test_report_json_linked_outside_is_not_read(world, tmp_path):
    root, honest, hostile, marker, secret = world
    secret.write_text(leaky_report(marker))  # were it followed, its figures would show
    copy_run(HONEST, hostile)
    (hostile / "report.json").unlink()
    (hostile / "report.json").symlink_to(secret)
    stderr = assert_survived(world, tmp_path)
    assert "symbolic link" in stderr["compare"]


@pytest.mark.reliability_input
def test_provenance_linked_outside_is_not_read(world, tmp_path):
    root, honest, hostile, marker, secret = world
    secret.write_text(json.dumps({"cpu_arch": marker, "host": {"hostname": marker}}))
    copy_run(HONEST, hostile)
    (hostile / "provenance/provenance.json").unlink()
    (hostile / "provenance/provenance.json").symlink_to(secret)
    assert "symbolic link" in assert_survived(world, tmp_path)["compare"]


@pytest.mark.reliability_input
def test_topology_linked_outside_is_not_read(world, tmp_path):
    root, honest, hostile, marker, secret = world
    secret.write_text(json.dumps({"num_cpus": 2, "model": marker}))
    copy_run(HONEST, hostile)
    (hostile / "provenance/topology.json").unlink()
    (hostile / "provenance/topology.json").symlink_to(secret)
    found = assert_survived(world, tmp_path, cli_too=False)
    assert "topology.json is a symbolic link" in found["compare"]


@pytest.mark.reliability_input
def test_run_directory_linked_outside_is_not_read(world, tmp_path):
    root, honest, hostile, marker, secret = world
    elsewhere = copy_run(HONEST, tmp_path / "elsewhere")
    (elsewhere / "report.json").write_text(leaky_report(marker))
    hostile.symlink_to(elsewhere, target_is_directory=True)
    assert_survived(world, tmp_path)


@pytest.mark.reliability_input
def test_site_directory_linked_outside_is_not_read(world, tmp_path):
    root, honest, hostile, marker, secret = world
    outside = tmp_path / "outside-site"
    copy_run(HONEST, outside / HOSTILE)
    (outside / HOSTILE / "report.json").write_text(leaky_report(marker))
    (root / "evil").symlink_to(outside, target_is_directory=True)
    out = tmp_path / "all.html"
    proc = sitebench("report", "--out", str(out))  # every site: the linked one too
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert any("evil" in line and "symbolic link" in line for line in proc.stderr.splitlines())
    assert marker not in out.read_text() and marker not in proc.stdout + proc.stderr
    named = sitebench("compare", "evil", "local", "--format", "csv")  # refused, one line
    assert named.returncode == 2 and "Traceback" not in named.stderr
    assert marker not in named.stdout + named.stderr
    assert "error: results/evil is a symbolic link" in named.stderr, named.stderr
    assert marker not in store_text()


@pytest.mark.reliability_input
def test_case_output_linked_outside_is_not_read(world, tmp_path):
    """The report reads OSU curves from a case's output folder: a link there is not followed,
    and a report entry naming a folder outside the run is ignored."""
    root, honest, hostile, marker, secret = world
    copy_run(WITH_OSU, hostile)
    report = json.loads((hostile / "report.json").read_text())
    cases = [c for a in report["runs"] for c in a["testcases"] if c["name"].startswith("Osu")]
    cases = [c for c in cases if "Build" not in c["name"] and c["perfvalues"]]
    # One case's folder becomes a link to a folder outside results/ with its own curve...
    linked = (
        hostile
        / "output"
        / Path(cases[0]["outputdir"]).relative_to(Path(cases[0]["outputdir"]).parents[3])
    )
    outside = tmp_path / "outside-output"
    shutil.copytree(linked, outside)
    (outside / "rfm_job.out").write_text(
        (outside / "rfm_job.out").read_text().replace(" ", f" {marker} ", 1)
    )
    shutil.rmtree(linked)
    linked.symlink_to(outside, target_is_directory=True)
    # ... another's report entry climbs out of the run.
    cases[1]["outputdir"] = "/x/../../../../outside-output"
    (hostile / "report.json").write_text(json.dumps(report))
    data = report_data.load(results_root=root, warn=lambda message: None)
    notes = "\n".join(data.skipped)
    assert "symbolic link" in notes and "is not a folder inside the run" in notes, notes
    # Neither case has a curve; the run's other OSU cases keep theirs.
    hostile_curves = data.curves[data.curves.run == HOSTILE]
    shown = set(zip(hostile_curves.check, hostile_curves.params, hostile_curves.environ))
    gone = {(*c["display_name"].split(" ", 1), c["environ"]) for c in cases[:2]}
    assert shown and not gone & shown, (gone, shown)
    assert_survived(
        world, tmp_path, warned=f"local/{HOSTILE}: Osu", cli_too=False, read_by=("report",)
    )


@pytest.mark.reliability_input
def test_paths_recorded_in_the_report_and_linked_perflogs_are_never_read(world, tmp_path):
    """ReFrame records absolute paths (stage, output, job files); a perflog may be a link or
    a FIFO. None is read: only a case's folder named by plain names inside the run is."""
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    report = json.loads((hostile / "report.json").read_text())
    for case in _cases(report):
        for key in ("stagedir", "job_stdout", "job_stderr", "build_stdout", "build_stderr"):
            case[key] = str(secret)
        case["outputdir"] = f"/x/../../../../{secret.name}"
        case["result"] = "fail"  # a failed case's stage is looked for by its name
    (hostile / "report.json").write_text(json.dumps(report))
    perflogs = sorted(hostile.glob("perflogs/*/*/*.log"))
    perflogs[0].unlink()
    perflogs[0].symlink_to(secret)
    perflogs[1].unlink()
    os.mkfifo(perflogs[1])
    stderr = assert_survived(world, tmp_path, timed=True, read_by=("report",))
    assert "is not a folder inside the run" in stderr["report"]


# -- special files: never opened for reading ------------------------------------------------


@pytest.mark.reliability_input
@pytest.mark.parametrize("name", ["report.json", "provenance/provenance.json"])
def test_a_fifo_in_place_of_a_file_hangs_nothing(world, tmp_path, name):
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    (hostile / name).unlink()
    os.mkfifo(hostile / name)
    assert "FIFO" in assert_survived(world, tmp_path, timed=True)["compare"]


@pytest.mark.reliability_input
def test_a_fifo_in_place_of_an_osu_output_hangs_nothing(world, tmp_path):
    root, honest, hostile, marker, secret = world
    copy_run(WITH_OSU, hostile)
    outputs = sorted(hostile.glob("output/*/*/*/OsuLatencyCheck_*/rfm_job.out"))
    for path in outputs:
        path.unlink()
        os.mkfifo(path)
    stderr = assert_survived(world, tmp_path, timed=True, read_by=("report",))
    assert "rfm_job.out is a FIFO" in stderr["report"]


# -- size caps before parsing -------------------------------------------------------------


@pytest.mark.reliability_input
def test_an_oversized_report_is_skipped_before_it_is_parsed(world, tmp_path):
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    cap = 2 * (honest / "report.json").stat().st_size
    padded = json.loads((hostile / "report.json").read_text())
    padded["padding"] = "x" * (2 * cap)
    (hostile / "report.json").write_text(json.dumps(padded))
    env = {"SITEBENCH_MAX_REPORT_BYTES": str(cap)}
    assert "over the" in assert_survived(world, tmp_path, env=env)["compare"]


@pytest.mark.reliability_input
def test_an_oversized_provenance_is_skipped(world, tmp_path, monkeypatch):
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    (hostile / "provenance/provenance.json").write_text(json.dumps({"pad": "x" * 300_000}))
    monkeypatch.setenv("SITEBENCH_MAX_RUN_FILE_BYTES", "100000")
    assert "over the" in assert_survived(world, tmp_path, cli_too=False)["compare"]


def test_a_bad_cap_setting_is_an_error_naming_the_fix(world, tmp_path):
    proc = sitebench("compare", "local", "local", env={"SITEBENCH_MAX_REPORT_BYTES": "a lot"})
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "SITEBENCH_MAX_REPORT_BYTES" in proc.stderr and "whole number" in proc.stderr


# -- content of the wrong shape: that run skipped, the others kept -------------------------


def _deep(levels):
    return "[" * levels + "]" * levels


def _report_with(mutate):
    report = json.loads((HONEST / "report.json").read_text())
    mutate(report)
    return json.dumps(report)


def _cases(report):
    return [c for attempt in report["runs"] for c in attempt["testcases"]]


def _set_case(**values):
    def mutate(report):
        for case in _cases(report):
            case.update(values)

    return mutate


def _drop_names_and_list_perfvalues(report):
    for case in _cases(report):
        case.pop("name", None)
        case["perfvalues"] = [1, 2]


#: The shapes also run through the CLI (the others in process, quicker).
CLI_CASES = {"nested 100000 levels", "figures strings, lists, NaN and infinity"}
#: A report of each hostile shape (text; bytes where it is not UTF-8).
HOSTILE_REPORTS = {
    "nested 100000 levels": '{"runs": ' + _deep(100_000) + "}",
    "a list, not an object": "[1, 2, 3]",
    "runs an object": '{"runs": {"testcases": []}}',
    "test cases strings and numbers": '{"runs": [{"testcases": ["case", 5, null]}]}',
    "session info a list": _report_with(lambda r: r.update(session_info=[1, 2])),
    "figures strings, lists, NaN and infinity": _report_with(
        _set_case(
            perfvalues={
                "local:default:bw": ["fast", [1], {"a": 1}, float("nan"), ["s"]],
                "local:default:lat": [float("nan"), float("inf"), None, None, "us"],
            }
        )
    ),
    "counts too large or not numbers": _report_with(
        lambda r: r["session_info"].update(num_cases=10**30, num_failures="many")
    ),
    "names with lone surrogates, lists, newlines": _report_with(
        _set_case(display_name="Stream\ud800Check %x=\n", system=["local"], partition={"a": 1})
    ),
    "perfvalues a list, names missing": _report_with(_drop_names_and_list_perfvalues),
    "not UTF-8": b'{"runs": [], "x": "\xff\xfe"}',
}


@pytest.mark.reliability_input
@pytest.mark.parametrize("what", sorted(HOSTILE_REPORTS))
def test_a_report_of_the_wrong_shape_skips_that_run_only(world, tmp_path, what):
    """Skipped, or indexed with the values of the wrong type as null; either way named."""
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    text = HOSTILE_REPORTS[what]
    if isinstance(text, bytes):
        (hostile / "report.json").write_bytes(text)
    else:
        (hostile / "report.json").write_text(text)
    assert_survived(world, tmp_path, cli_too=what in CLI_CASES)


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "provenance",
    [
        '{"a": ' + _deep(100_000) + "}",
        "[]",
        '"a string"',
        '{"host": "a string", "emulated": [1], "cpu_arch": {"a": 1}}',
        '{"host_fingerprint": {"id": ["x"]}, "started": 5}',
        json.dumps({"nested": json.loads(_deep(500))}),
    ],
    ids=["nested", "list", "string", "wrong types", "fingerprint id a list", "500 levels"],
)
def test_a_provenance_of_the_wrong_shape_skips_that_run_only(world, tmp_path, provenance):
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    (hostile / "provenance/provenance.json").write_text(provenance)
    assert_survived(world, tmp_path, cli_too=False)


# -- a run changed after it was indexed ---------------------------------------------------


def _double_first_figure(report_text):
    report = json.loads(report_text)
    for case in _cases(report):
        for entry in (case.get("perfvalues") or {}).values():
            if case["name"].startswith("StreamCheck"):
                entry[0] = entry[0] * 1000
    return json.dumps(report)


@pytest.mark.reliability_input
def test_a_run_changed_after_indexing_is_indexed_anew_and_reported(world, tmp_path):
    """Changed in place with its size and mtime kept: still found (the inode's ctime and the
    content's hash), indexed anew, named, and listed among the altered runs."""
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    assert store.refresh("local", warn=print) == 2
    report = hostile / "report.json"
    before = report.stat()
    changed = _double_first_figure(report.read_text())
    changed = changed.ljust(before.st_size)[: max(before.st_size, len(changed))]
    report.write_text(changed)
    os.utime(report, ns=(before.st_atime_ns, before.st_mtime_ns))
    stderr = assert_survived(world, tmp_path)
    assert "changed after it was indexed (report.json changed)" in stderr["compare"]
    # The new figures are served, not the old index's.
    con = store.connect(results_root=root)
    (top,) = con.execute(
        "SELECT max(value) FROM figures WHERE run = ? AND \"check\" = 'StreamCheck'", [HOSTILE]
    ).fetchone()
    (honest_top,) = con.execute(
        "SELECT max(value) FROM figures WHERE run = ? AND \"check\" = 'StreamCheck'",
        [honest.name],
    ).fetchone()
    assert top == pytest.approx(honest_top * 1000)
    ((site, run, _when, why),) = store.altered(results_root=root)
    assert (site, run, why) == ("local", HOSTILE, "report.json changed")
    assert "changed after it was indexed" in stderr["report"]  # the report lists it
    listed = cli("exchange", "altered")  # and the command that lists them
    assert listed.returncode == 1, listed.stderr
    assert f" local/{HOSTILE}: report.json changed\n" in listed.stdout, listed.stdout
    assert cli("exchange", "altered", "other-site").returncode == 0


@pytest.mark.reliability_input
def test_a_file_swapped_for_a_link_after_indexing_drops_the_run(world, tmp_path):
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    assert store.refresh("local", warn=print) == 2
    secret.write_text(leaky_report(marker))
    (hostile / "report.json").unlink()
    (hostile / "report.json").symlink_to(secret)
    stderr = assert_survived(world, tmp_path, cli_too=False)
    assert "changed after it was indexed" in stderr["compare"]
    con = store.connect(results_root=root)
    assert con.execute("SELECT count(*) FROM runs WHERE run = ?", [HOSTILE]).fetchone() == (0,)


def test_a_copy_or_touch_of_an_unchanged_run_is_not_a_change(world):
    """A new inode or mtime with the same content (a copy by hand, a backup's touch)."""
    root, honest, hostile, marker, secret = world
    copy_run(HONEST, hostile)
    assert store.refresh("local") == 2
    shutil.rmtree(hostile)
    copy_run(HONEST, hostile)
    os.utime(hostile / "report.json", ns=(1, 1))
    warnings = []
    assert store.refresh("local", warn=warnings.append) == 0
    assert warnings == [] and store.altered(results_root=root) == []


@pytest.mark.reliability_input
def test_references_never_read_a_linked_provenance(results_root, tmp_path):
    """The newest run's provenance, linked to a file outside with a host of its own: were it
    followed, ``references`` would print that host as the references' ``$host``."""
    marker = f"SECRET-{uuid.uuid4().hex}"
    local = results_root / "local"
    for second in range(3):
        copy_run(WITH_OSU, local / f"20261125T09554{second}Z-bb645{second}")
    newest = copy_run(WITH_OSU, local / "20261126T000000Z-bad000")
    provenance = json.loads((WITH_OSU / "provenance/provenance.json").read_text())
    provenance["host_fingerprint"]["cpu_model"] = marker
    secret = tmp_path / "secret"
    secret.write_text(json.dumps(provenance))
    (newest / "provenance/provenance.json").unlink()
    (newest / "provenance/provenance.json").symlink_to(secret)
    proc = sitebench("references", "local")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert marker not in proc.stdout + proc.stderr
    warned = [line for line in proc.stderr.splitlines() if f"local/{newest.name}" in line]
    assert warned and "symbolic link" in warned[0], proc.stderr
    assert "OsuLatencyCheck" in proc.stdout
    assert marker not in store_text()


@pytest.mark.reliability_input
def test_figures_cleaned_a_column_at_once_are_those_cleaned_row_by_row():
    """The refresh cleans a run's figures column by column (:func:`store.clean_columns`):
    every value of the wrong type another site's report may hold is dropped as the row by
    row :func:`store.clean` drops it, and named in the same order (the note's "first")."""
    import pandas as pd

    rows = [
        {
            "site": "a",
            "check": "Ok",
            "figure": "F",
            "value": 1.5,
            "started": "20261122T153115+0000",
        },
        {"check": "Lone\ud800", "figure": "G", "value": float("nan"), "disturbed": "false"},
        {"check": ["a list"], "figure": "H", "value": True, "reference": 10**400},
        {
            "check": "C",
            "figure": "I",
            "value": 3,
            "upper": float("inf"),
            "started": pd.Timestamp(0),
        },
        {"check": "D", "figure": "J", "value": {"x": 1}, "foreign_cores": -0.0, "disturbed": True},
    ]
    by_row, by_column = [], []
    expected = [store.clean(row, store.FIGURES, by_row) for row in rows]
    columns = store.clean_columns(rows, store.FIGURES, by_column)
    for name in store.FIGURES.names:
        assert columns[name] == [row[name] for row in expected], name
    assert [(n, v) for n, _r, v in by_column] == [(n, v) for n, _r, v in by_row]
    assert by_column[0][0] == "value" and len(by_column) == len(by_row) == 7
    assert store._figure_table(columns).num_rows == len(rows)
