"""The MPI checks under MPICH (hydra, ch4:ucx): the binding and transport proofs on real
outputs (tests/fixtures/mpich/, README there says how each was captured), wrong placements
and transports refused, the Jacobi and ring parsers beside hydra's lines, and the mpirun
options and environment each MPI gets (Open MPI's unchanged)."""

import json
import re
import sys
from types import SimpleNamespace

import pytest

from conftest import FIXTURES, ROOT
from sitebench.parsers import ParseError, jacobi, osu, ring
from sitebench.run import mapping

MPICH = FIXTURES / "mpich"
#: The VM the fixtures were captured on: 1 socket, 2 cores (its site-configs/local/topology.json
#: as `sitebench detect` wrote it there, kept beside the captures).
VM = osu.cpu_places(json.loads((MPICH / "topology.json").read_text())["topology"])
#: hwloc's synthetic "package:2 core:2 pu:1", as ReFrame would describe it.
TWO_SOCKETS = osu.cpu_places({"sockets": ["0x3", "0xc"], "cores": ["0x1", "0x2", "0x4", "0x8"]})


def out(name):
    return (MPICH / f"{name}.out").read_text()


def err(name):
    return (MPICH / f"{name}.err").read_text()


def verdict(name, kind="Latency", mapping="core", transport="shm", places=VM, **kwargs):
    return osu.mpich_problems(
        out(name),
        err(name),
        kind=kind,
        mapping=mapping,
        transport=transport,
        places=places,
        version="7.2",
        **kwargs,
    )


def test_every_fixture_is_documented():
    readme = (MPICH / "README.md").read_text()
    names = {p.name[: -len(".out")] for p in MPICH.glob("*.out")}
    assert names == {p.name[: -len(".err")] for p in MPICH.glob("*.err")}
    assert {n for n in names if f"`{n}`" not in readme} == set()


def test_topology_places():
    assert VM == {0: (0, 0), 1: (0, 1)}
    assert TWO_SOCKETS == {0: (0, 0), 1: (0, 1), 2: (1, 2), 3: (1, 3)}
    assert osu.cpu_places(None) == {} and osu.cpu_places({"sockets": ["0x3"]}) == {}


@pytest.mark.parametrize(
    "name, kind, transport",
    [
        ("osu_latency-core-shm", "Latency", "shm"),
        ("osu_latency-core-tcp", "Latency", "tcp"),
        ("osu_bw-core-shm", "Bandwidth", "shm"),
        ("osu_bw-core-tcp", "Bandwidth", "tcp"),
    ],
)
def test_good_runs_pass_and_the_other_transport_is_refused(name, kind, transport):
    assert verdict(name, kind=kind, transport=transport) == []
    other = "tcp" if transport == "shm" else "shm"
    found = verdict(name, kind=kind, transport=other)
    assert len(found) == 1 and found[0].startswith("transport: UCX connected the ranks with")
    assert found[0].endswith("shared memory only" if other == "shm" else "tcp only")


def test_bindings_and_transports_read():
    bound = osu.hydra_bindings(out("osu_latency-core-shm"), VM)
    assert {r: b.places for r, b in bound.items()} == {0: ((0, 0),), 1: ((0, 1),)}
    assert osu.ucx_transports(err("osu_latency-core-shm")) == {"sysv", "posix", "cma"}
    assert osu.ucx_transports(err("osu_latency-core-tcp")) == {"tcp"}


def test_hydra_lines_are_not_osu_rows():
    text = out("osu_bw-core-shm")
    assert re.search(r"^process \d+ binding", text, re.MULTILINE)
    clean = osu.without_hydra_bindings(text)
    assert "binding" not in clean
    result = osu.parse(clean)
    assert result.kind == "Bandwidth" and sorted(result.values) == [2**k for k in range(25)]
    # A binding line among the rows (hydra's lines come in any order) is not a row either.
    lines = clean.splitlines()
    lines.insert(8, "process 1 binding: 01")
    assert osu.parse(osu.without_hydra_bindings("\n".join(lines) + "\n")).values == result.values
    with pytest.raises(ParseError, match="not 'size value'"):
        osu.parse("\n".join(lines) + "\n")


def test_unbound_ranks_are_refused():
    (found,) = verdict("osu_latency-unbound")
    assert found.startswith("hydra reported bindings for processes [], expected 0..1")


def test_ranks_on_one_core_are_refused():
    (found,) = verdict("osu_latency-same-core")
    assert found == (
        "mapping core wants the ranks on different cores, got rank 0 on  cores [(0, 0)]; "
        "rank 1 on  cores [(0, 0)]"
    )


def test_without_the_proofs_nothing_passes():
    found = verdict("osu_latency-silent")
    assert len(found) == 2
    assert found[0].startswith("hydra reported bindings for processes []")
    assert found[1].startswith("transport: UCX printed no 'ep_cfg[i]: ...' line, expected shm")


def test_socket_mapping_on_two_sockets():
    small = dict(min_size=1, max_size=1)
    assert (
        verdict("osu_latency-socket-synthetic", mapping="socket", places=TWO_SOCKETS, **small)
        == []
    )
    (found,) = verdict("osu_latency-socket-synthetic", mapping="core", places=TWO_SOCKETS, **small)
    assert found.startswith("mapping core wants both ranks on one socket")
    # Read with the VM's topology, CPU 2 is unknown: refused, not guessed.
    (found,) = verdict("osu_latency-socket-synthetic", mapping="socket", **small)
    assert found == "hydra bound ranks to CPUs [2] that the partition's topology does not list"


