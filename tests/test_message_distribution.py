"""The multi-core study's message distribution (issue 29): Open MPI's monitoring files parsed,
every peer pair put on its channel (same socket, other socket, other node), on the files
captured in fixtures/ompi-monitoring/ (README.md there says how)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from reframe.core.exceptions import PerformanceError

from conftest import FIXTURES, ROOT, unjudged
from test_slurm_cluster import start_cluster  # noqa: F401 (a fixture)
from sitebench.parsers import ParseError, ompi_monitoring, osu
from sitebench.report import data as report_data
from sitebench.report import seed_tables
from sitebench.results.compare import Side, compare
from sitebench.results.rundirs import Incoming
from sitebench.run import channels, monitoring

MON = FIXTURES / "ompi-monitoring"


def readme_rows():
    """folder -> (exit, files, rank 0 -> 1 cell, rank 1 -> 0 cell, self cell) from the README."""
    rows = {}
    for line in (MON / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")][1:-1]
        if len(cells) == 6 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def counted(cell):
    """'1264 / 2336512, 2 / 4' -> ((1264, 2336512), (2, 4)); '0' is no message."""
    out = []
    for part in cell.split(", "):
        nums = [int(n) for n in re.findall(r"\d+", part)]
        out.append(tuple(nums) if len(nums) == 2 else (0, 0))
    return out


def test_every_capture_is_documented():
    folders = {p.name for p in MON.iterdir() if p.is_dir()}
    assert folders == set(readme_rows())
    assert len(folders) == 10


@pytest.mark.parametrize("folder", sorted(readme_rows()))
def test_each_capture_matches_its_notes(folder):
    exit_status, files, forward, backward, itself = readme_rows()[folder]
    assert (MON / folder / "exit-status").read_text().strip() == exit_status
    if files == "none":
        with pytest.raises(ParseError, match="ended before MPI_Finalize"):
            ompi_monitoring.read_run(MON / folder, expected=2)
        return
    run = ompi_monitoring.read_run(MON / folder, expected=2)
    assert run.complete == (files == "0, 1")
    assert run.missing == (() if run.complete else (1,))
    for rank, cell in ((0, forward), (1, backward)):
        if rank in run.missing:
            continue
        (app_m, app_b), (int_m, int_b) = counted(cell)
        peer = run.ranks[rank].peers[1 - rank]
        assert (peer.app_messages, peer.app_bytes) == (app_m, app_b)
        assert (peer.internal_messages, peer.internal_bytes) == (int_m, int_b)
        assert sum(peer.histogram) == app_m + int_m
        if itself == "-":
            assert rank not in run.ranks[rank].peers
        else:
            mine = run.ranks[rank].peers[rank]
            assert (mine.app_messages, mine.app_bytes) == tuple(
                int(n) for n in re.findall(r"\d+", itself)
            )


def test_size_buckets_are_powers_of_two():
    """msgs.c sends one message of each size 0, 1, 2, 4 ... 65536 B and one 8-byte reduction:
    one count per bucket, two in [8, 16), none above [64, 128) KiB."""
    peer = ompi_monitoring.read_run(MON / "msgs-ok").ranks[0].peers[1]
    assert len(peer.histogram) == ompi_monitoring.HISTOGRAM_BUCKETS == 66
    assert peer.histogram[:18] == (1, 1, 1, 1, 2) + (1,) * 13
    assert not any(peer.histogram[18:])
    assert [ompi_monitoring.bucket_label(i) for i in (0, 1, 4, 11, 17)] == [
        "0 B",
        "[1, 2) B",
        "[8, 16) B",
        "[1, 2) KiB",
        "[64, 128) KiB",
    ]
    assert [ompi_monitoring.bucket_low(i) for i in (0, 1, 2, 17)] == [0, 1, 2, 65536]


def test_internal_only_peer_keeps_its_sizes_and_collectives():
    """EP sends nothing itself: its 6 messages are its reductions, counted by size after the
    I line, and the coll component saw the same 6."""
    peer = ompi_monitoring.read_run(MON / "npb-ep.S").ranks[0].peers[1]
    assert (peer.app_messages, peer.internal_messages, sum(peer.histogram)) == (0, 6, 6)
    assert (peer.coll_messages, peer.coll_bytes) == (6, 108)


def test_cut_short_and_foreign_files_are_errors(tmp_path):
    text = (MON / "npb-cg.S" / "rank.0.prof").read_text()
    cases = {
        "empty": "",
        "mid-line": text[: text.index("msgs sent") + 4],
        "no collectives": text[: text.index("# COLLECTIVES")],
        "short histogram": text.replace(",0,0\n", "\n", 1),
        "garbage": text.replace("# OSC\n", "# OSC\nhello world\n"),
        "other rank": text.replace("I\t0\t1", "I\t1\t0"),
        "counts disagree": text.replace("1264 msgs", "1265 msgs"),
    }
    messages = {
        "empty": "is empty",
        "mid-line": "ends inside a line",
        "no collectives": "sections",
        "short histogram": "64 size counts, not 66",
        "garbage": "line 6 is not monitoring output",
        "other rank": "rank 1's in rank 0's file",
        "counts disagree": "1267 messages but 1266 counted",
    }
    for name, broken in cases.items():
        with pytest.raises(ParseError, match=re.escape(messages[name])):
            ompi_monitoring.parse_rank(broken, "rank.0.prof")
    # A cut-short file among good ones fails the run's read, naming the file.
    (tmp_path / "rank.0.prof").write_text(cases["mid-line"])
    (tmp_path / "rank.1.prof").write_text((MON / "npb-cg.S" / "rank.1.prof").read_text())
    with pytest.raises(ParseError, match=r"rank\.0\.prof ends inside a line"):
        ompi_monitoring.read_run(tmp_path, expected=2)


def test_files_of_another_run_are_refused(tmp_path):
    for rank in (0, 1):
        text = (MON / "npb-cg.S" / f"rank.{rank}.prof").read_text()
        (tmp_path / f"rank.{rank}.prof").write_text(text)
    with pytest.raises(ParseError, match=r"ranks \[1\] beyond the run's 1"):
        ompi_monitoring.read_run(tmp_path, expected=1)
    (tmp_path / "rank.1.prof").rename(tmp_path / "rank.0.prof")
    with pytest.raises(ParseError, match="holds rank 1's traffic"):
        ompi_monitoring.read_run(tmp_path, expected=2)


def bindings_of(folder, **edits):
    text = (MON / folder / "stderr").read_text()
    for old, new in edits.items():
        text = text.replace(old.replace("_", " "), new)
    return osu.bindings(text)


def test_one_socket_run_is_all_intra_socket():
    """Here (one socket, one node) every message between ranks stays in the socket."""
    run = ompi_monitoring.read_run(MON / "npb-cg.S", expected=2)
    dist = channels.distribution(run, bindings_of("npb-cg.S"), sockets_per_node=1)
    sock, itself = dist.channels["socket"], dist.channels["self"]
    assert (sock.app_messages, sock.app_bytes) == (2 * 1264, 2 * 2336512)
    assert (sock.internal_messages, sock.internal_bytes) == (4, 12)
    assert (itself.app_messages, itself.app_bytes) == (2 * 416, 2 * 2329600)
    assert dist.channels["node"].messages == dist.channels["network"].messages == 0
    assert dist.share("socket") == dist.share("socket", "bytes") == 100.0
    figs = channels.figures(dist)
    assert figs["messages_share_socket"] == (100.0, "%")
    assert figs["messages_share_network"] == (0.0, "%")
    assert figs["app_messages_network"] == (0, "msgs")
    # 2 x 416 messages of 5600 B each rank to the other, counted in [4, 8) KiB.
    assert figs["count_socket_4096B"] == (2 * 416, "msgs")
    assert figs["count_self_4096B"] == (2 * 416, "msgs")
    assert sum(v for k, (v, _) in figs.items() if k.startswith("count_socket_")) == 2 * 1266


def test_other_node_and_other_socket_are_their_channels():
    """The same files with rank 1 reported on another host, then on socket 1 of the node."""
    run = ompi_monitoring.read_run(MON / "npb-lu.S", expected=2)
    two_nodes = bindings_of("npb-lu.S")
    two_nodes[1] = osu.Binding(1, "node2", two_nodes[1].places)
    dist = channels.distribution(run, two_nodes, sockets_per_node=1)
    assert dist.channels["socket"].messages == 0
    assert dist.channels["network"].messages == 564 + 22 + 567 + 12
    assert dist.share("network", "bytes") == 100.0
    two_sockets = bindings_of("npb-lu.S", **{"socket_0[core_1": "socket 1[core 1"})
    dist = channels.distribution(run, two_sockets, sockets_per_node=2)
    assert dist.channels["node"].bytes == 826080 + 324 + 826496 + 240
    assert dist.channels["network"].messages == dist.channels["socket"].messages == 0


def test_unknown_placement_is_said():
    run = ompi_monitoring.read_run(MON / "npb-mg.S", expected=2)
    unbound = osu.bindings(
        "[vm:1] MCW rank 0 is not bound (or bound to all available processors)\n"
        "[vm:2] MCW rank 1 is not bound (or bound to all available processors)\n"
    )
    # One socket per node: a rank bound nowhere still shares the socket.
    assert channels.distribution(run, unbound, sockets_per_node=1).share("socket") == 100.0
    with pytest.raises(channels.PlacementError, match=r"ranks \[0, 1\] on vm are bound to no"):
        channels.distribution(run, unbound, sockets_per_node=2)
    with pytest.raises(channels.PlacementError, match=r"ranks \[1\] are not in mpirun"):
        channels.distribution(run, {0: unbound[0]}, sockets_per_node=1)


def test_a_run_with_a_dead_rank_is_a_marked_lower_bound():
    """msgs-segv: rank 1 died before MPI_Finalize; rank 0's traffic is all there is."""
    run = ompi_monitoring.read_run(MON / "msgs-segv", expected=2)
    dist = channels.distribution(run, bindings_of("msgs-segv"), sockets_per_node=1)
    assert dist.missing == (1,)
    assert dist.channels["socket"].messages == 18 + 1


