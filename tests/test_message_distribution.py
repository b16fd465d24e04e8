"""The multi-core study's message distribution (issue 29): Open MPI's monitoring files parsed,
every peer pair put on its channel (same socket, other socket, other node), on the files
captured in fixtures/ompi-monitoring/ (README.md there says how)."""

import re

import pytest

from conftest import FIXTURES
from sitebench.parsers import ParseError, ompi_monitoring, osu
from sitebench.run import channels

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
