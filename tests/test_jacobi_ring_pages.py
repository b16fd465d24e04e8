"""Jacobi (and its model), the ring and the page-size runs: parsers on the real outputs in
tests/fixtures/{jacobi,ring,pages}/ (README there says how each was captured), the model
against the seed's published row, the report's tables, bad inputs, and (markers spack,
slow) each program built by Spack from the repository's sources and run here, through its
ReFrame check, with its own correctness check."""

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from conftest import FIXTURES, build_in_temp_env
from sitebench.parsers import ParseError, jacobi, osu, pages, ring
from sitebench.report import seed_tables
from sitebench.results import figures as figure_rows
from sitebench.results import jacobi_model
from sitebench.run.hugepages import large_pages_unavailable

JAC, RING, PAGES = FIXTURES / "jacobi", FIXTURES / "ring", FIXTURES / "pages"
OSU = FIXTURES / "osu"
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


# -- the model against the seed -------------------------------------------------------------


def test_model_reproduces_the_seed_row():
    """THIN node, core mapping: lambda = 0.22 us, B = 6450.36 MB/s, N = 4, k = 4, C = 92.16 MB."""
    tc = jacobi_model.comm_time(92.16, 4, 0.22e-6, 6450.36)
    assert tc == pytest.approx(0.0143, abs=5e-5)
    assert tc == pytest.approx(92.16 / 6450.36 + 4 * 0.22e-6, rel=1e-12)


def test_estimate_is_the_split_computation_plus_communication():
    # A 1-rank rate of 100 MLUP/s over 1e8 updates is 1 s; 4 ranks: 0.25 s + T_c.
    tc = jacobi_model.comm_time(92.16, 4, 0.22e-6, 6450.36)
    est = jacobi_model.estimated_mlups(100, 1e8, 4, 92.16, 4, 0.22e-6, 6450.36)
    assert est == pytest.approx(1e8 / (0.25 + tc) / 1e6)
    # No communication at all: perfect scaling.
    assert jacobi_model.estimated_mlups(100, 1e8, 4, 0, 0, 0, 1) == pytest.approx(400)


def case(check, params, figures, **variables):
    """One test case of a ReFrame report, as the store reads it."""
    return {
        "name": check,
        "display_name": f"{check} {params}",
        "system": "local",
        "partition": "default",
        "environ": "gnu",
        "result": "pass",
        "reference_keys": list(variables),
        **variables,
        "perfvalues": {
            f"local:default:{k}": [v, 0, None, None, u] for k, (v, u) in figures.items()
        },
    }


def stored_rows(*runs):
    rows = []
    for name, started, cases in runs:
        run = SimpleNamespace(
            site="local",
            name=name,
            provenance={"cpu_arch": "x86_64_v4"},
            report={"session_info": {"time_start": started}, "runs": [{"testcases": cases}]},
        )
        rows += list(figure_rows.rows_of_run(run))
    return pd.DataFrame(rows)


def osu_cases(latency_path, bandwidth_path):
    lat = osu.parse(latency_path.read_text()).values[1]
    bw = osu.parse(bandwidth_path.read_text()).peak[1]
    keys = {"scale": "quick", "mapping": "core", "transport": "shm"}
    return [
        case(
            "OsuLatencyCheck",
            "%mapping=core %transport=shm",
            {"latency_small": (lat, "us")},
            **keys,
        ),
        case(
            "OsuBandwidthCheck",
            "%mapping=core %transport=shm",
            {"bandwidth_peak": (bw, "MB/s")},
            **keys,
        ),
    ]


def jacobi_cases():
    out = []
    for path in ("ranks1.out", "ranks2.out"):
        found = jacobi.parse((JAC / path).read_text())
        keys = {"scale": "quick", "mapping": "core", "transport": "shm", "num_ranks": found.ranks}
        figures = {
            "mlups": (found.mlups, "MLUP/s"),
            "time_per_iteration": (found.time_per_iteration, "s"),
            "neighbours": (found.neighbours, "count"),
            "halo_mb": (found.halo_mb, "MB"),
        }
        out.append(case("JacobiCheck", f"%mapping=core %ranks={found.ranks}", figures, **keys))
    return out


