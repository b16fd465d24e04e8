"""The seed studies' tables for the Jacobi model and the page-size loss, from the figure rows.

:func:`jacobi_rows` is the seed report's table (N, k, C[MB], Tc/s, MLUP/s est, MLUP/s real,
diff) per site, run and mapping, built by :mod:`sitebench.results.jacobi_model` from the
site's own OSU figures; :func:`page_loss` is the Blue Gene slides' table: the performance
lost with small (4 KiB) pages against large (2 MiB) ones, in %, per benchmark;
:func:`message_distribution` is the multi-core study's: the share of MPI messages and volume
per channel (same socket, other socket, other node) per benchmark and by size, beside the
study's own finding (:data:`MESSAGES_SEED`); :func:`java_against_c` is the ARM-cluster
study's Java against C ping-pong: MPJ Express and Open MPI's Java bindings against OSU;
:func:`npb_java_against_c` sets NPB's Java version (the substitute for the study's NPB-MPJ)
beside NPB-MPI kernel by kernel; :func:`gadget2_scaling` is Gadget-2's wall time and
efficiency by ranks.
"""

import json

import pandas as pd

from sitebench.results import jacobi_model

PAGES = "PagesCheck"
#: Figure per benchmark of the page-size check, and whether higher is better.
PAGE_FIGURES = {
    "mops_total": ("Mop/s", True),
    "stream_bandwidth": ("streaming", True),
    "random_latency": ("random", False),
}


def with_vars(figures, *names):
    """``figures`` with the named case variables (mapping, pages, ...) as columns."""
    figures = figures.copy()
    values = [json.loads(v) if isinstance(v, str) else {} for v in figures["case_vars"]]
    for name in names:
        figures[name] = [v.get(name) for v in values]
    return figures


def jacobi_rows(figures):
    """The model table (a DataFrame, see :func:`jacobi_model.model_table`), newest run last."""
    return jacobi_model.model_table(figures)


def page_loss(figures):
    """One row per site and benchmark: the medians with small and large pages and the loss
    ``1 - perf_small / perf_large`` in % (perf = 1/time for the random-access latency)."""
    rows = figures[(figures["check"] == PAGES) & figures["figure"].isin(list(PAGE_FIGURES))]
    if rows.empty:
        return pd.DataFrame(columns=["site", "benchmark", "small", "large", "unit", "loss %"])
    rows = with_vars(rows, "benchmark", "pages")
    out = []
    for (site, bench, figure), group in rows.groupby(["site", "benchmark", "figure"]):
        medians = group.groupby("pages")["value"].median()
        if not {"small", "large"} <= set(medians.index):
            continue
        label, higher_better = PAGE_FIGURES[figure]
        small, large = medians["small"], medians["large"]
        ratio = small / large if higher_better else large / small
        name = bench if bench != "memaccess" else f"memaccess {label}"
        out.append(
            {
                "site": site,
                "benchmark": name,
                "small": small,
                "large": large,
                "unit": group["unit"].iloc[0],
                "loss %": 100 * (1 - ratio),
            }
        )
    return pd.DataFrame(out)


#: The monitored checks (reframe-checks/README.md, "Message distribution").
MESSAGE_CHECKS = ("NpbMessagesCheck", "HplMessagesCheck")
#: The channels of the shares, nearest first (sitebench/run/channels.py).
MESSAGE_CHANNELS = ("socket", "node", "network")
#: Message sizes of the table's columns: [low, high) bytes.
SIZE_CLASSES = (("< 1 KiB %", 0, 1024), ("1-64 KiB %", 1024, 65536), (">= 64 KiB %", 65536, None))
MESSAGE_COLUMNS = ["site", "benchmark", "channel", "messages %", "volume %"]
MESSAGE_COLUMNS += [name for name, _, _ in SIZE_CLASSES] + ["runs"]
#: The study's finding as issue 29 states it: about half of all messages of NPB, HPL and an
#: application stay inside a node (socket and node together); its per-channel table is not
#: in this repository, so no other figure of it is quoted.
MESSAGES_SEED = {
    "site": "the study",
    "benchmark": "NPB, HPL, an application",
    "channel": "socket + node (intra-node)",
    "messages %": 50.0,
}


