"""After a run: each figure against its reference and against the site's earlier runs.

The earlier runs are read from the results store (one query, however long the history).
"""

import pandas as pd

from sitebench.results import store
from sitebench.results.compare import num
from sitebench.results.rundirs import load_run


def _reference(row):
    ref = row["reference"]
    if ref is None or pd.isna(ref):
        return "no reference"
    lower = "-inf" if pd.isna(row["lower"]) else f"{100 * row['lower']:+.0f}%"
    upper = "+inf" if pd.isna(row["upper"]) else f"{100 * row['upper']:+.0f}%"
    return f"{num(ref)} ({lower}/{upper})"


def summarize(run_path, root=None):
    """A text table of the run at ``run_path`` beside its site's earlier runs."""
    run = load_run(run_path)
    con = store.open_store([run.site], root)
    now = con.execute(
        "SELECT * FROM figures WHERE site = ? AND run = ? AND figure <> 'job_wall' "
        'ORDER BY "check", params, partition, figure',
        [run.site, run.name],
    ).df()
    earlier = con.execute(
        """
        SELECT "check", params, partition, figure, median(value) AS median,
            count(*) AS n, arg_max(value, run) AS previous
        FROM figures
        WHERE site = ? AND run < ? AND figure <> 'job_wall' AND isfinite(value)
        GROUP BY ALL
        """,
        [run.site, run.name],
    ).df()
    n_earlier = con.execute(
        "SELECT count(*) FROM runs WHERE site = ? AND run < ?", [run.site, run.name]
    ).fetchone()[0]
    lines = [
        f"run {run.site}/{run.name}: {len(now)} figures; "
        f"{n_earlier} earlier run(s) of {run.site}"
    ]
    if now.empty:
        return "\n".join(lines + ["(no performance figures: see ReFrame's output above)"])
    keys = ["check", "params", "partition", "figure"]
    table = now.merge(earlier, on=keys, how="left")
    shown = pd.DataFrame(
        {
            "check": table["check"],
            "params": table["params"],
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
    if now["partition"].nunique() > 1:
        shown.insert(2, "partition", table["partition"])
    lines.append(shown.to_string(index=False))
    return "\n".join(lines)
