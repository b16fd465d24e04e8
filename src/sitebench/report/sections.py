"""What the report shows, in order: one section per benchmark, each saying what is plotted and
how to read it, with its charts (or why there are none).

The figures are those of the seed studies: STREAM kernels per site and thread count, sysbench
transactions/s vs threads (and per watt), PARSEC strong-scaling efficiency and time, ping-pong
latency and bandwidth per message size and mapping, HPL Gflop/s by optimisation level, NPB
Mop/s vs ranks, and every per-watt figure where a site measures power.

Where runs used several toolchains (a compiler set and an MPI, the ReFrame environment named
after it: ``gcc-mpich``, ``gcc-openmpi``), each toolchain has its own line or bar, named with
its MPI in the MPI benchmarks (ping-pong per mapping and transport, HPL, NPB, ring):
``gcc-mpich (MPICH)`` against ``gcc-openmpi (Open MPI)``.
"""

from dataclasses import dataclass, field

from . import charts, seed_tables

NO_RUNS = "No runs of this check in the results read."
STREAM_KERNELS = ["Copy", "Scale", "Add", "Triad"]
READING = "Lines are medians across runs, faint points single runs (click one for its provenance)."
TOOLCHAINS = (
    "Where runs used more than one toolchain, each toolchain (named with its MPI) has its own "
    "{what}."
)


@dataclass
class Section:
    anchor: str
    title: str
    text: str
    charts: list = field(default_factory=list)  # Altair charts, in order
    notes: list = field(default_factory=list)  # sentences shown under the text
    table: object = None  # a pandas DataFrame shown under the text (the seed's tables)

    @property
    def empty(self):
        return not self.charts


def per_watt(figures):
    """Rows of energy-efficiency figures (``<figure>_per_watt``, units per watt)."""
    named = figures["figure"].str.contains("per_watt", na=False)
    return figures[named | figures["unit"].str.contains("/W", na=False, regex=False)]


def _rows(figures, check, names):
    return figures[(figures["check"] == check) & figures["figure"].isin(names)]


def _caveat(rows, runs):
    emulated = sorted(set(runs[runs.emulated].site) & set(rows.get("site", [])))
    if not emulated:
        return []
    return [
        f"Caveat: {', '.join(emulated)} {'is' if len(emulated) == 1 else 'are'} emulated: "
        "its timings mean nothing for speed, only that the benchmarks run."
    ]


def _section(anchor, title, text, rows, runs, built, missing=NO_RUNS):
    section = Section(anchor, title, text)
    section.charts = [c for c in built if c is not None]
    section.notes = _caveat(rows, runs) if section.charts else [missing]
    return section


