"""OSU ping-pong: the parser, the mapping and transport proofs, and the check's verdicts on
real outputs (tests/fixtures/osu/, README there says how each was made)."""

import json
import math
import os
import re
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, unjudged
from sitebench.parsers import ParseError, osu

OSU = FIXTURES / "osu"
FILES = sorted(p for p in OSU.glob("omb-*.txt") if not p.name.endswith(".stderr.txt"))
LAT_SHM = OSU / "omb-7.2_osu_latency_core_shm_x20_i200.txt"
LAT_TCP = OSU / "omb-7.2_osu_latency_core_tcp_x20_i200.txt"
BW_SHM = OSU / "omb-7.2_osu_bw_core_shm_x2_i20.txt"
ALL_SIZES = [2**k for k in range(25)]  # 1 B .. 16 MiB


def readme_rows():
    """file -> result text, from the fixture README written when they were captured."""
    rows = {}
    for line in (OSU / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`") and cells[1].endswith(".txt`"):
            rows[cells[1].strip("`")] = cells[-2]
    return rows


def stderr_of(path):
    err = path.with_name(path.name[: -len(".txt")] + ".stderr.txt")
    return err.read_text() if err.is_file() else ""


def kind_and_btl(path):
    return (
        "Bandwidth" if "_osu_bw_" in path.name else "Latency",
        "tcp" if "_tcp_" in path.name else "vader",
    )


def verdict(path, **kwargs):
    kind, btl = kind_and_btl(path)
    args = {"kind": kind, "mapping": "core", "btl": btl, "version": "7.2", **kwargs}
    return osu.problems(path.read_text(), stderr_of(path), **args)


def test_every_fixture_is_documented():
    assert len(FILES) == 11, "fixtures missing"
    assert {p.name for p in FILES} == set(readme_rows())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_verdict_matches_the_capture_notes(path):
    """README: "passes: 0.18 us at 1 B, 4163.93 us at 16777216 B, vader." (latency),
    "passes: peak 12192.42 MB/s at 4194304 B, tcp." (bandwidth) or "fails: <cause>."."""
    note = readme_rows()[path.name]
    found = verdict(path)
    if note.startswith("fails:"):
        assert note.removeprefix("fails:").strip().rstrip(".") in found[0], found
        # The one thing wrong; the shared capture has no stderr, so its proofs are missing too.
        assert len(found) == (1 if stderr_of(path) else 3), found
        return
    assert found == []
    result = osu.parse(path.read_text())
    assert sorted(result.values) == ALL_SIZES
    assert result.version == "7.2"
    assert osu.transports(stderr_of(path)) == {note.rstrip(".").split(", ")[-1]}
    if result.kind == "Latency":
        noted = [(float(v), int(s)) for v, s in re.findall(r"([\d.]+) us at (\d+) B", note)]
        assert noted == [(result.values[1], 1), (result.values[16777216], 16777216)]
        assert result.smallest == (1, result.values[1]) and result.unit == "us"
    else:
        value, size = re.search(r"peak ([\d.]+) MB/s at (\d+) B", note).groups()
        assert result.peak == (int(size), float(value))
        assert result.unit == "MB/s"


def test_figures_are_the_printed_rows():
    lat = osu.parse(LAT_SHM.read_text())
    assert (lat.kind, lat.smallest, lat.largest) == ("Latency", (1, 0.18), (16777216, 4163.93))
    bw = osu.parse(BW_SHM.read_text())
    assert bw.peak == (4194304, 12192.42)
    assert bw.values[1] == 7.61 and bw.largest == (16777216, 5663.4)
    assert all(math.isfinite(v) and v > 0 for v in bw.values.values())


def test_a_value_printed_as_zero_is_a_figure_at_the_resolution_limit():
    """A real osu_bw beside a CPU hog (load 16.3): 0.00 MB/s at 1, 2 and 4 B. The run
    counts; the sizes are named as under OSU's two decimals (issue 38: the check failed with
    "OSU Bandwidth at 1 B is not a positive finite number: 0.00")."""
    busy = OSU / "busy-omb-7.2_osu_bw_core_tcp_x2_i20_m64.txt"
    assert verdict(busy, max_size=64) == []
    result = osu.parse(busy.read_text())
    assert result.values[1] == 0.0 and result.peak == (64, 0.06)
    assert result.at_resolution == {1: 0.01, 2: 0.01, 4: 0.01}
    note = result.resolution_note()
    assert "OSU Bandwidth printed 0 at 1 B, 2 B, 4 B" in note
    assert "printed resolution of 0.01 MB/s" in note and "busy" in note
    # A run with every value above the resolution has nothing to say.
    assert osu.parse(BW_SHM.read_text()).resolution_note() is None
    # Under MPICH's reading as well (the same table).
    found, complete = osu.output_problems(busy.read_text(), "Bandwidth", "7.2", 1, 64)
    assert (found, complete) == ([], True)


def test_bindings_of_the_core_mapping():
    found = osu.bindings(stderr_of(LAT_SHM))
    assert {r: (b.host, b.places) for r, b in found.items()} == {
        0: ("vm", ((0, 0),)),
        1: ("vm", ((0, 1),)),
    }
    assert osu.mapping_problem(found, "core") is None


def test_core_bindings_are_not_the_other_mappings():
    found = osu.bindings(stderr_of(LAT_SHM))
    assert "wants each rank on its own socket" in osu.mapping_problem(found, "socket")
    assert "wants one rank per host" in osu.mapping_problem(found, "node")
    with pytest.raises(ValueError, match="unknown mapping 'numa'"):
        osu.mapping_problem(found, "numa")


def test_socket_and_node_bindings():
    """The real core-mapping lines with the second rank moved to socket 1 / another host."""
    text = stderr_of(LAT_SHM)
    other_socket = re.sub(r"(MCW rank 1 bound to )socket 0\[core 1", r"\1socket 1[core 1", text)
    assert osu.mapping_problem(osu.bindings(other_socket), "socket") is None
    assert "wants both ranks on one socket" in osu.mapping_problem(
        osu.bindings(other_socket), "core"
    )
    other_host = re.sub(r"^\[vm:(\d+)\] MCW rank 1", r"[n2:\1] MCW rank 1", text, flags=re.M)
    assert osu.mapping_problem(osu.bindings(other_host), "node") is None
    assert "wants both ranks on one host" in osu.mapping_problem(osu.bindings(other_host), "core")


def test_same_core_twice_is_not_a_mapping():
    text = stderr_of(LAT_SHM).replace("socket 0[core 1[hwt 0]]", "socket 0[core 0[hwt 0]]")
    assert "different cores" in osu.mapping_problem(osu.bindings(text), "core")


def test_missing_binding_report():
    problem = osu.mapping_problem(osu.bindings(""), "core")
    assert "no --report-bindings lines" in problem


def test_transport_used_is_the_one_asked_for():
    assert osu.transports(stderr_of(LAT_SHM)) == {"vader"}
    assert osu.transports(stderr_of(LAT_TCP)) == {"tcp"}
    # The shared-memory run asked to prove TCP, and the other way round.
    assert verdict(LAT_SHM, btl="tcp") == [
        "transport: Open MPI used vader between the ranks, expected tcp"
    ]
    assert verdict(LAT_TCP, btl="vader") == [
        "transport: Open MPI used tcp between the ranks, expected vader"
    ]


def test_wrong_benchmark_and_version_are_named():
    assert verdict(BW_SHM, kind="Latency") == ["OSU ran the Bandwidth test, expected Latency"]
    assert verdict(LAT_SHM, version="7.3") == ["OSU printed v7.2, the binary was built as 7.3"]


@pytest.mark.reliability_input
def test_mpi_error_is_quoted():
    stderr = stderr_of(OSU / "omb-7.2_osu_latency_core_btl-self-only_mpi-error.txt")
    assert osu.mpi_failed(stderr)
    assert osu.mpi_error(stderr) == (
        "At least one pair of MPI processes are unable to reach each other for MPI "
        "communications."
    )
    assert not osu.mpi_failed(stderr_of(LAT_SHM)) and osu.mpi_error(stderr_of(LAT_SHM)) == ""


@pytest.mark.reliability_input
def test_garbled_mpi_help_is_said_with_the_exit_code():
    """Open MPI 4.1 sometimes garbles its own help messages: the check says so."""
    lost = stderr_of(OSU / "omb-7.2_osu_latency_core_btl-self-only_help-lost.txt")
    args = dict(kind="Latency", mapping="core", btl="vader", exitcode=1)
    (problem,) = osu.problems("", lost, **args)
    assert problem == (
        "OSU output is empty; Open MPI: An error occurred in MPI_Init; mpirun exited with "
        "code 1; Open MPI's help messages were garbled (ORTE_ERROR_LOG in show_help.c), its "
        "reason may be missing: rerun to see it"
    )
    # The same garbling, but the reason got through.
    other = stderr_of(OSU / "omb-7.2_osu_latency_core_btl-self-only_init-unreachable.txt")
    (problem,) = osu.problems("", other, **args)
    assert "Open MPI: MPI_INIT has failed because at least one MPI process is unreachable " in (
        problem
    )
    clean = stderr_of(OSU / "omb-7.2_osu_latency_core_btl-self-only_mpi-error.txt")
    assert osu.lost_help(lost) and osu.lost_help(other) and not osu.lost_help(clean)
    assert osu.problems("", clean, **args) == [
        "OSU output is empty; Open MPI: At least one pair of MPI processes are unable to "
        "reach each other for MPI communications.; mpirun exited with code 1"
    ]


def test_mpi_failure_after_a_complete_table_fails():
    """A complete table does not hide a process that failed afterwards."""
    error = stderr_of(OSU / "omb-7.2_osu_latency_core_btl-self-only_mpi-error.txt")
    (problem,) = osu.problems(
        LAT_SHM.read_text(),
        stderr_of(LAT_SHM) + error,
        kind="Latency",
        mapping="core",
        btl="vader",
    )
    assert problem.startswith("Open MPI reported a failure: At least one pair")


@pytest.mark.reliability_fault
def test_missing_sizes():
    text = (OSU / "omb-7.2_osu_latency_core_shm_killed-after-3s.txt").read_text()
    result = osu.parse(text)
    assert max(result.values) == 2097152
    assert osu.missing_sizes(result, 1, 16777216) == [4194304, 8388608, 16777216]
    assert osu.missing_sizes(result, 1, 2097152) == []
    # One size missing inside the table (a row lost): named, the others still count.
    gap = re.sub(r"^1024 .*\n", "", LAT_SHM.read_text(), flags=re.M)
    assert osu.missing_sizes(osu.parse(gap), 1, 16777216) == [1024]


def test_sizes():
    assert osu.sizes(1, 16777216) == ALL_SIZES
    assert osu.sizes(8, 8) == [8]
    for bad in ((0, 8), (16, 8)):
        with pytest.raises(ValueError, match="need 1 <= min <= max"):
            osu.sizes(*bad)


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: "  \n", "OSU output is empty"),
        (lambda t: t.replace("# OSU MPI Latency Test v7.2", "# hello"), "no '# OSU MPI"),
        (lambda t: t.replace("# Size          Latency (us)", "# Size"), "no '# Size  Latency"),
        (lambda t: t.split("# Datatype")[0], "has no measurement"),
        (lambda t: t.replace("0.18\n", "nan\n", 1), "at 1 B is negative or not finite"),
        (lambda t: t.replace("0.18\n", "-0.18\n", 1), "at 1 B is negative or not finite"),
        (lambda t: t.replace("0.18\n", "x.18\n", 1), "at 1 B is not a number: 'x.18'"),
        (lambda t: t + "16777216 4163.93\n", "lists 16777216 B twice"),
        (lambda t: t + "[vm:1] garbage\n", "not 'size value'"),
    ],
)
def test_bad_outputs_are_errors_naming_the_cause(edit, message):
    with pytest.raises(ParseError, match=re.escape(message)):
        osu.parse(edit(LAT_SHM.read_text()))