LAT = OSU / "omb-7.2_osu_latency_core_shm_x20_i200.txt"
BW = OSU / "omb-7.2_osu_bw_core_shm_x2_i20.txt"


def test_model_table_from_stored_figures():
    """The real captured outputs as stored runs: OSU first, Jacobi later."""
    figs = stored_rows(
        ("osu-run", "2026-11-24T05:00:00+0000", osu_cases(LAT, BW)),
        ("jacobi-run", "2026-11-24T05:30:00+0000", jacobi_cases()),
    )
    table = jacobi_model.model_table(figs).set_index("N")
    one, two = jacobi.parse((JAC / "ranks1.out").read_text()), jacobi.parse(
        (JAC / "ranks2.out").read_text()
    )
    lam, bw = 0.18e-6, 12192.42  # the OSU fixtures' 1 B latency and peak bandwidth
    assert table.loc[2, "osu_run"] == "osu-run" and table.loc[2, "k"] == 1
    assert table.loc[2, "Tc/s"] == pytest.approx(two.halo_mb / bw + lam)
    updates = 120**3
    expected = updates / (updates / (2 * one.mlups * 1e6) + two.halo_mb / bw + lam) / 1e6
    assert table.loc[2, "MLUP/s est"] == pytest.approx(expected, rel=1e-4)
    assert table.loc[2, "diff"] == pytest.approx((two.mlups - expected) / expected, rel=1e-3)
    assert table.loc[1, "MLUP/s est"] == table.loc[1, "MLUP/s real"] == one.mlups


@pytest.mark.reliability_input
def test_no_osu_figures_names_the_run_to_make():
    # OSU measured only after the Jacobi run, and none at all: no model, and which run to make.
    for osu_started in ("2026-11-24T06:00:00+0000", None):
        runs = [("jacobi-run", "2026-11-24T05:30:00+0000", jacobi_cases())]
        if osu_started:
            runs.append(("osu-later", osu_started, osu_cases(LAT, BW)))
        table = jacobi_model.model_table(stored_rows(*runs)).set_index("N")
        assert table.loc[2, "MLUP/s est"] is None or pd.isna(table.loc[2, "MLUP/s est"])
        why = table.loc[2, "missing"]
        assert "no OSU ping-pong figures of site local for mapping core, transport shm" in why
        assert "OsuLatencyCheck|OsuBandwidthCheck" in why and "./sitebench run" in why
    with pytest.raises(jacobi_model.NoOsuFigures, match="run them first"):
        jacobi_model.pingpong(stored_rows(*runs[:1]), "local", "core", "shm", "2026-11-25")


# -- parsers on the captured outputs ---------------------------------------------------------


def test_jacobi_outputs():
    one = jacobi.parse((JAC / "ranks1.out").read_text())
    two = jacobi.parse((JAC / "ranks2.out").read_text())
    assert (one.ranks, one.dims, one.neighbours, one.halo_mb) == (1, (1, 1, 1), 0, 0.0)
    assert (two.ranks, two.dims, two.neighbours, two.halo_mb) == (2, (2, 1, 1), 1, 0.1152)
    assert two.halo_mb == 120 * 120 * 8 / 1e6  # one 120 x 120 face of doubles
    assert one.passed and two.passed and one.grid == (120, 120, 120)
    assert one.mlups == pytest.approx(120**3 / one.time_per_iteration / 1e6, rel=1e-5)


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "name, message",
    [
        ("refused-divide", "2 ranks decompose as 2 x 1 x 1, which does not divide the grid"),
        ("refused-small", "domain too small for 4 ranks"),
    ],
)
def test_jacobi_refusals_are_named(name, message):
    with pytest.raises(ParseError, match=message):
        jacobi.parse((JAC / f"{name}.out").read_text(), (JAC / f"{name}.err").read_text())


def test_truncated_outputs_are_errors():
    with pytest.raises(ParseError, match="jacobi3d output has no 'time_per_iteration' line"):
        jacobi.parse((JAC / "truncated.out").read_text())
    with pytest.raises(ParseError, match="mpi_ring output has no 'messages:' line"):
        ring.parse((RING / "truncated.out").read_text())
    with pytest.raises(ParseError, match="no 'memaccess <version>' header"):
        pages.parse("")


