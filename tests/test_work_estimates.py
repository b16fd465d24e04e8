"""Each check's estimate of its work, for its time limit (src/sitebench/run/work_estimates.py):
counted from what sizes the case, and never under the floor's slowdown times what the same
case took when it was captured here (tests/fixtures), nor so long that the time limit of a
hung case is out of proportion to what it measures."""

import json
import math
import re

import pytest

from conftest import FIXTURES
from sitebench.parsers import hpl, jacobi, npb, parsec, ring, stream
from sitebench.run import time_limits, work_estimates

SLOWDOWN = work_estimates.FLOOR_SLOWDOWN


@pytest.mark.parametrize("path", sorted((FIXTURES / "hpl").glob("hpl-*.txt")), ids=str)
def test_hpl_is_its_flops_at_the_floor(path):
    for case in hpl.parse(path.read_text()).tests:
        assert work_estimates.hpl(case.n) >= SLOWDOWN * case.time_s, (path.name, case)
    # HPL's count (2/3 n^3 + 2 n^2) at 11.7 Gflop/s over 2 cores, 20 times slower.
    assert work_estimates.hpl(10000) == pytest.approx(2280, abs=1)
    assert work_estimates.hpl(20000) / work_estimates.hpl(10000) == pytest.approx(8, rel=1e-3)


@pytest.mark.parametrize("path", sorted((FIXTURES / "stream").glob("stream-*.txt")), ids=str)
def test_stream_is_its_bytes_at_the_floor(path):
    text = path.read_text()
    result = stream.parse(text)
    ntimes = int(re.search(r"executed (\d+) times", text).group(1))
    assert ntimes == work_estimates.STREAM_NTIMES
    # The run's own time: its kernels' best times over the bytes each moves, at its slowest.
    moved = work_estimates.STREAM_BYTES_PER_ELEMENT * result.array_elements * ntimes
    slowest_s = moved / (min(result.best_rate_mbs.values()) * 1e6)
    assert work_estimates.stream(result.array_elements) >= SLOWDOWN * slowest_s
    assert work_estimates.stream(80_000_000) == pytest.approx(45.2, abs=0.1)


NPB_FILES = sorted((FIXTURES / "npb").glob("npb-*-mpi_*.txt"))


@pytest.mark.parametrize("path", NPB_FILES, ids=lambda p: p.name)
def test_npb_is_its_class_a_time_grown_with_the_class(path):
    result = npb.parse(path.read_text())
    estimate = work_estimates.npb(result.benchmark.lower(), result.npb_class)
    assert estimate >= SLOWDOWN * result.time_s, (path.name, result.time_s)


def test_npb_grows_with_the_class_and_refuses_an_unknown_one():
    assert work_estimates.npb("lu", "A") == pytest.approx(13.45 * SLOWDOWN)
    assert work_estimates.npb("lu", "C") == 16 * work_estimates.npb("lu", "A")
    assert work_estimates.npb("xx", "A") is None  # not measured: the scale's bound
    with pytest.raises(ValueError, match="NPB class 'Q' is not one of S W A B C D E F"):
        work_estimates.npb("cg", "Q")


def test_npb_java_is_its_class_a_time_on_one_core():
    # Class A on 2 threads took CG 3.0 s, FT 11.8 s, IS 3.6 s, MG 6.0 s (reframe-checks/README.md).
    for benchmark, seconds in {"cg": 3.0, "ft": 11.8, "is": 3.6, "mg": 6.0}.items():
        assert work_estimates.npb_java(benchmark, "A") == pytest.approx(2 * SLOWDOWN * seconds)
    assert work_estimates.npb_java("ep", "A") is None  # NPB3.0-JAV has no EP


@pytest.mark.parametrize("name", ["ranks1.out", "ranks2.out"])
def test_jacobi_and_ring_are_their_updates_and_messages_at_the_floor(name):
    grid = jacobi.parse((FIXTURES / "jacobi" / name).read_text())
    run_s = grid.time_per_iteration * grid.iterations
    assert work_estimates.jacobi(grid.grid[0], grid.iterations) >= SLOWDOWN * run_s
    steps = ring.parse((FIXTURES / "ring" / name).read_text())
    run_s = steps.time_per_step_us * 1e-6 * steps.steps
    estimate = work_estimates.ring(steps.ranks, steps.steps, steps.message_size)
    assert estimate >= SLOWDOWN * run_s
    # Every message at 1 ms: 2 x ranks x (steps + 100 warm-up).
    assert estimate == pytest.approx(2 * steps.ranks * (steps.steps + 100) * 1e-3, rel=1e-3)


