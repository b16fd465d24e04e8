"""The results store: atomic, never overwritten, corrupt runs reported and kept."""

import json
from pathlib import Path

import pytest

from conftest import FIXTURES
from sitebench.results import figures
from sitebench.common.errors import SitebenchError
from sitebench.results.rundirs import INCOMING, Incoming, load_runs, run_dirs

REPORT = json.loads((FIXTURES / "reframe/report-local-quick.json").read_text())


def store_run(site, scale_values=1.0, root=None):
    """A run whose figures are the real report's, multiplied by ``scale_values``."""
    report = json.loads(json.dumps(REPORT))
    for case in report["runs"][0]["testcases"]:
        for entry in (case.get("perfvalues") or {}).values():
            entry[0] *= scale_values
    incoming = Incoming(site, root)
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text('{"site": "%s"}' % site)
    return incoming.commit()


def test_run_becomes_visible_in_one_step(results_root):
    incoming = Incoming("local")
    (incoming.path / "report.json").write_text(json.dumps(REPORT))
    assert run_dirs("local") == []  # assembling runs are hidden
    assert incoming.path.name.startswith(INCOMING)
    final = incoming.commit()
    assert run_dirs("local") == [final]
    assert not incoming.path.exists()


def test_same_second_runs_never_collide(results_root):
    made = [store_run("local") for _ in range(20)]
    assert len(set(made)) == 20
    assert len(run_dirs("local")) == 20


@pytest.mark.reliability_fault
def test_existing_run_is_never_replaced(results_root, monkeypatch):
    first = store_run("local")
    before = (first / "report.json").read_bytes()
    incoming = Incoming("local")
    (incoming.path / "report.json").write_text("{}")
    incoming.name = first.name  # force the clash
    second = incoming.commit()
    assert second != first
    assert (first / "report.json").read_bytes() == before


@pytest.mark.reliability_input
def test_site_name_cannot_escape_results(results_root):
    with pytest.raises(SitebenchError, match="invalid site name"):
        Incoming("../outside")
    assert not (results_root.parent / "outside").exists()


def test_figures_from_a_real_report(results_root):
    run = store_run("local")
    df = figures.frame(load_runs("local"))
    assert set(df["check"]) == {"StreamCheck", "HplCheck"}
    assert set(df[df.check == "StreamCheck"]["figure"]) == {"Copy", "Scale", "Add", "Triad"}
    hpl = df[(df.check == "HplCheck") & (df.figure == "gflops")]
    assert list(hpl["value"]) == [pytest.approx(81.606)] and list(hpl["run"]) == [run.name]


@pytest.mark.reliability_input
def test_corrupt_runs_are_reported_skipped_and_kept(results_root, capsys):
    store_run("local")
    site = results_root / "local"
    (site / "20200101T000000Z-aaaaaa").mkdir()  # partial: no report
    bad = site / "20200101T000001Z-bbbbbb"
    bad.mkdir()
    (bad / "report.json").write_text('{"runs": [')  # truncated
    foreign = site / "20200101T000002Z-cccccc"
    foreign.mkdir()
    (foreign / "report.json").write_text('{"hello": 1}')
    warnings = []
    runs = load_runs("local", warn=warnings.append)
    assert len(runs) == 1 and len(warnings) == 3
    assert any("no report.json" in w for w in warnings)
    assert any("not valid JSON" in w for w in warnings)
    assert any("not a ReFrame run report" in w for w in warnings)
    assert bad.exists() and foreign.exists()  # never deleted


def _case(tmp_path, name, result, fixture=False, stage_files=(), output_files=()):
    """A case as ReFrame reports it, with its stage and the run's copy of its output."""
    stage = tmp_path / "stage/local/default/gnu" / name
    stage.mkdir(parents=True)
    for file in stage_files:
        (stage / file).write_text(f"{name} {file}\n")
    output = tmp_path / "run/output/local/default/gnu" / name
    output.mkdir(parents=True)
    for file in output_files:
        (output / file).write_text("copied by ReFrame\n")
    return {
        "name": name,
        "result": result,
        "fixture": fixture,
        "stagedir": str(stage),
        "outputdir": f"/scratch/rfm/output/local/default/gnu/{name}",
    }