@pytest.mark.reliability_input
def test_rank_counts_the_decomposition_cannot_take():
    assert jacobi.dims(12) == (3, 2, 2) and jacobi.dims(2) == (2, 1, 1)
    assert jacobi.refused_ranks(2, 120) is None and jacobi.refused_ranks(16, 120) is None
    assert "does not divide the 120^3 grid" in jacobi.refused_ranks(7, 120)
    assert "domain too small for 8 ranks" in jacobi.refused_ranks(8, 2)


def test_ring_outputs():
    one, two = ring.parse((RING / "ranks1.out").read_text()), ring.parse(
        (RING / "ranks2.out").read_text()
    )
    assert one.passed and two.passed
    assert (two.ranks, two.steps, two.expected) == (2, 20000, 2 * 2 * 20100)
    assert two.time_per_step_us == 0.1714
    lost = (RING / "ranks2.out").read_text().replace("80400 received", "80399 received")
    assert not ring.parse(lost.replace("PASSED", "FAILED")).passed


def test_page_outputs_and_their_proof():
    small = pages.parse((PAGES / "memaccess-small.out").read_text())
    large = pages.parse((PAGES / "memaccess-large.out").read_text())
    assert (small.huge_kb, small.pages_as_asked) == (0, True)
    assert (large.huge_kb, large.huge_percent, large.pages_as_asked) == (524288, 100.0, True)
    watched = pages.watched((PAGES / "npb-is-large.err").read_text())
    assert pages.huge_page_problem("large", watched) is None
    unwatched = pages.watched((PAGES / "npb-is-small.err").read_text())
    assert pages.huge_page_problem("small", unwatched) is None
    assert "the large pages were not used" in pages.huge_page_problem("large", unwatched)
    assert "small pages asked" in pages.huge_page_problem("small", watched)
    with pytest.raises(ParseError, match="no 'pagewatch:' line"):
        pages.watched("")


def test_page_loss_table():
    def pcase(bench, size, figures):
        keys = {"scale": "quick", "benchmark": bench, "pages": size}
        return case("PagesCheck", f"%benchmark={bench} %pages={size}", figures, **keys)

    cases = []
    for size in ("small", "large"):
        found = pages.parse((PAGES / f"memaccess-{size}.out").read_text())
        cases.append(
            pcase(
                "memaccess",
                size,
                {
                    "stream_bandwidth": (found.stream_mbs, "MB/s"),
                    "random_latency": (found.random_ns, "ns"),
                },
            )
        )
    loss = seed_tables.page_loss(stored_rows(("r", "2026-11-24T05:30:00+0000", cases)))
    loss = loss.set_index("benchmark")
    small = pages.parse((PAGES / "memaccess-small.out").read_text())
    large = pages.parse((PAGES / "memaccess-large.out").read_text())
    assert loss.loc["memaccess random", "loss %"] == pytest.approx(
        100 * (1 - large.random_ns / small.random_ns)
    )
    assert loss.loc["memaccess streaming", "loss %"] == pytest.approx(
        100 * (1 - small.stream_mbs / large.stream_mbs)
    )


@pytest.mark.reliability_input
def test_large_pages_unavailable_is_said(tmp_path):
    thp = tmp_path / "enabled"
    thp.write_text("always madvise [never]\n")
    assert "transparent huge pages are 'never'" in large_pages_unavailable(str(thp))
    assert "the kernel lacks THP" in large_pages_unavailable(str(tmp_path / "none"))
    thp.write_text("always [madvise] never\n")
    assert large_pages_unavailable(str(thp)) is None


# -- built by Spack from the repository, run here --------------------------------------------