def test_node_mapping_cannot_be_proven():
    with pytest.raises(ValueError, match="name no host"):
        verdict("osu_latency-core-tcp", mapping="node", transport="tcp")


def test_mpich_failure_is_quoted():
    assert osu.mpich_error(err("osu_latency-ucx-bogus")) == (
        "Fatal error in internal_Init: Other MPI error, error stack:"
    )
    (found,) = verdict("osu_latency-ucx-bogus", exitcode=143)
    assert found == (
        "OSU output has no '# OSU MPI ... Test v<version>' header; MPICH: Fatal error in "
        "internal_Init: Other MPI error, error stack:; mpirun exited with code 143"
    )
    # UCX's own error, when it is on stderr (UCX_LOG_FILE=stderr), is said when MPICH's is not.
    assert osu.mpich_error(out("osu_latency-ucx-bogus")) == (
        "no usable transports/devices (asked bogus on all devices)"
    )
    assert osu.mpich_error(err("osu_latency-core-shm")) == ""


def test_failure_after_a_complete_table_fails():
    stderr = err("osu_latency-core-shm") + "Abort(1): Fatal error in PMPI_Finalize: Other\n"
    assert verdict("osu_latency-core-shm", exitcode=0) == []
    found = osu.mpich_problems(
        out("osu_latency-core-shm"),
        stderr,
        kind="Latency",
        mapping="core",
        transport="shm",
        places=VM,
    )
    assert found == ["MPICH reported a failure: Fatal error in PMPI_Finalize: Other"]


def test_jacobi_and_ring_parsers_ignore_hydra_lines():
    found = jacobi.parse(out("jacobi3d-core"), err("jacobi3d-core"))
    assert found.passed and found.ranks == 2 and found.grid == (120, 120, 120)
    found = ring.parse(out("mpi_ring-core"))
    assert found.passed and found.ranks == 2 and found.received == 80400


# -- the options and environment each MPI gets -----------------------------------------------


def partition(nodes=2, sockets=2, interfaces=None):
    extras = {"nodes": nodes}
    if interfaces:
        extras["tcp_interfaces"] = interfaces
    return SimpleNamespace(
        fullname="site:part",
        scheduler=SimpleNamespace(registered_name="slurm"),
        processor=SimpleNamespace(num_sockets=sockets),
        extras=extras,
    )


def test_open_mpi_options_and_environment_are_unchanged():
    for name in mapping.MAPPINGS:
        expected = ["--map-by", name, "--bind-to", "core", "--report-bindings"]
        assert mapping.mpirun_options(name) == mapping.mpirun_options(name, "openmpi") == expected
    assert mapping.transport_env("core") == {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,vader"}
    assert mapping.transport_env("node", partition(interfaces="ib0"), "openmpi") == {
        "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_btl": "self,tcp",
        "OMPI_MCA_btl_tcp_if_include": "ib0",
    }
    assert mapping.skip_reason(partition(), "socket", "mpirun") is None


def test_mpich_options_and_environment():
    assert mapping.mpirun_options("core", "mpich") == ["-map-by", "core", "-bind-to", "core"]
    assert mapping.mpirun_options("socket", "mpich") == ["-map-by", "socket", "-bind-to", "core"]
    assert mapping.mpirun_options("node", "mpich") == ["-ppn", "1", "-bind-to", "core"]
    assert mapping.transport_env("socket", partition(), "mpich") == {
        "HYDRA_TOPO_DEBUG": "1",
        "UCX_TLS": "self,sm",
    }
    assert mapping.transport_env("node", partition(interfaces="eth1"), "mpich") == {
        "HYDRA_TOPO_DEBUG": "1",
        "MPIR_CVAR_NOLOCAL": "1",
        "UCX_TLS": "tcp",
        "UCX_NET_DEVICES": "eth1",
    }
    assert "UCX_NET_DEVICES" not in mapping.transport_env("node", partition(), "mpich")


def test_mpi_of_the_environ():
    assert mapping.mpi_of(SimpleNamespace(extras={})) == "openmpi"
    assert mapping.mpi_of(SimpleNamespace(extras={"mpi": "mpich"})) == "mpich"
    reason = mapping.skip_reason(partition(), "core", "mpirun", "intel-oneapi-mpi")
    assert reason.startswith("the mappings are written for openmpi, mpich;")
    assert mapping.skip_reason(partition(), "core", "mpirun", "mpich") is None


def test_osu_check_options_match_the_measured_ones():
    """reframe-checks/osu.py's MPICH tables are the ones these fixtures were captured with."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("osu_check", ROOT / "reframe-checks/osu.py")
    check = importlib.util.module_from_spec(spec)
    sys.modules["osu_check"] = check  # ReFrame finds a check's file through its module
    try:
        spec.loader.exec_module(check)
    finally:
        del sys.modules["osu_check"]
    assert check.MPICH_MAPPING_OPTIONS["mpirun"]["core"] == ["-map-by", "core", "-bind-to", "core"]
    assert "node" not in check.MPICH_MAPPING_OPTIONS["mpirun"]
    readme = (MPICH / "README.md").read_text()
    assert f"UCX_TLS={check.MPICH_UCX_TLS['shm']}" in readme
    assert f"UCX_TLS={check.MPICH_UCX_TLS['tcp']}" in readme
    # Open MPI's tables as they were.
    assert check.MAPPING_OPTIONS["mpirun"]["socket"] == [
        "--map-by",
        "socket",
        "--bind-to",
        "core",
        "--report-bindings",
    ]
    assert check.TRANSPORT_BTL == {"shm": "vader", "tcp": "tcp"}
