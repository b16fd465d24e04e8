"""After a run: each figure against its reference and against the site's earlier runs.

The earlier runs are read from the results store (one query, however long the history):
those of the same problem size (the store's ``problem``) and toolchain (``environ``) and,
where the site's figures are per host (``local``), of the same host only. Where the site's
references belong to another host (or name none), the summary says so in one line, and how
to make this machine's.
"""

import pandas as pd

from sitebench.results import figures, store
from sitebench.sites import host
from sitebench.results.compare import num
from sitebench.results.rundirs import load_run


def _reference(row):
    ref = row["reference"]
    if ref is None or pd.isna(ref):
        return "no reference"
    lower = "-inf" if pd.isna(row["lower"]) else f"{100 * row['lower']:+.0f}%"
    upper = "+inf" if pd.isna(row["upper"]) else f"{100 * row['upper']:+.0f}%"
    return f"{num(ref)} ({lower}/{upper})"


def references_note(run):
    """The one line saying why no static reference applied, or ''.

    From the cases' logged ``host_fingerprint`` (set where the partition's references are per
    host) and ``references_host`` (the ``$host`` of the references file)."""
    for attempt in run.report.get("runs", []):
        for case in attempt.get("testcases", []):
            here = case.get("host_fingerprint")
            if not here or case.get("fixture") or case.get("references_host") == here:
                continue
            prov = run.provenance or {}
            fp = prov.get("host_fingerprint") or {"id": here}
            return host.references_verdict(run.site, prov.get("references_made_on"), fp)[1]
    return ""


def disturbed_cases(run):
    """``["StreamCheck %threads=1 (1.62 cores)", ...]``: the cases other work disturbed
    (sitebench/run/disturbance.py), from their logged ``disturbed`` and ``foreign_cores``."""
    return [
        f"{case['name']} ({case.get('foreign_cores', 0):.2f} cores)"
        for attempt in run.report.get("runs", [])
        for case in attempt.get("testcases", [])
        if case.get("disturbed")
    ]


def disturbed_note(run):
    """The one line naming the cases other work disturbed, or ''."""
    hit = disturbed_cases(run)
    if not hit:
        return ""
    return (
        f"{len(hit)} case(s) disturbed: other work took CPU while they ran, so their figures "
        f"are not this machine's alone: {', '.join(hit)}"
    )


def summarize(run_path, root=None):
    """A text table of the run at ``run_path`` beside its site's earlier runs."""
    run = load_run(run_path)
    con = store.open_store([run.site], root)
    # Without "started" (not shown): DuckDB 2.0's .df() turns a TIMESTAMPTZ column into
    # pandas with DataFrame.drop(inplace=True), which pandas 3.1 deprecates (Pandas4Warning).
    now = con.execute(
        "SELECT * EXCLUDE (started) FROM figures WHERE site = ? AND run = ? "
        "AND figure <> 'job_wall' "
        'ORDER BY "check", params, partition, figure',
        [run.site, run.name],
    ).df()
    earlier = con.execute(
        """
        SELECT "check", params, problem, partition, environ, host, figure, median(value) AS median,
            count(*) AS n, arg_max(value, run) AS previous
        FROM figures
        WHERE site = ? AND run < ? AND figure <> 'job_wall' AND isfinite(value)
            AND disturbed IS NOT TRUE
        GROUP BY ALL
        """,
        [run.site, run.name],
    ).df()
    # As the drift check and the proposed references: disturbed figures are not the
    # machine's alone, so "previous" and "median of earlier" leave them out, saying so.
    left_out = con.execute(
        "SELECT count(*) FROM figures WHERE site = ? AND run < ? AND figure <> 'job_wall' "
        "AND disturbed",
        [run.site, run.name],
    ).fetchone()[0]
    hosts = sorted({h for h in now["host"] if isinstance(h, str)})
    if hosts:
        n_earlier = con.execute(
            "SELECT count(DISTINCT run) FROM figures WHERE site = ? AND run < ? "
            "AND host IN (SELECT unnest(?::VARCHAR[]))",
            [run.site, run.name, hosts],
        ).fetchone()[0]
    else:
        n_earlier = con.execute(
            "SELECT count(*) FROM runs WHERE site = ? AND run < ?", [run.site, run.name]
        ).fetchone()[0]
    same = " of this host" if hosts else ""
    lines = [
        f"run {run.site}/{run.name}: {len(now)} figures; "
        f"{n_earlier} earlier run(s) of {run.site}{same}"
    ]
    for note in (references_note(run), disturbed_note(run)):
        if note:
            lines.append(note)
    if left_out:
        lines.append(
            f"{left_out} disturbed figure(s) of earlier runs left out of 'previous' and "
            f"'median of earlier'"
        )
    if now.empty:
        return "\n".join(lines + ["(no performance figures: see ReFrame's output above)"])
    # Each toolchain against its own earlier figures (MPICH's latency is not Open MPI's).
    keys = ["check", "params", "problem", "partition", "environ", "host", "figure"]
    # NULL (site-wide) host and problem must match each other in the merge.
    blanks = {"host": "", "problem": "", "environ": ""}
    table = now.fillna(blanks).merge(earlier.fillna(blanks), on=keys, how="left")
    shown = pd.DataFrame(
        {
            "check": table["check"],
            "params": table["params"],
            "problem": [figures.shown_problem(p) for p in table["problem"]],
            "figure": table["figure"],
            "value": [f"{num(v)} {u}" for v, u in zip(table["value"], table["unit"])],
            "reference": table.apply(_reference, axis=1),
            "result": table["result"],
            "previous": [
                "-" if pd.isna(p) else f"{num(p)} (x{v / p:.3f})" if p else num(p)
                for v, p in zip(table["value"], table["previous"])
            ],
            "median of earlier": [
                "-" if pd.isna(m) else f"{num(m)} (x{v / m:.3f}, n={int(n)})" if m else num(m)
                for v, m, n in zip(table["value"], table["median"], table["n"])
            ],
        }
    )
    if not shown["problem"].astype(bool).any():
        shown = shown.drop(columns="problem")
    if now["environ"].nunique() > 1:
        shown.insert(2, "toolchain", table["environ"])
    if now["partition"].nunique() > 1:
        shown.insert(2, "partition", table["partition"])
    lines.append(shown.to_string(index=False))
    return "\n".join(lines)