@pytest.fixture(scope="module")
def built(spack, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jrp")
    specs = ["jacobi3d", "mpi-ring", "memaccess", "npb implementation=mpi names=is classes=A"]
    store = build_in_temp_env(spack, tmp, specs)
    return SimpleNamespace(tmp=tmp, env=tmp / "env", store=store)


def binary(built, name):
    return str(next(built.store.rglob(f"bin/{name}")))


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.reliability_input
def test_built_jacobi_refuses_what_it_cannot_decompose(built):
    env = {**os.environ, **MPI_ENV}
    for grid, message in (
        (["121", "120", "120"], "which does not divide the grid 121 x 120 x 120"),
        (["2", "2", "2"], "domain too small for 2 ranks"),
    ):
        proc = subprocess.run(
            ["mpirun", "-np", "2", binary(built, "jacobi3d"), "-n", *grid, "-i", "5"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr


@pytest.mark.spack
@pytest.mark.slow
def test_checks_run_the_built_programs_with_their_own_verification(built, spack):
    import rfm_temp_env

    no_references = built.tmp / "no-references.yaml"
    no_references.write_text("{}\n")
    proc, cases = rfm_temp_env.run(
        spack,
        built.env,
        built.tmp,
        ["jacobi.py", "ring.py", "pages.py"],
        ["JacobiCheck|RingCheck|PagesCheck.*benchmark=(is|memaccess)"],
        references=no_references,
    )
    ran = {c["display_name"]: c for c in cases if c["result"] != "skip"}
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(ran) == {
        "JacobiCheck %scale=quick %mapping=core %ranks=1",
        "JacobiCheck %scale=quick %mapping=core %ranks=all",
        "RingCheck %scale=quick %mapping=core %ranks=1",
        "RingCheck %scale=quick %mapping=core %ranks=all",
        *(
            f"PagesCheck %scale=quick %benchmark={b} %pages={p}"
            for b in ("is", "memaccess")
            for p in ("small", "large")
        ),
    }
    assert all(c["result"] == "pass" for c in ran.values())
    # The residual and message-count checks are the sanity the cases passed; read them back.
    stage = built.tmp / "rfm" / "output" / "local" / "default"
    assert list(stage.glob("*/JacobiCheck*/rfm_job.out"))
    for out in stage.glob("*/JacobiCheck*/rfm_job.out"):
        assert jacobi.parse(out.read_text()).passed
    for out in stage.glob("*/RingCheck*/rfm_job.out"):
        assert ring.parse(out.read_text()).passed
    perf = {
        n: {k.rsplit(":", 1)[-1]: v[0] for k, v in c["perfvalues"].items()} for n, c in ran.items()
    }
    # The large pages proven by the kernel's own counters; none where small were asked.
    large = perf["PagesCheck %scale=quick %benchmark=memaccess %pages=large"]
    assert large["huge_kb"] == 512 * 1024
    assert perf["PagesCheck %scale=quick %benchmark=is %pages=large"]["huge_kb"] > 0
    assert perf["PagesCheck %scale=quick %benchmark=is %pages=small"]["huge_kb"] == 0
    # One socket, one node here: the socket and node mappings skip (reason: next test).
    skipped = {c["display_name"] for c in cases if c["result"] == "skip"}
    assert "JacobiCheck %scale=quick %mapping=socket %ranks=1" in skipped
    assert "RingCheck %scale=quick %mapping=node %ranks=all" in skipped


def test_mappings_this_machine_cannot_offer_are_said():
    from sitebench.run import mapping

    def partition(sockets, scheduler="local", nodes=None):
        return SimpleNamespace(
            fullname="local:default",
            processor=SimpleNamespace(num_sockets=sockets),
            scheduler=SimpleNamespace(registered_name=scheduler),
            extras={"nodes": nodes} if nodes else {},
        )

    one = partition(1)
    assert mapping.skip_reason(one, "core", "mpirun") is None
    assert "mapping socket needs 2 sockets; local:default has 1" in mapping.skip_reason(
        one, "socket", "mpirun"
    )
    assert "mapping node needs 2 nodes" in mapping.skip_reason(one, "node", "mpirun")
    assert mapping.skip_reason(partition(2, "slurm", 2), "node", "mpirun") is None
    assert "launches with srun" in mapping.skip_reason(one, "core", "srun")


@pytest.mark.spack
@pytest.mark.slow
def test_small_pages_fail_the_large_page_proof(built):
    """NPB IS run with malloc's THP tunable off, asked as large pages: the counters say no."""
    env = {**os.environ, **MPI_ENV, "GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}
    proc = subprocess.run(
        ["mpirun", "-np", "1", binary(built, "pagewatch"), binary(built, "is.A.x")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "Verification    =               SUCCESSFUL" in proc.stdout
    watched = pages.watched(proc.stderr)
    assert "the large pages were not used" in pages.huge_page_problem("large", watched)
    assert json.dumps([w.huge_kb for w in watched]) == "[0]"


def test_report_sections_show_the_seed_tables_and_charts():
    """The three sections from stored figure rows of the captured outputs: the model table
    and its chart, the ring's chart per mapping, the page-size loss table; valid Vega-Lite."""
    from sitebench.report import _block, sections

    ring_cases = []
    for path in ("ranks1.out", "ranks2.out"):
        found = ring.parse((RING / path).read_text())
        keys = {"scale": "quick", "mapping": "core", "transport": "shm", "num_ranks": found.ranks}
        ring_cases.append(
            case(
                "RingCheck",
                f"%mapping=core %ranks={found.ranks}",
                {"time_per_step": (found.time_per_step_us, "us")},
                **keys,
            )
        )
    figs = stored_rows(
        ("osu-run", "2026-11-24T05:00:00+0000", osu_cases(LAT, BW)),
        ("run", "2026-11-24T05:30:00+0000", jacobi_cases() + ring_cases),
    )
    variables = [json.loads(v) for v in figs["case_vars"]]
    figs["ranks"] = pd.array([v.get("num_ranks") for v in variables], dtype="Int64")
    for column, value in (("site_label", "local"), ("date", "2026-11-24"), ("hostname", "vm")):
        figs[column] = value
    figs["href"] = "#"
    runs = pd.DataFrame({"site": ["local"], "emulated": [False]})
    # The seed sections begin with these three (the message distribution's follows them).
    jac, ring_section, page_section = sections.seed_sections(figs, runs, ["local"])[:3]
    assert list(jac.table.columns) == sections.JACOBI_COLUMNS
    assert list(jac.table["N"]) == [1, 2] and jac.table["Tc/s"].iloc[1] > 0
    assert len(jac.charts) == 1 and len(ring_section.charts) == 1
    for section in (jac, ring_section):
        block = _block(section)
        assert block.specs and "$schema" in block.specs[0]
    assert "<table>" in _block(jac).body_html and "MLUP/s est" in _block(jac).body_html
    assert page_section.empty and page_section.notes == [sections.NO_RUNS]


@pytest.fixture
def two_nodes():
    """The private Slurm cluster with 2 nodes (as test_slurm_cluster.py starts it), stopped
    at the end."""
    import shutil
    import tempfile

    from sitebench.services.slurm.cluster import LocalCluster
    from test_slurm_cluster import PORT, _skip_reason

    reason = _skip_reason(2)
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="sb-slurm."))  # short: unix socket paths
    root.chmod(0o755)
    cluster = LocalCluster(root / "n2")
    try:
        cluster.start(nodes=2, port=PORT, owner=os.getpid())
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slurm
@pytest.mark.spack
@pytest.mark.slow
def test_ring_and_jacobi_across_two_nodes(built, spack, two_nodes):
    """The node mapping on the private 2-node Slurm cluster: one rank on each node, over TCP."""
    import rfm_temp_env

    cluster = two_nodes
    no_references = built.tmp / "no-references.yaml"
    no_references.write_text("{}\n")
    proc, cases = rfm_temp_env.run(
        spack,
        built.env,
        built.tmp / "slurm",
        ["jacobi.py", "ring.py"],
        ["(JacobiCheck|RingCheck).*mapping=node.*ranks=all"],
        references=no_references,
        site="local-slurm",
        env={"SITEBENCH_SLURM_DIR": str(cluster.layout.root)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    ran = [c for c in cases if c["result"] != "skip"]
    assert {(c["partition"], c["name"].split()[0]) for c in ran} == {
        ("mpirun", "JacobiCheck"),
        ("mpirun", "RingCheck"),
    }
    for c in ran:
        assert c["result"] == "pass" and c["transport"] == "tcp", c["fail_reason"]
        err = (Path(c["outputdir"]) / "rfm_job.err").read_text()
        assert "[sbnode1:" in err and "[sbnode2:" in err, err  # --report-bindings
