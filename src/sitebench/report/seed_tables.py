"""The seed studies' tables for the Jacobi model and the page-size loss, from the figure rows.

:func:`jacobi_rows` is the seed report's table (N, k, C[MB], Tc/s, MLUP/s est, MLUP/s real,
diff) per site, run and mapping, built by :mod:`sitebench.results.jacobi_model` from the
site's own OSU figures; :func:`page_loss` is the Blue Gene slides' table: the performance
lost with small (4 KiB) pages against large (2 MiB) ones, in %, per benchmark.
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