def run_monitored(tmp_path, spack, toolchain, *options):
    """ReFrame runs NpbMessagesCheck and the timed NpbCheck (CG, class S, all cores) in one
    toolchain: the two cases."""
    report = tmp_path / f"report-{toolchain}.json"
    proc = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "reframe"),
            "-C",
            str(ROOT / "site-configs/local/reframe.py"),
            "-c",
            str(ROOT / "reframe-checks/npb.py"),
            "-n",
            "NpbMessagesCheck.*benchmark=cg",
            "-n",
            "NpbCheck.*scale=quick.*benchmark=cg.*ranks=all",
            "-S",
            "npb_class=S",
            *options,
            "-r",
            "--prefix",
            str(tmp_path / f"rfm-{toolchain}"),
            "--report-file",
            str(report),
        ],
        env={**unjudged(spack), "SITEBENCH_TOOLCHAINS": toolchain},
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert report.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = json.loads(report.read_text())["runs"][0]["testcases"]
    monitored = next(c for c in cases if c["name"].startswith("NpbMessagesCheck"))
    timed = next(c for c in cases if c["name"].startswith("NpbCheck"))
    return proc, monitored, timed


@pytest.mark.spack
@pytest.mark.slow
def test_reframe_logs_the_distribution_and_keeps_the_files(tmp_path, spack):
    """The one real run (about 10 s here): CG under Open MPI's monitoring on the local site,
    every message between ranks in the socket, figures logged and the per-rank files kept;
    under MPICH the case skips, saying why."""
    proc, case, timed = run_monitored(tmp_path, spack, "gcc-openmpi")
    assert proc.returncode == 0 and case["result"] == "pass", proc.stdout[-3000:]
    perf = {k.split(":", 2)[2]: v for k, v in case["perfvalues"].items()}
    assert perf["messages_share_socket"][0] == 100.0
    assert perf["messages_share_network"][0] == perf["messages_share_node"][0] == 0.0
    assert perf["app_messages_socket"][0] > 1000 and perf["app_messages_self"][0] > 0
    assert perf["mops_total"][0] > 0
    assert sum(v[0] for k, v in perf.items() if k.startswith("count_socket_")) == (
        perf["app_messages_socket"][0] + perf["internal_messages_socket"][0]
    )
    kept = sorted(p.name for p in Path(case["outputdir"]).glob("monitoring.*.prof"))
    assert kept == ["monitoring.0.prof", "monitoring.1.prof"][: case["num_tasks"]]
    assert case["monitor_messages"] is True
    # The timed NpbCheck beside it stays unmonitored: no distribution, no files.
    assert timed["result"] == "pass" and timed["monitor_messages"] is False
    assert sorted(k.split(":", 2)[2] for k in timed["perfvalues"]) == [
        "mops_per_process",
        "mops_total",
        "time",
    ]
    assert not list(Path(timed["outputdir"]).glob("monitoring.*"))
    proc, case, timed = run_monitored(tmp_path, spack, "gcc-mpich")
    assert case["result"] == "skip", proc.stdout[-3000:]
    # ReFrame's report keeps no skip reason; its output does.
    skipped = [line for line in proc.stdout.splitlines() if "SKIP" in line]
    assert "message monitoring is not available under mpich" in " ".join(skipped), skipped