def message_distribution(figures):
    """One row per site, benchmark and channel: the medians over runs of the share of the
    messages and of the volume between different ranks that took the channel, and how that
    channel's messages split by size (% of its messages); the study's row last."""
    rows = figures[figures["check"].isin(MESSAGE_CHECKS)]
    if rows.empty:
        return pd.DataFrame(columns=MESSAGE_COLUMNS)
    rows = with_vars(rows, "benchmark")
    rows["benchmark"] = [
        b if isinstance(b, str) and b else check.removesuffix("MessagesCheck").lower()
        for b, check in zip(rows["benchmark"], rows["check"])
    ]
    out = []
    for (site, bench), group in rows.groupby(["site", "benchmark"]):
        per_run = group.pivot_table(index="run", columns="figure", values="value")
        for channel in MESSAGE_CHANNELS:
            shares = [f"messages_share_{channel}", f"bytes_share_{channel}"]
            if not set(shares) <= set(per_run.columns):
                continue
            row = {
                "site": site,
                "benchmark": bench,
                "channel": channel,
                "messages %": per_run[shares[0]].median(),
                "volume %": per_run[shares[1]].median(),
                "runs": len(per_run),
            }
            counts = _size_counts(per_run, channel)
            total = sum(counts.values())
            for name, low, high in SIZE_CLASSES:
                inside = sum(
                    n for size, n in counts.items() if size >= low and (not high or size < high)
                )
                row[name] = 100.0 * inside / total if total else None
            out.append(row)
    out.append(MESSAGES_SEED)
    return pd.DataFrame(out, columns=MESSAGE_COLUMNS)


def _size_counts(per_run, channel):
    """size bucket's low bound (bytes) -> median count of the channel's messages."""
    prefix = f"count_{channel}_"
    return {
        int(name[len(prefix) : -1]): per_run[name].fillna(0).median()
        for name in per_run.columns
        if name.startswith(prefix) and name.endswith("B")
    }


#: Java against C (issue 28): the Java ping-pong's check and the OSU checks it is set against.
JAVA = "JavaPingPongCheck"
#: Figure -> the OSU check that has it (both at 1 B / the peak over all sizes).
JAVA_AGAINST_C = {"latency_small": "OsuLatencyCheck", "bandwidth_peak": "OsuBandwidthCheck"}
JAVA_LABELS = {"multicore": "MPJ multicore", "niodev": "MPJ niodev", "ompi": "Open MPI Java"}
JAVA_COLUMNS = ["site", "figure", "unit", "java", "java_mpi", "c (osu)", "c_mpi", "java / c"]


def java_against_c(figures):
    """One row per site, figure and Java set-up: the median Java figure over the runs, OSU's
    median of the same figure on the same site (core mapping, shared memory, per MPI of the
    environment: both MPIs of the site's toolchains) and their ratio. ``latency_small`` is at
    1 B on both sides; ``bandwidth_peak`` is a ping-pong bandwidth in Java and osu_bw's (64
    messages in flight) in C, so its ratio is the one the study's plots show, not like for like.
    """
    java = with_vars(figures[figures["check"] == JAVA], "device", "mapping")
    osu = with_vars(
        figures[figures["check"].isin(list(JAVA_AGAINST_C.values()))], "mapping", "transport"
    )
    osu = osu[(osu["mapping"] == "core") & (osu["transport"] == "shm")]
    out = []
    java = java[java["figure"].isin(list(JAVA_AGAINST_C)) & (java["mapping"] == "core")]
    for (site, figure, device), group in java.groupby(["site", "figure", "device"]):
        c = osu[(osu["site"] == site) & (osu["figure"] == figure)]
        c = c[c["check"] == JAVA_AGAINST_C[figure]]
        value = group["value"].median()
        if c.empty:
            out.append(
                {
                    "site": site,
                    "figure": figure,
                    "unit": group["unit"].iloc[0],
                    "java": value,
                    "java_mpi": JAVA_LABELS.get(device, device),
                    "c (osu)": None,
                    "c_mpi": None,
                    "java / c": None,
                }
            )
            continue
        for environ, per_mpi in c.groupby("environ"):
            osu_value = per_mpi["value"].median()
            out.append(
                {
                    "site": site,
                    "figure": figure,
                    "unit": group["unit"].iloc[0],
                    "java": value,
                    "java_mpi": JAVA_LABELS.get(device, device),
                    "c (osu)": osu_value,
                    "c_mpi": environ,
                    "java / c": value / osu_value if osu_value else None,
                }
            )
    return pd.DataFrame(out, columns=JAVA_COLUMNS)


