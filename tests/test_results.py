"""The results store: atomic, never overwritten, corrupt runs reported and kept."""

import json

import pytest

from conftest import FIXTURES
from sitebench import figures
from sitebench.errors import SitebenchError
from sitebench.results import INCOMING, Incoming, load_runs, run_dirs

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


def test_failed_stages_keep_their_small_files_only(tmp_path):
    from sitebench.results import MAX_KEPT_STAGE_FILE, copy_failed_stages

    stages = {}
    for name in ("SysbenchCheck_1", "OsuBuild_2"):
        stages[name] = tmp_path / "stage/local/default/gnu" / name
        stages[name].mkdir(parents=True)
        (stages[name] / "rfm_job.out").write_text("output\n")
    failed = stages["SysbenchCheck_1"]
    (failed / "mariadb.err").write_text("[ERROR] mariadbd got signal 9\n")
    (failed / "ibdata1").write_bytes(b"\0" * (MAX_KEPT_STAGE_FILE + 1))
    (failed / "mysqld.sock").symlink_to("/tmp/elsewhere/mysqld.sock")
    report = tmp_path / "report.json"
    cases = [
        {"name": "SysbenchCheck", "result": "fail", "stagedir": str(failed)},
        # A fixture whose stage ReFrame left behind, but which passed: not kept.
        {"name": "OsuBuild", "result": "pass", "stagedir": str(stages["OsuBuild_2"])},
    ]
    report.write_text(json.dumps({"runs": [{"testcases": cases}]}))
    copy_failed_stages(report, tmp_path / "run/failed-stage")
    kept = tmp_path / "run/failed-stage"
    assert [p.name for p in kept.iterdir()] == ["SysbenchCheck_1"]
    assert sorted(p.name for p in (kept / "SysbenchCheck_1").iterdir()) == [
        "mariadb.err",
        "rfm_job.out",
    ]
    copy_failed_stages(tmp_path / "no-report.json", tmp_path / "run2")
    assert not (tmp_path / "run2").exists()


def test_case_folder_finds_output_or_kept_stage(tmp_path):
    from sitebench.results import FAILED_STAGE, case_folder

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
    (run / FAILED_STAGE / "HplCheck_3c4d").mkdir(parents=True)
    (run / "output/local/default/gnu/HplCheck_3c4d").mkdir(parents=True)
    assert case_folder(run, passed) == run / "output/local/default/gnu/StreamCheck_1a2b"
    # ReFrame leaves a failed case's output folder empty; the run keeps its stage instead.
    assert case_folder(run, failed) == run / FAILED_STAGE / "HplCheck_3c4d"
    assert case_folder(run, {"result": "skip", "outputdir": None, "stagedir": None}) is None
    assert case_folder(tmp_path / "elsewhere", passed) is None


def test_a_fixture_never_cleaned_up_keeps_its_build_log(tmp_path):
    from sitebench.results import fill_uncleaned_fixtures

    def case(name, result, fixture, outputs):
        stage = tmp_path / "stage/local/default/gnu" / name
        stage.mkdir(parents=True)
        (stage / "rfm_build.out").write_text(f"{name} built\n")
        output = tmp_path / "output/local/default/gnu" / name
        output.mkdir(parents=True)
        for file in outputs:
            (output / file).write_text("copied by ReFrame\n")
        return {
            "name": name,
            "result": result,
            "fixture": fixture,
            "stagedir": str(stage),
            "outputdir": str(output),
        }

    cases = [
        case("StreamBuild_1", "pass", True, []),  # a dependent skipped: no cleanup
        case("HplBuild_2", "pass", True, ["rfm_build.out"]),  # cleaned up by ReFrame
        case("NpbBuild_3", "fail", True, []),  # kept in failed-stage/ instead
        case("StreamCheck_4", "pass", False, []),
    ]
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"runs": [{"testcases": cases}]}))
    fill_uncleaned_fixtures(report)
    output = tmp_path / "output/local/default/gnu"
    assert (output / "StreamBuild_1/rfm_build.out").read_text() == "StreamBuild_1 built\n"
    assert (output / "HplBuild_2/rfm_build.out").read_text() == "copied by ReFrame\n"
    assert not any((output / "NpbBuild_3").iterdir())
    assert not any((output / "StreamCheck_4").iterdir())