def test_every_case_keeps_its_files_in_its_one_folder(tmp_path):
    from sitebench.results.rundirs import MAX_KEPT_STAGE_FILE, case_folder, keep_case_files

    cases = [
        # A failed case: ReFrame keeps its stage and leaves its output folder empty.
        _case(tmp_path, "SysbenchCheck_1", "fail", stage_files=["rfm_job.out", "mariadb.err"]),
        # A fixture a skipped dependent kept ReFrame from cleaning up.
        _case(tmp_path, "StreamBuild_2", "pass", True, stage_files=["rfm_build.out"]),
        # Cleaned up by ReFrame: its output folder is kept as ReFrame copied it.
        _case(tmp_path, "HplBuild_3", "pass", True, ["rfm_build.out"], ["rfm_build.out"]),
        # A failed build fixture: its stage too.
        _case(tmp_path, "NpbBuild_4", "fail", True, stage_files=["rfm_build.err"]),
        # Passed and cleaned up (its stage gone): nothing to add.
        {**_case(tmp_path, "StreamCheck_5", "pass"), "stagedir": str(tmp_path / "gone")},
    ]
    failed_stage = Path(cases[0]["stagedir"])
    (failed_stage / "ibdata1").write_bytes(b"\0" * (MAX_KEPT_STAGE_FILE + 1))
    (failed_stage / "mysqld.sock").symlink_to("/tmp/elsewhere/mysqld.sock")
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"runs": [{"testcases": cases}]}))
    run = tmp_path / "run"
    keep_case_files(report, run)
    folder = run / "output/local/default/gnu"
    assert sorted(p.name for p in (folder / "SysbenchCheck_1").iterdir()) == [
        "mariadb.err",
        "rfm_job.out",
    ]
    assert (folder / "StreamBuild_2/rfm_build.out").read_text() == "StreamBuild_2 rfm_build.out\n"
    assert (folder / "HplBuild_3/rfm_build.out").read_text() == "copied by ReFrame\n"
    assert (folder / "NpbBuild_4/rfm_build.err").is_file()
    assert not any((folder / "StreamCheck_5").iterdir())
    # One reader, one place, whatever became of the case.
    for case in cases:
        assert case_folder(run, case) == folder / case["name"]
    keep_case_files(tmp_path / "no-report.json", tmp_path / "run2")
    assert not (tmp_path / "run2").exists()


def test_case_folder_reads_the_failed_stage_of_runs_stored_before_one_layout(tmp_path):
    from sitebench.results.rundirs import LEGACY_FAILED_STAGE, case_folder

    run = tmp_path / "run"
    passed = {
        "result": "pass",
        "outputdir": "/scratch/rfm/output/local/default/gnu/StreamCheck_1a2b",
        "stagedir": "/scratch/rfm/stage/local/default/gnu/StreamCheck_1a2b",
    }
    failed = {
        "result": "fail",
        "outputdir": "/scratch/rfm/output/local/default/gnu/HplCheck_3c4d",
        "stagedir": "/scratch/rfm/stage/local/default/gnu/HplCheck_3c4d",
    }
    (run / "output/local/default/gnu/StreamCheck_1a2b").mkdir(parents=True)
    (run / "output/local/default/gnu/StreamCheck_1a2b/rfm_job.out").write_text("x\n")
    (run / LEGACY_FAILED_STAGE / "HplCheck_3c4d").mkdir(parents=True)
    (run / "output/local/default/gnu/HplCheck_3c4d").mkdir(parents=True)
    assert case_folder(run, passed) == run / "output/local/default/gnu/StreamCheck_1a2b"
    # Such a run left the failed case's output folder empty and kept its stage aside.
    assert case_folder(run, failed) == run / LEGACY_FAILED_STAGE / "HplCheck_3c4d"
    assert case_folder(run, {"result": "skip", "outputdir": None, "stagedir": None}) is None
    assert case_folder(tmp_path / "elsewhere", passed) is None