#: NPB in Java beside NPB-MPI (issue 28): NASA's NPB3.0-JAV (threads in one JVM), the
#: substitute for the study's NPB-MPJ, which is on no public repository.
NPB_JAVA = "NpbJavaCheck"
NPB_C = "NpbCheck"
NPB_JAVA_COLUMNS = [
    "site",
    "benchmark",
    "npb_class",
    "cores",
    "java (Mop/s)",
    "java",
    "c (Mop/s)",
    "c_mpi",
    "java / c",
    "runs",
]
NPB_JAVA_LABEL = "NPB3.0-JAV threads (substitute for NPB-MPJ)"


def _npb_sides(figures):
    """(NPB Java's, NPB-MPI's) ``mops_total`` rows with the variables that pair them."""
    mops = figures[figures["figure"] == "mops_total"]
    java = with_vars(mops[mops["check"] == NPB_JAVA], "benchmark", "npb_class", "threads")
    c = with_vars(mops[mops["check"] == NPB_C], "benchmark", "npb_class", "num_ranks")
    return java, c


def npb_java_rows(figures):
    """The ``mops_total`` rows of NPB Java and of the NPB-MPI cases it is set beside (same
    site, kernel, class and ranks = threads): what the report's chart draws."""
    java, c = _npb_sides(figures)
    ran = set(zip(java["site"], java["benchmark"], java["npb_class"], java["threads"]))
    paired = [k in ran for k in zip(c["site"], c["benchmark"], c["npb_class"], c["num_ranks"])]
    return pd.concat([java, c[paired]])[list(figures.columns)]


def npb_java_against_c(figures):
    """One row per site, kernel, class and core count the Java substitute ran, and per MPI of
    the site's NPB-MPI runs of the same kernel, class and as many ranks as Java had threads:
    the medians of ``mops_total`` over the runs and their ratio. Java rows stay (C empty)
    where NPB-MPI did not run that kernel, class and count."""
    java, c = _npb_sides(figures)
    out = []
    keys = ["site", "benchmark", "npb_class", "threads"]
    for (site, benchmark, npb_class, threads), group in java.groupby(keys):
        row = {
            "site": site,
            "benchmark": benchmark,
            "npb_class": npb_class,
            "cores": threads,
            "java (Mop/s)": group["value"].median(),
            "java": NPB_JAVA_LABEL,
            "runs": group["run"].nunique(),
        }
        same = c[
            (c["site"] == site)
            & (c["benchmark"] == benchmark)
            & (c["npb_class"] == npb_class)
            & (c["num_ranks"] == threads)
        ]
        if same.empty:
            out.append({**row, "c (Mop/s)": None, "c_mpi": None, "java / c": None})
            continue
        for environ, per_mpi in same.groupby("environ"):
            value = per_mpi["value"].median()
            ratio = row["java (Mop/s)"] / value if value else None
            out.append({**row, "c (Mop/s)": value, "c_mpi": environ, "java / c": ratio})
    return pd.DataFrame(out, columns=NPB_JAVA_COLUMNS)


GADGET2 = "Gadget2Check"
GADGET2_COLUMNS = ["site", "environ", "problem", "ranks", "wall_time", "efficiency", "runs"]
#: The study's row: its Gadget-2 run was a cluster formation; its timings are not in this
#: repository, so none is quoted (a site runs it with Gadget2Check's param_file, problem).
GADGET2_SEED = {"site": "the study", "problem": "cluster formation"}


def gadget2_scaling(figures):
    """One row per site, toolchain, problem and rank count: the medians over runs of the wall
    time (s) and the efficiency against one rank; the study's row last."""
    rows = figures[figures["check"] == GADGET2]
    if rows.empty:
        return pd.DataFrame(columns=GADGET2_COLUMNS)
    rows = with_vars(rows, "problem", "num_ranks")
    out = []
    keys = ["site", "environ", "problem", "num_ranks"]
    for (site, environ, problem, ranks), group in rows.groupby(keys):
        per_run = group.pivot_table(index="run", columns="figure", values="value")
        out.append(
            {
                "site": site,
                "environ": environ,
                "problem": problem,
                "ranks": int(ranks),
                "wall_time": per_run["wall_time"].median() if "wall_time" in per_run else None,
                "efficiency": per_run["efficiency"].median() if "efficiency" in per_run else None,
                "runs": len(per_run),
            }
        )
    out.append(GADGET2_SEED)
    return pd.DataFrame(out, columns=GADGET2_COLUMNS)