def build_sections(data):
    """The report's sections for a :class:`~sitebench.report.data.ReportData`."""
    figs, runs, labels = data.figures, data.runs, sorted(set(data.runs.get("site_label", [])))
    out = []

    stream = _rows(figs, "StreamCheck", STREAM_KERNELS)
    out.append(
        _section(
            "stream",
            "STREAM: memory bandwidth",
            "Sustained memory bandwidth of the four STREAM kernels (MB/s, higher is better) "
            f"against the number of OpenMP threads, one panel per kernel. {READING}",
            stream,
            runs,
            [
                charts.scaling(
                    stream,
                    labels,
                    x="threads",
                    x_title="threads",
                    y_title="MB/s",
                    title="STREAM bandwidth vs threads",
                    facet="figure",
                    facet_title="kernel",
                    facet_sort=STREAM_KERNELS,
                )
            ],
        )
    )

    tps = _rows(figs, "SysbenchCheck", ["tps"])
    tps_watt = _rows(figs, "SysbenchCheck", ["tps_per_watt"])
    sysbench = _section(
        "sysbench",
        "sysbench: OLTP transactions",
        "Transactions per second of sysbench's OLTP read-write test on a private MariaDB "
        f"server (higher is better) against client threads. {READING}",
        tps,
        runs,
        [
            charts.scaling(
                tps,
                labels,
                x="threads",
                x_title="threads",
                y_title="transactions/s",
                title="sysbench transactions/s vs threads",
            ),
            charts.scaling(
                tps_watt,
                labels,
                x="threads",
                x_title="threads",
                y_title="transactions/s per watt",
                title="sysbench transactions/s per watt vs threads",
            ),
        ],
    )
    if not sysbench.empty and tps_watt.empty:
        sysbench.notes.append("No site measured power for sysbench: no per-watt chart.")
    out.append(sysbench)

    efficiency = _rows(figs, "ParsecCheck", ["efficiency"])
    parsec_time = _rows(figs, "ParsecCheck", ["time"])
    out.append(
        _section(
            "parsec",
            "PARSEC: strong scaling",
            "PARSEC benchmarks on a fixed input: parallel efficiency (speed-up over one thread "
            "divided by threads; 1, the dashed line, is perfect scaling) and wall time (s, "
            f"lower is better) against threads, one panel per benchmark. {READING}",
            efficiency,
            runs,
            [
                charts.scaling(
                    efficiency,
                    labels,
                    x="threads",
                    x_title="threads",
                    y_title="efficiency",
                    title="PARSEC efficiency vs threads",
                    facet="benchmark",
                    facet_title="benchmark",
                    ideal=1.0,
                ),
                charts.scaling(
                    parsec_time,
                    labels,
                    x="threads",
                    x_title="threads",
                    y_title="time (s)",
                    title="PARSEC time vs threads",
                    facet="benchmark",
                    facet_title="benchmark",
                    log_y=True,
                    independent_y=True,
                ),
            ],
        )
    )

    curves = data.curves
    latency, bandwidth = curves[curves.kind == "latency"], curves[curves.kind == "bandwidth"]
    osu_figs = figs[figs["check"].isin(["OsuLatencyCheck", "OsuBandwidthCheck"])]
    out.append(
        _section(
            "pingpong",
            "Ping-pong: MPI latency and bandwidth",
            "Two MPI ranks exchanging messages (OSU osu_latency and osu_bw): latency (µs, lower "
            "is better) and bandwidth (MB/s, higher is better) per message size, both axes "
            "logarithmic; one panel per rank mapping (core: two cores of a socket, socket: two "
            "sockets, node: two nodes), a dash per transport. The curves are read from each "
            f"run's stored output. {READING} "
            + TOOLCHAINS.format(what="dash per transport: MPIs side by side in each panel"),
            curves,
            runs,
            [
                charts.message_sizes(
                    latency, labels, y_title="latency (µs)", title="Latency vs message size"
                ),
                charts.message_sizes(
                    bandwidth,
                    labels,
                    y_title="bandwidth (MB/s)",
                    title="Bandwidth vs message size",
                ),
            ],
            missing=(
                "The OSU runs kept no readable output, so there are no curves."
                if not osu_figs.empty
                else NO_RUNS
            ),
        )
    )

    hpl = _rows(figs, "HplCheck", ["gflops"])
    out.append(
        _section(
            "hpl",
            "HPL: Gflop/s by optimisation level",
            "HPL Gflop/s (higher is better): a bar per site and build, the median across runs, "
            "each run a tick on it (click one for its provenance). The build is the flags the "
            "sitebench HPL recipe chose for the run's concrete spec (variants level and simd: "
            "-O0 without vector instructions, or -O3 with the target's SIMD) and its BLAS. "
            + TOOLCHAINS.format(what="bar per build"),
            hpl,
            runs,
            [charts.builds(hpl, labels, x_title="Gflop/s", title="HPL Gflop/s by build")],
        )
    )

    npb = _rows(figs, "NpbCheck", ["mops_total"])
    out.append(
        _section(
            "npb",
            "NPB: Mop/s vs ranks",
            "NAS Parallel Benchmarks (MPI): total Mop/s (higher is better) against the number "
            f"of MPI ranks, one panel per benchmark, each with its own scale. {READING} "
            + TOOLCHAINS.format(what="line, dashed differently"),
            npb,
            runs,
            [
                charts.scaling(
                    npb,
                    labels,
                    x="ranks",
                    x_title="MPI ranks",
                    y_title="Mop/s",
                    title="NPB Mop/s vs ranks",
                    facet="benchmark",
                    facet_title="benchmark",
                    columns=3,
                    independent_y=True,
                    mpi=True,
                )
            ],
        )
    )

    out.extend(seed_sections(figs, runs, labels))

    energy = per_watt(figs)
    out.append(
        _section(
            "energy",
            "Energy efficiency",
            "Every per-watt figure: the benchmark's figure divided by the mean power measured "
            "around its run (higher is better), a panel per figure.",
            energy,
            runs,
            [charts.per_case(energy, labels, title="Figures per watt")],
            missing=(
                "No site measured power in these runs, so there are no per-watt figures "
                "(a partition measures power when its site configuration names a power source)."
            ),
        )
    )
    return out