def test_committed_runs_keep_every_case_file_readable():
    """Every case of every committed run, old layout or new, is found by the one reader:
    the failed cases of the runs stored with failed-stage/ among them. Only the build
    fixtures ReFrame never cleaned up in runs stored before their stages were kept
    (2026-11-23) have no files: those were lost then, not now."""
    from sitebench.common import paths
    from sitebench.results.rundirs import case_folder, cases_of, load_run, run_dirs, site_dirs

    found, legacy, lost = 0, 0, []
    for site in site_dirs(paths.ROOT / "results"):
        for path in run_dirs(site.name, paths.ROOT / "results"):
            run = load_run(path)
            for case in cases_of(run.report):
                if case.get("result") not in ("pass", "fail"):
                    continue
                folder = case_folder(run.path, case)
                if folder is None or not any(folder.iterdir()):
                    lost.append(case)
                    continue
                found += 1
                legacy += "failed-stage" in folder.parts
    assert found > 100 and legacy == 4, (found, legacy)
    assert all(c.get("fixture") and c["result"] == "pass" for c in lost), lost


# -- a session that stores nothing leaves nothing ---------------------------------------------
def _session_writing_no_report(code):
    import time

    from sitebench.run import runner

    def run_suite(site, prepared, scale, work, report, reframe_args=(), cluster=None):
        now = time.time()
        return runner.Session(command=["reframe"], code=code, interrupted=None,
                              launched=now, exited=now)  # fmt: skip

    return run_suite


@pytest.mark.reliability_input
@pytest.mark.parametrize("code", [0, 1])
def test_a_session_without_a_report_leaves_no_incoming_run(results_root, monkeypatch, code):
    """ReFrame selecting nothing (`run -- -n nomatch`: exit 0, no report) or failing before
    its report: nothing stored, and no `.incoming-*` for every later run to warn about."""
    from types import SimpleNamespace

    from sitebench.results import record, rundirs
    from sitebench.run import runner

    monkeypatch.setattr(runner, "prepare", lambda site: None)
    monkeypatch.setattr(runner, "slurm_cluster", lambda site: None)
    monkeypatch.setattr(runner, "run_suite", _session_writing_no_report(code))
    with pytest.raises(SitebenchError) as err:
        record.run_and_store(SimpleNamespace(name="local"))
    if code == 0:
        assert "selected no test case" in str(err.value) and "-n, -x, -t" in err.value.fix
    assert "nothing was stored" in str(err.value)
    assert list((results_root / "local").iterdir()) == []
    assert rundirs.leftovers("local", min_age=0) == []


def test_an_assembly_holding_something_is_kept_marked_not_discarded(results_root):
    from sitebench.results.rundirs import ABANDONED

    empty, used = Incoming("local"), Incoming("local")
    (used.path / "report.json").write_text("{")
    assert empty.discard("nothing written") and not empty.path.exists()
    assert not used.discard("ReFrame exited with 1")
    assert (used.path / ABANDONED).read_text() == "ReFrame exited with 1\n"


@pytest.mark.spack
@pytest.mark.slow
def test_run_selecting_no_check_stores_nothing_and_leaves_nothing(spack, results_root):
    """The real thing: `./sitebench run -- -n nomatch` says so and leaves results/ empty."""
    from conftest import sitebench

    proc = sitebench("run", "--", "-n", "sitebench-matches-no-check")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "ReFrame selected no test case" in proc.stderr, proc.stderr
    site_dir = results_root / "local"
    assert not site_dir.exists() or list(site_dir.iterdir()) == []
