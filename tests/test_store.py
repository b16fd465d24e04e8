"""The results store: an index of results/ that follows it, never writes to it, and
survives a crash between its own writes."""

import json
import os
import re
import subprocess
import time

import pyarrow.parquet as pq
import pytest

from conftest import FIXTURES
from sitebench.results import exchange, exchange_runs, figures_file, rundirs, runfiles, store
from sitebench.results.figures_file import derive
from sitebench.perf import store_bench
from sitebench.results.rundirs import Incoming

REPORT = json.loads((FIXTURES / "reframe/report-local-quick.json").read_text())
CASES = [c for c in REPORT["runs"][0]["testcases"] if not c.get("fixture")]
# Each performance figure, and the job wall time of each case that ran.
FIGURES_PER_RUN = sum(len(c["perfvalues"] or {}) for c in CASES) + sum(
    c["result"] in ("pass", "fail") and c["time_run"] is not None for c in CASES
)


def store_run(site="local", arch="zen3"):
    incoming = Incoming(site)
    (incoming.path / "report.json").write_text(json.dumps(REPORT))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text(json.dumps({"cpu_arch": arch}))
    return incoming.commit()


def count(con, table="figures"):
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_refresh_reads_only_new_runs(results_root):
    store_run()
    assert store.refresh("local") == 1
    assert store.refresh("local") == 0
    store_run()
    assert store.refresh("local") == 1
    con = store.connect(results_root=results_root)
    assert count(con, "runs") == 2 and count(con) == 2 * FIGURES_PER_RUN
    row = con.execute(
        "SELECT arch, partition, case_vars, ref_keys FROM figures WHERE figure = 'gflops'"
    ).fetchone()
    assert row[0] == "zen3" and row[1] == "default"
    assert json.loads(row[2])["scale"] == "quick"


