"""Regression detection: a run's figures against the site's recent history.

Static references say whether a figure is acceptable; a drift says it changed. For each
figure of a run (same check, parameters, problem size, partition, toolchain and CPU as in the
history: MPICH's latency is never judged against Open MPI's),
the history is the site's ``history`` previous runs; where the site's figures are per host
(``local``, and partitions with ``extras['host_references']``: the store's ``host``), only the
previous runs of the same host (:mod:`sitebench.sites.host`), so a newcomer's machine is never
judged against another machine's history. Rule (stated): the robust z-score
z = (value - median) / sigma, sigma = 1.4826 x MAD of the history (floored at
SIGMA_FLOOR x |median|, so a history of identical values does not flag the last digit);
a drift is |z| > Z_LIMIT = 3.5 (Iglewicz and Hoaglin's cut-off for the modified z-score),
judged only with at least MIN_HISTORY values. Its direction follows the unit: times and
latencies are worse upwards, rates downwards. A drift is flagged even when the figure is
still inside its static tolerance (``result`` pass) - that is the point.

Figures measured while other work took the machine's CPU (the store's ``disturbed``) are left
out by default, from the history and as the judged figure: a disturbed history would move
the median and widen the noise, and a disturbed figure says nothing of the machine. Such a
figure of the run is "disturbed, not judged"; ``include_disturbed`` keeps them all.
"""

import json

import pandas as pd

from sitebench.results import figures, store
from sitebench.results.compare import num
from sitebench.common.errors import SitebenchError
from sitebench.results.propose import (
    LOWER_IS_BETTER_UNITS,
    MAD_TO_SIGMA,
    count_disturbed,
    disturbed_left_out,
)

Z_LIMIT = 3.5
MIN_HISTORY = 5
SIGMA_FLOOR = 0.005
#: The verdict of a disturbed figure of the judged run, left out of the drift check.
DISTURBED = "disturbed, not judged"
COLUMNS = [
    "check",
    "params",
    "problem",
    "partition",
    "environ",
    "figure",
    "unit",
    "value",
    "result",
    "history_n",
    "history_median",
    "z",
    "drift",
    "disturbed",
    "foreign_cores",
]


def drifts(con, site, run=None, history=20, include_disturbed=False):
    """Every figure of ``run`` (default: the newest) with its z-score and drift; disturbed
    figures are left out unless ``include_disturbed`` (see the module's docstring)."""
    query = "SELECT run FROM runs WHERE site = ? ORDER BY run"
    runs = [r for (r,) in con.execute(query, [site]).fetchall()]
    if not runs:
        raise SitebenchError(
            f"site {site!r} has no readable runs under results/",
            f"run the suite (./sitebench run --site {site}) first, or check the name",
        )
    run = run or runs[-1]
    if run not in runs:
        raise SitebenchError(
            f"run {site}/{run} is not among the readable runs of {site}",
            f"list the runs with `ls results/{site}`",
        )
    earlier = runs[: runs.index(run)]
    hosts = [
        h
        for (h,) in con.execute(
            "SELECT DISTINCT host FROM figures WHERE site = ? AND run = ? AND host IS NOT NULL",
            [site, run],
        ).fetchall()
    ]
    if hosts:
        same = {
            r
            for (r,) in con.execute(
                "SELECT DISTINCT run FROM figures WHERE site = ? "
                "AND host IN (SELECT unnest(?::VARCHAR[]))",
                [site, hosts],
            ).fetchall()
        }
        earlier = [r for r in earlier if r in same]
    earlier = earlier[-history:]
    df = con.execute(
        f"""
        WITH past AS (
            SELECT "check", params, problem, partition, environ, figure, arch, host,
                median(value) AS m, mad(value) AS mad, count(*) AS n
            FROM figures
            WHERE site = ? AND run IN (SELECT unnest(?::VARCHAR[]))
              AND isfinite(value) AND figure <> 'job_wall' AND (? OR disturbed IS NOT TRUE)
            GROUP BY ALL
        )
        SELECT now."check", now.params, now.problem, now.partition, now.environ, now.figure,
            now.unit, now.value,
            now.result, coalesce(past.n, 0) AS history_n, past.m AS history_median,
            (now.value - past.m) / greatest({MAD_TO_SIGMA} * past.mad,
                                            {SIGMA_FLOOR} * abs(past.m)) AS z,
            coalesce(now.disturbed, false) AS disturbed, now.foreign_cores
        FROM figures now LEFT JOIN past
            ON now."check" = past."check" AND now.params = past.params
            AND now.figure = past.figure AND now.partition IS NOT DISTINCT FROM past.partition
            AND now.environ IS NOT DISTINCT FROM past.environ
            AND now.arch IS NOT DISTINCT FROM past.arch
            AND now.problem IS NOT DISTINCT FROM past.problem
            AND now.host IS NOT DISTINCT FROM past.host
        WHERE now.site = ? AND now.run = ? AND isfinite(now.value) AND now.figure <> 'job_wall'
        ORDER BY ALL
        """,
        [site, earlier, include_disturbed, site, run],
    ).df()

    def verdict(row):
        if row["disturbed"] and not include_disturbed:
            return DISTURBED
        if row["history_n"] < MIN_HISTORY or row["z"] != row["z"]:
            return "history too short"
        if abs(row["z"]) <= Z_LIMIT:
            return ""
        up_is_worse = row["unit"] in LOWER_IS_BETTER_UNITS
        return "worse" if (row["z"] > 0) == up_is_worse else "better"

    df["drift"] = df.apply(verdict, axis=1) if len(df) else []
    df = df.reindex(columns=COLUMNS)
    df.attrs["hosts"] = hosts
    # What was left out, from the history and of the run itself (said in one line).
    df.attrs["disturbed_left_out"] = (
        0 if include_disturbed else count_disturbed(con, site, [*earlier, run])
    )
    return run, earlier, df