JACOBI_COLUMNS = ["site", "run", "mapping", *seed_tables.jacobi_model.TABLE_COLUMNS]


def seed_sections(figs, runs, labels):
    """The Jacobi model, the ring by mapping and the page-size loss (issue 17)."""
    table = seed_tables.jacobi_rows(figs)
    jacobi = _section(
        "jacobi",
        "Jacobi: measured against the model",
        "3D Jacobi (sitebench's jacobi3d, a fixed grid over N MPI ranks): measured MLUP/s "
        "against the model built from the site's own ping-pong, T_c = C/B + k*lambda (C: MB "
        "a rank sends per iteration, k: its neighbours, lambda and B: OSU 1-byte latency and "
        "peak bandwidth of the same mapping and transport, nearest earlier run) and MLUP/s est "
        "= U / (U / (N * P1) + T_c) with P1 the 1-rank rate; diff = (real - est) / est. "
        "Derivation: reframe-checks/README.md.",
        figs[figs["check"] == seed_tables.jacobi_model.JACOBI],
        runs,
        [charts.model_vs_measured(table, labels, title="Jacobi MLUP/s: model and measurement")],
    )
    if not table.empty:
        jacobi.table = table[JACOBI_COLUMNS]
        jacobi.notes += sorted({m for m in table["missing"] if isinstance(m, str)})
    ring = seed_tables.with_vars(_rows(figs, "RingCheck", ["time_per_step"]), "mapping")
    ring_section = _section(
        "ring",
        "Ring: time per step vs processes",
        "sitebench's mpi_ring: each rank exchanges a 16-byte message with both neighbours "
        "around a ring per step; time per step (µs, lower is better) against the number of "
        f"processes, one panel per mapping (core, socket, node). {READING}",
        ring,
        runs,
        [
            charts.scaling(
                ring,
                labels,
                x="ranks",
                x_title="MPI processes",
                y_title="time per step (µs)",
                title="Ring step time vs processes",
                facet="mapping",
                facet_title="mapping",
                mpi=True,
            )
        ],
    )
    loss = seed_tables.page_loss(figs)
    pages = _section(
        "pages",
        "Page size: loss with small pages",
        "Performance lost with small (4 KiB) pages against large (2 MiB transparent huge) "
        "pages, in % (1 - small/large; for the random-access latency, 1 - t_large/t_small), "
        "per benchmark: NPB and sitebench's memaccess (streaming and random reads over a "
        "buffer beyond the TLB's reach). Medians over the runs; every run proved its page "
        "size from the process's AnonHugePages.",
        _rows(figs, seed_tables.PAGES, list(seed_tables.PAGE_FIGURES)),
        runs,
        [charts.loss_bars(loss, labels, title="Loss with 4 KiB pages")],
    )
    if not loss.empty:
        pages.table = loss
    shares = seed_tables.message_distribution(figs)
    messages = _section(
        "messages",
        "Message distribution: socket, node, network",
        "Share of the MPI messages and of their volume between different ranks that stayed "
        "in a socket, crossed to another socket of the node, or crossed the network, per "
        "benchmark (NPB, HPL run once more under Open MPI's monitoring), and how each "
        "channel's messages split by size; medians over the runs, the multi-core study's "
        "finding last. Derivation: reframe-checks/README.md.",
        figs[figs["check"].isin(seed_tables.MESSAGE_CHECKS)],
        runs,
        [
            charts.per_case(
                figs[
                    figs["check"].isin(seed_tables.MESSAGE_CHECKS)
                    & figs["figure"].str.contains("_share_", na=False)
                ],
                labels,
                title="Share per channel (%)",
            )
        ],
    )
    if len(shares) > 1:
        messages.table = shares
    return [
        jacobi,
        ring_section,
        pages,
        messages,
        _java_section(figs, runs, labels),
        _npb_java_section(figs, runs, labels),
        _gadget2_section(figs, runs, labels),
    ]