def test_a_removed_run_leaves_the_index(results_root):
    first = store_run()
    store_run()
    store.refresh("local")
    for path in sorted(first.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    first.rmdir()
    store.refresh("local")
    con = store.connect(results_root=results_root)
    assert count(con, "runs") == 1 and count(con) == FIGURES_PER_RUN


@pytest.mark.reliability_fault
def test_a_crash_between_segment_and_run_list_is_repaired(results_root):
    store_run()
    store.refresh("local")
    base = store.store_dir() / "local"
    listed = (base / "runs.json").read_text()
    store_run()
    store.refresh("local")
    # As if the process died after writing the second segment but before listing its run.
    (base / "runs.json").write_text(listed)
    (base / ".fig-000009.parquet.tmp").write_text("half a file")
    assert store.refresh("local") == 1
    con = store.connect(results_root=results_root)
    assert count(con, "runs") == 2 and count(con) == 2 * FIGURES_PER_RUN
    assert not list(base.glob(".*.tmp"))


def test_segments_are_compacted_without_losing_rows(results_root):
    for _ in range(store.MAX_SEGMENTS + 2):
        store_run()
        store.refresh("local")
    base = store.store_dir() / "local"
    assert len(list(base.glob("fig-*.parquet"))) <= store.MAX_SEGMENTS
    con = store.connect(results_root=results_root)
    assert count(con, "runs") == store.MAX_SEGMENTS + 2
    assert count(con) == (store.MAX_SEGMENTS + 2) * FIGURES_PER_RUN


@pytest.mark.reliability_input
def test_unreadable_runs_are_reported_skipped_and_retried(results_root):
    store_run()
    broken = results_root / "local" / "20200101T000000Z-aaaaaa"
    broken.mkdir()
    (broken / "report.json").write_text('{"runs": [')
    warnings = []
    assert store.refresh("local", warn=warnings.append) == 1
    assert len(warnings) == 1 and "20200101T000000Z-aaaaaa" in warnings[0]
    # Repaired by hand, it is picked up at the next refresh.
    (broken / "report.json").write_text(json.dumps(REPORT))
    (broken / "provenance").mkdir()
    (broken / "provenance/provenance.json").write_text("{}")
    assert store.refresh("local", warn=warnings.append) == 1


def test_refresh_reads_accepted_runs_through_the_reader_it_is_given(results_root):
    # The reader replaces git's objects (perf exchange hands its synthetic runs this way):
    # it is asked for what the exchange's log accepted, and a run it cannot give is named,
    # skipped and asked for again at the next refresh.
    ex = exchange.Exchange(results_root)
    subprocess.run(["git", "init", "-q", "--bare", str(ex.git_dir)], check=True)
    good, bad = "20261128T000000Z-aaaaaa", "20261128T000001Z-bbbbbb"
    ex._log_runs([("far", good, "1" * 40, "2" * 40), ("far", bad, "3" * 40, "4" * 40)])
    files = {
        rundirs.REPORT: json.dumps(REPORT).encode(),
        rundirs.PROVENANCE: b'{"cpu_arch": "zen4"}',
    }
    asked = []

    def read_runs(_root, entries):
        for entry in entries:
            asked.append(entry[1])
            if entry[1] == bad:
                yield entry, OSError("blob gone")
                continue

            def read(relative, _limit):
                if relative not in files:
                    raise runfiles.MissingFile(relative)
                return files[relative]

            yield entry, rundirs.parse_run("far", entry[1], entry[1], read)

    warnings = []
    assert store.refresh_all(read_runs=read_runs, warn=warnings.append) == {"far": 1}
    assert asked == [good, bad]
    assert len(warnings) == 1 and bad in warnings[0] and "blob gone" in warnings[0]
    assert store.refresh_all(read_runs=read_runs, warn=warnings.append) == {"far": 0}
    assert asked == [good, bad, bad]
    con = store.connect(results_root=results_root)
    assert con.execute("SELECT DISTINCT arch FROM figures").fetchall() == [("zen4",)]
    assert count(con) == FIGURES_PER_RUN


def test_the_index_never_writes_under_results(results_root):
    store_run()
    store_run("other")
    before = sorted((p, p.stat().st_mtime_ns) for p in results_root.rglob("*"))
    store.open_store()
    assert sorted((p, p.stat().st_mtime_ns) for p in results_root.rglob("*")) == before
    assert not store.store_dir().is_relative_to(results_root)


def test_an_empty_store_still_answers():
    con = store.connect("/nonexistent/store")
    assert count(con) == 0 and count(con, "runs") == 0


def test_the_benchmark_store_has_the_figures_it_claims(tmp_path):
    # The synthesis behind `./sitebench perf store`, at a small size (2 sites, 1 year).
    total = store_bench.synthesize(tmp_path, sites=2, years=1)
    assert total == 2 * 365 * store_bench.FIGURES_PER_RUN
    con = store.connect(tmp_path)
    assert count(con) == total and count(con, "runs") == 2 * 365
    table = pq.read_table(tmp_path / "site00" / "fig-000000.parquet")
    assert table.schema.names == store.FIGURES.names


def test_a_test_run_on_two_partitions_keeps_both(results_root):
    # ReFrame names a test the same on every partition it runs on (local-slurm: srun, mpirun).
    report = json.loads(json.dumps(REPORT))
    cases = report["runs"][0]["testcases"]
    report["runs"][0]["testcases"] = cases + [{**c, "partition": "srun"} for c in cases]
    incoming = Incoming("slurm-site")
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text("{}")
    incoming.commit()
    con = store.open_store(["slurm-site"])
    by_partition = dict(
        con.execute("SELECT partition, count(*) FROM figures GROUP BY 1").fetchall()
    )
    assert by_partition == {"default": FIGURES_PER_RUN, "srun": FIGURES_PER_RUN}


def test_a_half_written_run_is_reported_kept_and_not_indexed(results_root):
    store_run()
    left = Incoming("local")
    (left.path / "report.json").write_text(json.dumps(REPORT))
    left.abandon("ReFrame exited with 2 and wrote no report")
    warnings = []
    assert store.refresh("local", warn=warnings.append) == 1
    assert len(warnings) == 1 and left.path.name in warnings[0]
    assert "ReFrame exited with 2" in warnings[0] and "remove it once inspected" in warnings[0]
    assert left.path.is_dir()  # nothing is lost: kept for inspection
    con = store.connect(results_root=results_root)
    assert count(con, "runs") == 1


@pytest.mark.reliability_fault
def test_a_run_without_a_single_figure_is_indexed_and_summarized(results_root):
    """Every build failed: the run has cases but no figure and no job time. Its index
    segment is still written (an empty figure column once could not be typed, and the
    summary after the run crashed)."""
    from sitebench.results import summary

    failed = [
        {**c, "perfvalues": {}, "result": "fail", "time_run": None, "fail_phase": "setup"}
        for c in REPORT["runs"][0]["testcases"]
    ]
    incoming = Incoming("local")
    report = {**REPORT, "runs": [{**REPORT["runs"][0], "testcases": failed}]}
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text(json.dumps({"cpu_arch": "zen3"}))
    run = incoming.commit()
    assert store.refresh("local") == 1
    con = store.connect(results_root=results_root)
    assert count(con, "runs") == 1 and count(con) == 0
    assert "0 figures" in summary.summarize(run)


def test_a_query_opens_only_the_sites_it_names(tmp_path, monkeypatch):
    # A store of 5 sites: connecting to two lists and reads only those two sites' folders,
    # and the views hold only their segments (issue 19: cost independent of the site count).
    store_bench.synthesize(tmp_path, sites=5, years=1)
    listed = []
    for method in ("iterdir", "glob"):
        original = getattr(store.Path, method)

        def spy(self, *args, _original=original, _method=method):
            listed.append((_method, self))
            return _original(self, *args)

        monkeypatch.setattr(store.Path, method, spy)
    con = store.connect(tmp_path, sites=["site03", "site01"])
    assert {path for _, path in listed} == {tmp_path / "site01", tmp_path / "site03"}
    assert "iterdir" not in {method for method, _ in listed}
    views = dict(
        con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
    )
    for view, prefix in (("figures", "fig"), ("runs", "run")):
        files = sorted(set(re.findall(r"'([^']+\.parquet)'", views[view])))
        assert files == [
            str(tmp_path / s / f"{prefix}-000000.parquet") for s in ("site01", "site03")
        ]
    assert con.execute("SELECT DISTINCT site FROM figures ORDER BY site").fetchall() == [
        ("site01",),
        ("site03",),
    ]
    # A site the index does not hold is not an error: it has no figures.
    assert count(store.connect(tmp_path, sites=["site09"])) == 0


def store_disturbed_run(marks):
    """A run of "local" whose cases carry ``marks`` ({display name: logged variables})."""
    report = json.loads(json.dumps(REPORT))
    for case in report["runs"][0]["testcases"]:
        case.update(marks.get(case["display_name"], {}))
    incoming = Incoming("local")
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text(json.dumps({"cpu_arch": "zen3"}))
    return incoming.commit()


def test_figures_carry_their_cases_disturbed_mark_and_foreign_cores(results_root):
    measured = [c["display_name"] for c in CASES if c["perfvalues"]]
    one, hpl = measured[0], measured[-1]
    store_disturbed_run(
        {
            one: {"disturbed": True, "foreign_cores": 1.617},
            hpl: {"disturbed": False, "foreign_cores": -1.0},  # not measured (not local)
        }
    )
    con = store.open_store(["local"])
    rows = con.execute(
        "SELECT \"check\" || ' ' || params, disturbed, foreign_cores, count(*) FROM figures "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    by_case = {case: (mark, cores, n) for case, mark, cores, n in rows}
    perf = {c["display_name"]: len(c["perfvalues"] or {}) for c in CASES}
    # Every figure of the case carries it (its job_wall too): one row per figure.
    assert by_case[one] == (True, 1.617, perf[one] + 1)
    assert by_case[hpl] == (False, None, perf[hpl] + 1)  # -1 is "not measured": null
    others = {case: v for case, v in by_case.items() if case not in (one, hpl)}
    assert others and all(v[:2] == (False, None) for v in others.values())


def test_runs_stored_before_the_mark_read_as_not_disturbed(results_root):
    assert not any("disturbed" in c or "foreign_cores" in c for c in CASES)  # an old report
    store_run()
    con = store.open_store(["local"])
    marks = con.execute("SELECT DISTINCT disturbed, foreign_cores FROM figures").fetchall()
    assert marks == [(False, None)]


@pytest.mark.reliability_input
def test_a_disturbed_mark_that_is_not_a_bool_is_null_and_named(results_root):
    # A report from elsewhere saying "false" as text: never read as true.
    store_disturbed_run({CASES[0]["display_name"]: {"disturbed": "false"}})
    con = store.open_store(["local"])
    assert con.execute("SELECT count(*) FROM figures WHERE disturbed").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM figures WHERE disturbed IS NULL").fetchone()[0]
    assert [why for *_, why in store.flagged(["local"])][0].endswith("'false')")


def _sites_with_runs(results_root, runs_per_site):
    for site, runs in runs_per_site.items():
        for _ in range(runs):
            store_run(site)
    broken = results_root / "beta" / "20200101T000000Z-aaaaaa"
    broken.mkdir()
    (broken / "report.json").write_text('{"runs": [')


def _index_rows(store_root):
    con = store.connect(store_root)
    return (
        con.execute(
            'SELECT site, run, "check", params, figure, value, problem, case_vars FROM figures '
            "ORDER BY ALL"
        ).fetchall(),
        con.execute("SELECT site, run, provenance FROM runs ORDER BY ALL").fetchall(),
    )


def test_a_refresh_shared_between_processes_indexes_as_one_does(results_root, monkeypatch):
    # Sites shared between this process and a forked copy (as on a first pull of thousands
    # of runs): the same rows, counts and warnings (in the sites' order) as in one process.
    _sites_with_runs(results_root, {"alpha": 3, "beta": 2, "gamma": 1, "delta": 2})
    serial, warned_serial = results_root.parent / "serial", []
    counts = store.refresh_all(store=serial / "i", warn=warned_serial.append)
    monkeypatch.setattr(store, "SHARE_FROM", 1)
    monkeypatch.setattr(store.shares, "cores", lambda: 2)
    parents = []
    real = store.shares.run
    monkeypatch.setattr(
        store.shares, "run", lambda parts, work: parents.append(len(parts)) or real(parts, work)
    )
    shared, warned = results_root.parent / "shared", []
    assert store.refresh_all(store=shared / "i", warn=warned.append) == counts
    assert parents == [2]
    assert counts == {"alpha": 3, "beta": 2, "delta": 2, "gamma": 1}
    assert warned == warned_serial and len(warned) == 1 and "beta/2020" in warned[0]
    assert _index_rows(shared / "i") == _index_rows(serial / "i")
    assert store.refresh_all(store=shared / "i") == dict.fromkeys(counts, 0)


@pytest.mark.reliability_fault
def test_a_share_whose_process_died_is_indexed_by_the_refresh(results_root, monkeypatch):
    # The forked copy dies mid-share (killed, out of memory): its sites are indexed again
    # by the refresh itself from what reached the disk, nothing twice, nothing lost.
    _sites_with_runs(results_root, {"alpha": 2, "beta": 2, "gamma": 2})
    serial = results_root.parent / "serial"
    counts = store.refresh_all(store=serial / "i")
    monkeypatch.setattr(store, "SHARE_FROM", 1)
    monkeypatch.setattr(store.shares, "cores", lambda: 2)
    parent, real = os.getpid(), store._SiteRefresh.finish

    def dying(job, loaded):
        indexed = real(job, loaded)
        if os.getpid() != parent:
            os._exit(9)  # after its first site's segment and list: a half-done share
        return indexed

    monkeypatch.setattr(store._SiteRefresh, "finish", dying)
    shared = results_root.parent / "shared"
    assert store.refresh_all(store=shared / "i") == counts
    assert _index_rows(shared / "i") == _index_rows(serial / "i")


def test_a_share_whose_process_is_stuck_is_killed_and_indexed_by_the_refresh(
    results_root, monkeypatch
):
    # The forked copy never ends (a lock another thread held at the fork): past the wait
    # it is killed and its sites indexed by the refresh itself, as for a copy that died.

    _sites_with_runs(results_root, {"alpha": 2, "beta": 2, "gamma": 2})
    serial = results_root.parent / "serial"
    counts = store.refresh_all(store=serial / "i")
    monkeypatch.setattr(store, "SHARE_FROM", 1)
    monkeypatch.setattr(store.shares, "cores", lambda: 2)
    monkeypatch.setattr(store.shares, "MIN_WAIT_S", 2.0)
    parent, real = os.getpid(), store._SiteRefresh.finish

    def stuck(job, loaded):
        if os.getpid() != parent:
            time.sleep(3600)
        return real(job, loaded)

    monkeypatch.setattr(store._SiteRefresh, "finish", stuck)
    shared = results_root.parent / "shared"
    started = time.monotonic()
    assert store.refresh_all(store=shared / "i") == counts
    assert time.monotonic() - started < 60
    assert _index_rows(shared / "i") == _index_rows(serial / "i")


def _share_work(share):
    """A share's work for shares.run: the pid it ran in and its items; item 'die' ends
    the process at once, 'fail' raises, 'slow' takes a second (still at work when another
    copy dies)."""
    if "slow" in share:
        time.sleep(1.0)
    if "die" in share:
        os._exit(9)
    if "fail" in share:
        raise ValueError(f"share {share} failed")
    return os.getpid(), share


@pytest.mark.reliability_fault
def test_shares_come_back_in_order_and_one_dead_copy_loses_only_its_own():
    # Each copy is a process of its own: one that dies gives None for its share alone, the
    # others' results come back in the shares' order, from other processes than this one.
    from sitebench.results import shares

    results = shares.run([["a"], ["b", "c"], ["die"], ["d", "slow"]], _share_work)
    assert [r[1] if r else None for r in results] == [["a"], ["b", "c"], None, ["d", "slow"]]
    pids = [r[0] for r in results if r]
    assert pids[0] == os.getpid() and len(set(pids)) == 3
    with pytest.raises(ValueError, match="share \\['fail'\\] failed"):
        shares.run([["a"], ["fail"]], _share_work)


@pytest.mark.parametrize("chunk", [1, exchange_runs.CHUNK_BYTES])
def test_runs_read_from_git_in_chunks_name_only_the_run_git_cannot_give(tmp_path, chunk):
    # Runs of another site as a pull leaves them: trees in the exchange's copy. Their files
    # are asked for many runs at once (or one run a chunk): a run whose provenance git has
    # not got is named, the runs before and after it are read whole.
    git_dir = tmp_path / "results" / exchange.EXCHANGE_DIR
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)

    def git(*args, data=b""):
        proc = subprocess.run(
            ["git", "--git-dir", str(git_dir), *args], input=data, capture_output=True, check=True
        )
        return proc.stdout.decode().strip()

    figures = git("hash-object", "-w", "--stdin", data=figures_file.encode(derive(REPORT)))
    entries, lost = [], None
    for at in range(3):
        provenance = git("hash-object", "-w", "--stdin", data=json.dumps({"n": at}).encode())
        inner = git("mktree", data=f"100644 blob {provenance}\tprovenance.json\n".encode())
        listing = f"100644 blob {figures}\tfigures.json\n040000 tree {inner}\tprovenance\n"
        tree = git("mktree", data=listing.encode())
        entries.append(("far", f"2026112{at}T000000Z-abcdef", tree, "0" * 40))
        lost = provenance if at == 1 else lost
    (git_dir / "objects" / lost[:2] / lost[2:]).unlink()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(exchange_runs, "CHUNK_BYTES", chunk)
        read = exchange_runs.load(tmp_path / "results", entries)
    assert [entry for entry, _ in read] == entries
    first, second, third = (run for _, run in read)
    assert isinstance(second, Exception) and "provenance" in str(second)
    assert first.provenance == {"n": 0} and third.provenance == {"n": 2}
    assert first.report == derive(REPORT) == third.report
