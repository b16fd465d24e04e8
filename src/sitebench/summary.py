"""After a run: each figure against its reference and against the earlier runs."""

import pandas as pd

from sitebench import figures
from sitebench.compare import KEYS, num, robust_sigma
from sitebench.results import load_run, load_runs


def _reference(row):
    ref = row["reference"]
    if ref is None or pd.isna(ref):
        return "no reference"
    lower = (
        "-inf" if row["lower"] is None or pd.isna(row["lower"]) else f"{100 * row['lower']:+.0f}%"
    )
    upper = (
        "+inf" if row["upper"] is None or pd.isna(row["upper"]) else f"{100 * row['upper']:+.0f}%"
    )
    return f"{num(ref)} ({lower}/{upper})"


def summarize(run_path, root=None):
    """A text table of the run at ``run_path`` beside its site's earlier runs."""
    run = load_run(run_path)
    now = figures.frame([run])
    earlier = [r for r in load_runs(run.site, root) if r.name < run.name]
    history = figures.frame(earlier)
    lines = [
        f"run {run.site}/{run.name}: {len(now)} figures; "
        f"{len(earlier)} earlier run(s) of {run.site}"
    ]
    if now.empty:
        return "\n".join(lines + ["(no performance figures: see ReFrame's output above)"])
    stats = history.groupby(KEYS)["value"].agg(
        ["median", "count", lambda s: robust_sigma(list(s))]
    )
    stats.columns = ["median", "count", "noise"]
    previous = history.sort_values("run").groupby(KEYS)["value"].last()
    table = []
    for _, row in now.iterrows():
        key = tuple(row[k] for k in KEYS)
        prev = previous.get(key)
        med = stats["median"].get(key)
        table.append(
            {
                "check": row["check"],
                "params": row["params"],
                "figure": row["figure"],
                "value": f"{num(row['value'])} {row['unit']}",
                "reference": _reference(row),
                "result": row["result"],
                "previous": "-" if prev is None else f"{num(prev)} (x{row['value'] / prev:.3f})",
                "median of earlier": (
                    "-"
                    if med is None
                    else f"{num(med)} (x{row['value'] / med:.3f}, "
                    f"n={int(stats['count'].get(key))})"
                ),
            }
        )
    lines.append(pd.DataFrame(table).to_string(index=False))
    return "\n".join(lines)