def test_monitoring_is_refused_where_it_would_measure_nothing():
    assert monitoring.unavailable("openmpi", "mpirun") is None
    reason = monitoring.unavailable("mpich", "mpirun")
    assert "not available under mpich" in reason and "Open MPI's pml_monitoring" in reason
    assert "launches with srun" in monitoring.unavailable("openmpi", "srun")
    env = monitoring.monitoring_env("/stage/x")
    assert env == {
        "OMPI_MCA_pml_monitoring_enable": "2",
        "OMPI_MCA_pml_monitoring_enable_output": "3",
        "OMPI_MCA_pml_monitoring_filename": "/stage/x/monitoring",
    }


def monitored_case(bench, network=False):
    """A NpbMessagesCheck case of a ReFrame report, its figures from a capture (rank 1 on
    another host where ``network``)."""
    found = bindings_of(f"npb-{bench}.S")
    if network:
        found[1] = osu.Binding(1, "node2", found[1].places)
    run = ompi_monitoring.read_run(MON / f"npb-{bench}.S", expected=2)
    figs = channels.figures(channels.distribution(run, found, sockets_per_node=1))
    keys = {"scale": "quick", "benchmark": bench, "npb_class": "S", "num_ranks": 2}
    return {
        "name": "NpbMessagesCheck",
        "display_name": f"NpbMessagesCheck %scale=quick %benchmark={bench} %ranks=all",
        "system": "local",
        "partition": "default",
        "environ": "gcc-openmpi",
        "result": "pass",
        "reference_keys": list(keys),
        "problem_keys": ["npb_class"],
        **keys,
        "perfvalues": {f"local:default:{k}": [v, 0, None, None, u] for k, (v, u) in figs.items()},
    }


