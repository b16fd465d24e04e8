"""The results store: atomic, never overwritten, corrupt runs reported and kept."""

import json

import pytest

from conftest import FIXTURES, sitebench
from sitebench import figures
from sitebench.compare import Side, compare, render, robust_sigma
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


def test_existing_run_is_never_replaced(results_root, monkeypatch):
    first = store_run("local")
    before = (first / "report.json").read_bytes()
    incoming = Incoming("local")
    (incoming.path / "report.json").write_text("{}")
    incoming.name = first.name  # force the clash
    second = incoming.commit()
    assert second != first
    assert (first / "report.json").read_bytes() == before


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


def test_compare_two_sites_with_noise(results_root):
    # Site b is 20 % faster in every figure; each site has 4 runs with ±1 % spread.
    for factor in (0.99, 1.0, 1.01, 1.0):
        store_run("a", factor)
        store_run("b", 1.2 * factor)
    table = compare(Side("a"), Side("b"))
    assert len(table) == 9
    assert (table["n_a"] == 4).all() and (table["n_b"] == 4).all()
    assert table["ratio"].tolist() == pytest.approx([1.2] * 9)
    assert set(table["beyond_noise"]) == {"yes"}
    same = compare(Side("a"), Side("a"))
    assert set(same["beyond_noise"]) == {"no"}
    text = render(table, "a", "b")
    assert "B/A" in text and "1.200" in text


def test_compare_single_runs_uses_site_history(results_root):
    runs = [store_run("local", f) for f in (1.0, 1.02, 0.98, 1.0)]
    one, two = runs[0].name, runs[1].name
    table = compare(Side(f"local/{one}"), Side(f"local/{two}"))
    assert table["ratio"].tolist() == pytest.approx([1.02] * 9)
    # Site noise: MAD of (0.98, 1, 1, 1.02) = 0.01 -> sigma ~1.48 %; 2 % < 3 sigma.
    assert table["noise"].tolist() == pytest.approx([0.014826] * 9, rel=1e-3)
    assert set(table["beyond_noise"]) == {"no"}


def test_compare_without_history_says_unknown(results_root):
    store_run("x")
    store_run("y", 2.0)
    assert set(compare(Side("x"), Side("y"))["beyond_noise"]) == {"unknown"}


def test_robust_sigma():
    assert robust_sigma([1.0, 2.0]) is None
    assert robust_sigma([10.0, 10.0, 10.0]) == 0
    assert robust_sigma([9.0, 10.0, 11.0]) == pytest.approx(0.14826)


def test_compare_cli_errors_and_formats(results_root):
    store_run("local")
    store_run("local", 1.1)
    unknown = sitebench("compare", "local", "nowhere")
    assert unknown.returncode == 2 and "has no runs" in unknown.stderr
    escape = sitebench("compare", "local", "../etc")
    assert escape.returncode == 2 and "invalid site name" in escape.stderr
    missing = sitebench("compare", "local/20990101T000000Z-000000", "local")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    csv = sitebench("compare", "local", "local", "--format", "csv", check=True)
    assert csv.stdout.splitlines()[0].startswith("check,params,figure,unit,n_a,median_a")
    js = json.loads(sitebench("compare", "local", "local", "--format", "json", check=True).stdout)
    assert len(js["rows"]) == 9


def test_compare_never_modifies_results(results_root):
    store_run("local")
    (results_root / "local" / "garbage").mkdir()
    before = sorted((p, p.stat().st_mtime_ns) for p in results_root.rglob("*"))
    sitebench("compare", "local", "local", check=True)
    after = sorted((p, p.stat().st_mtime_ns) for p in results_root.rglob("*"))
    assert before == after


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