PARSEC_FILES = sorted((FIXTURES / "parsec").glob("*rfm_quick_*_t[12].txt"))


@pytest.mark.parametrize("path", PARSEC_FILES, ids=lambda p: p.name)
def test_parsec_is_its_options_and_particle_frames_at_the_floor(path):
    kind = "blackscholes" if "blackscholes" in path.name else "fluidanimate"
    result = parsec.parse(path.read_text(), kind)
    if kind == "blackscholes":
        estimate = work_estimates.blackscholes(result.options)
    else:
        frames = 80  # the quick scale on 2 cores (tests/fixtures/parsec/README.md)
        estimate = work_estimates.fluidanimate("in_100K.fluid", frames)
        assert result.particles <= 100 * 1100  # the input's name rounded, as estimated
    assert estimate >= SLOWDOWN * result.roi_s, (path.name, result.roi_s)
    assert work_estimates.fluidanimate("my_own.fluid", 80) is None


def test_gadget2_counts_steps_by_the_scale_factor():
    # The quick run (a = 1/11 to 0.11: 9 steps, 14.7 s on one rank here).
    quick = work_estimates.gadget2("lcdm_gas", 1 / 11, 0.11)
    assert quick >= SLOWDOWN * 14.7
    # The full run (to a = 1: 605 steps, 196.9 s on 2 ranks): exactly its rate per core.
    full = work_estimates.gadget2("lcdm_gas", 1 / 11, 1.0)
    assert full == pytest.approx(SLOWDOWN * 196.9 * 2, rel=1e-2)
    assert full < time_limits.SCALE_BOUND_S["full"]
    assert work_estimates.gadget2("cluster", 1 / 11, 1.0) is None  # particles unknown
    assert work_estimates.gadget2("lcdm_gas", 1.0, 0.5) is None


def test_sysbench_is_its_start_prepare_and_fixed_run_time():
    status = json.loads((FIXTURES / "sysbench/stage-quick-t1/mariadb-status.json").read_text())
    prepare_s = next(s["seconds"] for s in status["steps"] if s["name"] == "sysbench-prepare")
    estimate = work_estimates.sysbench(100_000, 20, 60)
    assert estimate == pytest.approx(60 + SLOWDOWN * prepare_s + 20)
    # The full scale's 1M rows: their prepare took 6-21 s here.
    assert work_estimates.sysbench(1_000_000, 60, 60) - 120 > SLOWDOWN * 6


def test_memaccess_is_its_passes_and_loads_at_the_floor():
    text = (FIXTURES / "pages/memaccess-small.out").read_text()
    passes_s = float(re.search(r"streaming: \d+ passes, ([\d.]+) s", text).group(1))
    loads_s = float(re.search(r"dependent loads, ([\d.]+) s", text).group(1))
    assert work_estimates.memaccess(512, 4_000_000, 10) >= SLOWDOWN * (passes_s + loads_s)


def test_every_quick_case_is_limited_under_an_hour_on_an_idle_machine():
    """Each estimate plus start-up, at load factor 1, on the project VM's quick cases: a hung
    case is stopped in minutes, never at the scale's 30-minute bound or beyond."""
    quick = {
        "hpl N=10000": work_estimates.hpl(10000),
        "stream 80M": work_estimates.stream(80_000_000),
        "npb lu A": work_estimates.npb("lu", "A"),
        "npb-java ft A": work_estimates.npb_java("ft", "A"),
        "jacobi 120^3 x 200": work_estimates.jacobi(120, 200),
        "ring 2 x 20000": work_estimates.ring(2, 20000, 16),
        "blackscholes 2M": work_estimates.blackscholes(2_000_000),
        "fluidanimate 80 frames": work_estimates.fluidanimate("in_100K.fluid", 80),
        "gadget2 a=0.11": work_estimates.gadget2("lcdm_gas", 1 / 11, 0.11),
        "sysbench 100k x 20 s": work_estimates.sysbench(100_000, 20, 60),
        "memaccess 512 MiB": work_estimates.memaccess(512, 4_000_000, 10),
    }
    limits = {k: time_limits.launch_limit_s(v) for k, v in quick.items()}
    assert all(60 < limit < 3600 for limit in limits.values()), limits
    # The load factor stretches each in proportion up to its cap (a load of 3 on 2 CPUs: 1.5x).
    busy = time_limits.launch_limit_s(quick["ring 2 x 20000"], time_limits.load_factor(3, 2))
    assert busy == math.ceil(1.5 * (60 + quick["ring 2 x 20000"]) / 10) * 10