def store_monitored(site, started, network=False):
    report = {
        "session_info": {"time_start": started},
        "runs": [{"testcases": [monitored_case(b, network) for b in ("cg", "is")]}],
    }
    incoming = Incoming(site)
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text(json.dumps({"site": site}))
    return incoming.commit()


def test_stored_distributions_compare_and_make_the_study_table(results_root):
    """Two sites, three runs each: one node (all in the socket) against two (all over the
    network). compare matches the figures run against run; the report's table gives each
    benchmark's shares per channel and the study's finding beside them."""
    for day in (1, 2, 3):
        store_monitored("one-node", f"2026-11-0{day}T01:00:00+0000")
        store_monitored("two-nodes", f"2026-11-0{day}T01:00:00+0000", network=True)
    table = compare(Side.parse("one-node"), Side.parse("two-nodes"))
    rows = table.set_index(["params", "figure"])
    cg = "%scale=quick %benchmark=cg %ranks=all"
    assert rows.loc[(cg, "messages_share_socket"), "median_a"] == 100.0
    assert rows.loc[(cg, "messages_share_socket"), "median_b"] == 0.0
    assert rows.loc[(cg, "app_messages_network"), "median_b"] == 2 * 1264
    assert rows.loc[(cg, "app_messages_self"), "ratio"] == 1.0
    assert (rows.loc[(cg, "app_messages_self"), ["n_a", "n_b"]] == 3).all()
    shares = seed_tables.message_distribution(report_data.load().figures)
    assert list(shares.columns) == seed_tables.MESSAGE_COLUMNS
    by = shares.set_index(["site", "benchmark", "channel"])
    assert by.loc[("one-node", "cg", "socket"), "messages %"] == 100.0
    assert by.loc[("two-nodes", "cg", "network"), "volume %"] == 100.0
    assert by.loc[("two-nodes", "cg", "socket"), "messages %"] == 0.0
    # IS sends almost all its volume inside Alltoallv: large messages dominate.
    assert by.loc[("one-node", "is", "socket"), ">= 64 KiB %"] > 0
    assert by.loc[("one-node", "cg", "socket"), "runs"] == 3
    seed = shares.iloc[-1]
    assert seed["site"] == "the study" and seed["messages %"] == 50.0


