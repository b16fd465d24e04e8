"""Sizes derived from the topology and memory: thread counts, STREAM arrays, HPL N and grid."""

import json

import pytest

from conftest import FIXTURES, ROOT
from sitebench.discovery.local_site import stream_array_elements
from sitebench.run.hpl_input import hpl_dat, problem_size, process_grid
from sitebench.run.scales import THREAD_LABELS, resolve_threads
from sitebench.sites.topology import last_level_cache_bytes


@pytest.mark.parametrize(
    "cores, expected",
    [
        (1, [1]),
        (2, [1, 2]),
        (4, [1, 2, 4]),
        (6, [1, 2, 4, 3, 6]),
        (64, [1, 2, 4, 8, 16, 32, 64]),
        (128, [1, 2, 4, 8, 16, 32, 64, 128]),
    ],
)
def test_every_thread_count_runs_once_and_all_cores_always(cores, expected):
    counts = [resolve_threads(label, cores) for label in THREAD_LABELS]
    ran = [c for c in counts if c is not None]
    assert ran == expected
    assert resolve_threads("all", cores) == cores


# ReFrame's --detect-host-topology on the 2-core VM the fixtures were captured on
# (L3 32 MiB shared by both cores, L2 1 MiB per core).
TOPOLOGY_2CORE = {
    "arch": "x86_64_v4",
    "topology": {
        "caches": [
            {"type": "L2", "size": 1048576, "cpusets": ["0x1", "0x2"]},
            {"type": "L1", "size": 32768, "cpusets": ["0x1", "0x2"]},
            {"type": "L3", "size": 33554432, "cpusets": ["0x3"]},
        ]
    },
}


def test_last_level_cache_sums_instances():
    assert last_level_cache_bytes(TOPOLOGY_2CORE) == 32 * 2**20
    two_sockets = {
        "topology": {"caches": [{"type": "L3", "size": 2**25, "cpusets": ["0xf", "0xf0"]}]}
    }
    assert last_level_cache_bytes(two_sockets) == 2**26
    assert last_level_cache_bytes({}) is None


def test_stream_arrays_are_four_times_the_llc():
    elements = stream_array_elements(TOPOLOGY_2CORE)
    assert elements * 8 >= 4 * 32 * 2**20
    assert elements == 17_000_000  # 16.8 M rounded up to a whole million


def test_detected_topology_if_any_has_a_cache():
    path = ROOT / "site-configs/local/topology.json"
    if not path.is_file():
        pytest.skip("local site not detected yet (./sitebench detect)")
    assert last_level_cache_bytes(json.loads(path.read_text())) > 0


@pytest.mark.parametrize(
    "ranks, grid",
    [
        (1, (1, 1)),
        (2, (1, 2)),
        (4, (2, 2)),
        (6, (2, 3)),
        (7, (1, 7)),
        (12, (3, 4)),
        (128, (8, 16)),
    ],
)
def test_process_grid(ranks, grid):
    assert process_grid(ranks) == grid


def test_problem_size_80_percent_rule():
    mem = 24 * 2**30
    n = problem_size(mem, 0.8, 192)
    assert n % 192 == 0
    assert 0.78 * mem <= 8 * n * n <= 0.8 * mem
    assert problem_size(mem, 0.8, 192, cap=10000) == 9984
    assert problem_size(1000, 0.8, 192) == 192  # never below one block


def test_hpl_dat_matches_the_captured_input_layout():
    written = hpl_dat(5000, 192, 1, 2).splitlines()
    captured = (FIXTURES / "hpl/inputs/HPL.dat.N5000").read_text().splitlines()
    assert len(written) == len(captured)
    # Same values line by line (line 2 is a free comment).
    for mine, theirs in list(zip(written, captured))[2:]:
        assert mine.split()[0] == theirs.split()[0]