def _npb_java_section(figs, runs, labels):
    """NPB in Java (the substitute for the study's NPB-MPJ) beside NPB-MPI, kernel by kernel."""
    java = figs[(figs["check"] == seed_tables.NPB_JAVA) & (figs["figure"] == "mops_total")]
    both = seed_tables.npb_java_rows(figs)
    section = _section(
        "npb-java",
        "NPB in Java against NPB-MPI (a substitute)",
        "NASA's NPB 3.0 Java version (threads in one JVM) as a SUBSTITUTE for the study's "
        "NPB-MPJ, which is on no public repository: Mop/s per kernel (higher is better) beside "
        "NPB-MPI's at the same class and as many ranks as Java had threads, per MPI; medians "
        "over the runs. It runs where a site's environment has the optional npb-java spec. "
        "Derivation: reframe-checks/README.md.",
        java,
        runs,
        [charts.per_case(both, labels, title="NPB Java and NPB-MPI Mop/s per kernel")],
        missing=NO_RUNS + " npb-java is optional: add it to the environment's specs to run it.",
    )
    table = seed_tables.npb_java_against_c(figs)
    if not table.empty:
        section.table = table
    return section


def _gadget2_section(figs, runs, labels):
    """Gadget-2's strong scaling: wall time and efficiency against ranks, per problem."""
    rows = seed_tables.with_vars(
        _rows(figs, seed_tables.GADGET2, ["wall_time", "efficiency"]), "problem"
    )
    section = _section(
        "gadget2",
        "Gadget-2: strong scaling",
        "Gadget-2 (cosmological N-body/SPH) on one problem (named in each panel; lcdm_gas "
        "unless a site ran another) from one MPI rank to all cores: wall time (s, Gadget-2's "
        "own clock, lower is better) and efficiency (the 1-rank wall time over ranks x wall "
        f"time; 1, the dashed line, is perfect scaling) against ranks. {READING} "
        + TOOLCHAINS.format(what="line, dashed differently"),
        rows,
        runs,
        [
            charts.scaling(
                rows[rows["figure"] == name],
                labels,
                x="ranks",
                x_title="MPI ranks",
                y_title=title,
                title=f"Gadget-2 {title} vs ranks",
                facet="problem",
                facet_title="problem",
                mpi=True,
                **extra,
            )
            for name, title, extra in (
                ("wall_time", "wall time (s)", {"independent_y": True}),
                ("efficiency", "efficiency", {"ideal": 1.0}),
            )
        ],
    )
    table = seed_tables.gadget2_scaling(figs)
    if len(table) > 1:
        section.table = table
    return section


def _java_section(figs, runs, labels):
    """The ARM-cluster study's Java message passing against C MPI, figure by figure."""
    java = figs[figs["check"] == seed_tables.JAVA]
    section = _section(
        "java",
        "Java message passing against C MPI",
        "sitebench's Java ping-pong (OSU's method) under MPJ Express (multicore: one JVM; "
        "niodev: TCP through its daemon on loopback) and Open MPI's Java bindings, against "
        "OSU's C ping-pong of the same site (core mapping, shared memory, per MPI): 1-byte "
        "latency (lower is better) and peak bandwidth (a ping-pong in Java, osu_bw's 64 "
        "messages in flight in C, as the study plotted them: not like for like). Medians over "
        "the runs. Derivation: reframe-checks/README.md.",
        java,
        runs,
        [charts.per_case(java, labels, title="Java ping-pong per set-up")],
    )
    table = seed_tables.java_against_c(figs)
    if not table.empty:
        section.table = table[seed_tables.JAVA_COLUMNS]
    return section