@pytest.mark.slurm
@pytest.mark.spack
@pytest.mark.slow
def test_a_stored_two_node_run_has_traffic_in_and_between_the_nodes(
    start_cluster, spack, tmp_path  # noqa: F811 (the fixture)
):
    """The issue's stored run: `./sitebench run --site local-slurm` on the private cluster's
    two nodes, each declaring 2 CPUs on its one core (`cluster start --cpus-per-node 2`),
    NPB's six kernels (class S) and HPL (N=2000) on 4 ranks, 2 a node, under monitoring
    through mpirun. Every benchmark's stored figures have messages in the socket and across
    the network; every figure is marked disturbed (ranks share cores); the per-rank files are
    kept; under srun the cases skip, saying why."""
    from sitebench.results import figures
    from sitebench.results.rundirs import case_folder, load_run
    from test_slurm_cluster import cases_of, only_run, run_site

    cluster = start_cluster(2, cpus_per_node=2)
    results = tmp_path / "results"
    proc = run_site(
        cluster,
        results,
        unjudged(spack),
        "-n",
        "NpbMessagesCheck|HplMessagesCheck",
        "-S",
        "max_nodes=2",
        "-S",
        "npb_class=S",
        "-S",
        "n=2000",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = only_run(results)
    cases = cases_of(run_dir)
    skipped = [c for c in cases if c["partition"] == "srun"]
    assert len(skipped) == 7 and all(c["result"] == "skip" for c in skipped)
    assert "this partition launches with srun" in proc.stdout
    ran = [c for c in cases if c["partition"] == "mpirun"]
    assert len(ran) == 7 and all(c["result"] == "pass" for c in ran), proc.stdout[-3000:]
    assert all(c["num_tasks"] == 4 and c["num_tasks_per_node"] == 2 for c in ran)
    rows = pd.DataFrame(figures.rows_of_run(load_run(run_dir)), columns=figures.COLUMNS)
    assert rows.disturbed.all() and rows.params.nunique() == 7
    by = rows.set_index(["params", "figure"]).value
    for params in set(rows.params):
        assert 0 < by[(params, "messages_share_socket")] < 100, params
        assert by[(params, "messages_share_node")] == 0.0  # one socket per node
        if "benchmark=ep" in params:  # EP sends only in collectives: Open MPI's internal
            assert by[(params, "app_messages_network")] == 0
            continue
        assert by[(params, "app_messages_socket")] > 0, params
        assert by[(params, "app_messages_network")] > 0, params
    hpl = next(c for c in ran if c["name"].startswith("HplMessagesCheck"))
    assert (hpl["n"], hpl["p"] * hpl["q"], hpl["max_nodes"]) == (2000, 4, 2)
    for case in ran:  # the run's own copy of each case's files
        out = case_folder(run_dir, case)
        err = (out / "rfm_job.err").read_text()
        assert "[sbnode1:" in err and "[sbnode2:" in err, err  # --report-bindings
        kept = sorted(p.name for p in out.glob("monitoring.*.prof"))
        assert kept == [f"monitoring.{r}.prof" for r in range(4)]


def monitored_stage(tmp_path, capture):
    """A fake case whose stage holds a capture as the check's files would be named."""
    for path in (MON / capture).glob("rank.*.prof"):
        shutil.copy(path, tmp_path / path.name.replace("rank.", f"{monitoring.PREFIX}."))
    shutil.copy(MON / capture / "stderr", tmp_path / "rfm_job.err")
    case = SimpleNamespace(
        monitor_messages=True,
        stagedir=str(tmp_path),
        stderr="rfm_job.err",
        num_tasks=2,
        current_partition=SimpleNamespace(processor=SimpleNamespace(num_sockets=1)),
        perf_variables={},
        is_dry_run=lambda: False,
    )
    case.message_distribution = lambda: monitoring.MessageMonitoring.message_distribution(case)
    return case


def after_the_run(case):
    """The check's performance-stage hooks on ``case``: its figures, and the error raised."""
    cls = monitoring.MessageMonitoring
    cls.add_distribution_figures(case)
    figures = {name: fn.evaluate() for name, fn in case.perf_variables.items()}
    try:
        cls.fail_on_monitoring_error(case)
    except PerformanceError as err:
        return figures, str(err)
    return figures, None


def test_a_rank_without_its_file_fails_the_case_after_its_lower_bound(tmp_path):
    figures, error = after_the_run(monitored_stage(tmp_path, "msgs-segv"))
    assert figures["app_messages_socket"] == 18 and figures["messages_share_socket"] == 100.0
    assert error == (
        "message monitoring: ranks [1] of 2 wrote no monitoring file (they did not reach "
        "MPI_Finalize): the distribution logged is a lower bound"
    )


def test_an_aborted_run_logs_no_distribution_and_says_why(tmp_path):
    figures, error = after_the_run(monitored_stage(tmp_path, "msgs-abort"))
    assert figures == {}
    assert "no Open MPI monitoring files monitoring.<rank>.prof" in error
    assert "ended before MPI_Finalize" in error


def test_a_complete_run_passes_with_its_figures(tmp_path):
    figures, error = after_the_run(monitored_stage(tmp_path, "npb-mg.S"))
    assert error is None
    assert figures["app_messages_self"] == 2 * 296
    assert figures["internal_messages_socket"] == 101 + 95


def test_the_study_section_renders_in_chromium(results_root, tmp_path):
    """The report of two stored sites: the section's chart draws marks in headless Chromium
    and its table holds each benchmark's shares and the study's row."""
    from sitebench import report
    from test_report import chromium, need_chromium, render_problems

    need_chromium()
    for day in (1, 2):
        store_monitored("one-node", f"2026-11-0{day}T01:00:00+0000")
        store_monitored("two-nodes", f"2026-11-0{day}T01:00:00+0000", network=True)
    built = report.make(results_root=results_root, store_dir=tmp_path / "store")
    out = report.write(built, tmp_path / "report.html", results_root=results_root)
    text = out.read_text()
    assert "Message distribution: socket, node, network" in text
    assert "<th>messages %</th>" in text and "<td>the study</td>" in text
    assert "messages_share_network" in text
    assert len(built.chart_ids) == 1  # the shares; no other section has figures here
    assert render_problems(chromium(out, tmp_path, "--dump-dom"), built.chart_ids) == []