# -- the check under ReFrame ---------------------------------------------------------------


def reframe(spack, tmp_path, name, *options):
    report = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    proc = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "reframe"),
            "-C",
            str(ROOT / "site-configs/local/reframe.py"),
            "-c",
            str(ROOT / "reframe-checks/osu.py"),
            "-n",
            name,
            *options,
            "-r",
            "--prefix",
            str(tmp_path / "rfm"),
            "--report-file",
            str(report),
        ],
        env=unjudged(spack),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert report.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    cases = json.loads(report.read_text())["runs"][0]["testcases"]
    return proc, [c for c in cases if c["name"].startswith("Osu") and "Build" not in c["name"]]


@pytest.mark.spack
@pytest.mark.slow
def test_check_passes_and_fails_as_the_outputs_say(tmp_path, spack):
    name = "OsuLatencyCheck.*mapping=core.*transport=shm"
    fast = ["-S", "OsuLatencyCheck.max_size=65536"]
    proc, (case,) = reframe(spack, tmp_path, name, *fast)
    assert proc.returncode == 0 and case["result"] == "pass", proc.stdout[-3000:]
    assert case["perfvalues"]["local:default:latency_small"][0] > 0
    # An MPI that cannot connect the ranks, then a transport other than the one asked for.
    # Open MPI 4.1 may garble its reason (see the parser test); the check then says so.
    unreachable = ("unable to reach each other", "unreachable", "help messages were garbled")
    for env, causes in (
        ("OMPI_MCA_btl:self", unreachable),
        ("OMPI_MCA_btl:^vader", ("Open MPI used tcp between the ranks, expected vader",)),
    ):
        proc, (case,) = reframe(
            spack, tmp_path, name, *fast, "-S", f"OsuLatencyCheck.env_vars={env}"
        )
        assert proc.returncode != 0 and case["result"] == "fail", proc.stdout[-3000:]
        assert case["fail_phase"] == "sanity", case["fail_reason"]
        assert any(cause in case["fail_reason"] for cause in causes), case["fail_reason"]