def check_site(
    site,
    run=None,
    history=20,
    results_root=None,
    warn=None,
    progress=None,
    include_disturbed=False,
):
    con = store.open_store([site], results_root, warn, progress)
    return drifts(con, site, run, history, include_disturbed)


def _where(row):
    """``partition%toolchain`` (as a compare side names them), or the partition alone."""
    environ = row.get("environ")
    return f"{row['partition']}%{environ}" if isinstance(environ, str) else str(row["partition"])


def render(site, run, earlier, df, fmt="table"):
    flagged = df[df["drift"].isin(["worse", "better"])]
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "json":
        return json.dumps(
            {
                "site": site,
                "run": run,
                "history": earlier,
                "rule": f"|robust z| > {Z_LIMIT} against >= {MIN_HISTORY} earlier runs",
                "disturbed_left_out": df.attrs.get("disturbed_left_out", 0),
                "rows": json.loads(df.to_json(orient="records")),
            },
            indent=2,
        )
    judged = int((~df["drift"].isin(["history too short", DISTURBED])).sum())
    same = " of the same host" if df.attrs.get("hosts") else ""
    lines = [
        f"{site}/{run} against its {len(earlier)} earlier run(s){same}: {judged} of {len(df)} "
        f"figures judged, {len(flagged)} drifted (|robust z| > {Z_LIMIT})"
    ]
    left_out = df.attrs.get("disturbed_left_out", 0)
    if left_out:
        lines.append(disturbed_left_out(left_out))
    lines += _not_judged_lines(df[df["drift"] == DISTURBED])
    for _, row in flagged.iterrows():
        lines.append(
            f"  {row['drift'].upper():6} {row['check']} {row['params']} "
            f"{figures.shown_problem(row['problem'])} "
            f"[{_where(row)}] {row['figure']}: {num(row['value'])} {row['unit']} vs "
            f"median {num(row['history_median'])} of {row['history_n']} (z = {row['z']:+.1f}; "
            f"static check: {row['result']})"
        )
    return "\n".join(lines)


def _not_judged_lines(disturbed):
    """One line per disturbed case of the run: its figures, reported rather than flagged."""
    cases = {}
    for _, row in disturbed.iterrows():
        case = cases.setdefault((row["check"], row["params"], _where(row)), [[], None])
        case[0].append(row["figure"])
        case[1] = row["foreign_cores"] if pd.notna(row["foreign_cores"]) else case[1]
    lines = []
    for (check, params, where), (names, cores) in sorted(cases.items()):
        took = "" if cores is None else f"; other work took {cores:.2f} cores"
        # A monitored case has 40-odd figures: the line names a few and counts the rest.
        shown = names if len(names) <= NAMED_FIGURES else names[: NAMED_FIGURES - 1]
        more = f" and {len(names) - len(shown)} more" if len(shown) < len(names) else ""
        lines.append(
            f"  {DISTURBED.upper()}: {check} {params} [{where}] "
            f"({', '.join(shown)}{more}{took})"
        )
    return lines


#: Figures a "disturbed, not judged" line names before it counts the rest.
NAMED_FIGURES = 6
