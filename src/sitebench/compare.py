"""Compare two sides (sites or single runs) figure by figure.

For each check, parameter set and figure: the median of each side, the
number of runs behind it, the ratio B/A, and whether the difference exceeds
the run-to-run noise.

Noise criterion (robust, stated): the noise of a side is the robust relative
standard deviation of its run-to-run values, sigma = 1.4826 x MAD / median,
computed from the side's own runs when it has at least 3, and for a single
run from all stored runs of that run's site. The noise of a comparison is
the larger sigma of the two sides; a difference is beyond noise when
|B/A - 1| > 3 sigma. With fewer than 3 runs on either side (and its site),
the verdict is "unknown".
"""

import json
import math

import pandas as pd

from sitebench import figures
from sitebench.errors import SitebenchError
from sitebench.names import check_name
from sitebench.results import BadRun, load_run, load_runs, run_dirs

MIN_RUNS_FOR_NOISE = 3
NOISE_SIGMAS = 3.0
MAD_TO_SIGMA = 1.4826
KEYS = ["check", "params", "figure"]


class Side:
    """One side of a comparison: a whole site, or one run of a site."""

    def __init__(self, spec, root=None, warn=None, job_wall=False):
        site, _, run = spec.partition("/")
        self.label = spec
        self.site = check_name("site", site)
        self.site_runs = load_runs(self.site, root, warn)
        if run:
            check_name("run", run)
            matches = [p for p in run_dirs(self.site, root) if p.name == run]
            if not matches:
                raise SitebenchError(
                    f"run {spec!r} does not exist under results/{self.site}/",
                    f"list the runs with `ls results/{self.site}`",
                )
            try:
                self.runs = [load_run(matches[0])]
            except BadRun as err:
                raise SitebenchError(
                    str(err), "pick another run; this one is unreadable"
                ) from None
        else:
            if not run_dirs(self.site, root):
                raise SitebenchError(
                    f"site {self.site!r} has no runs under results/",
                    "run `./sitebench run --site <site>` first, or check the name",
                )
            self.runs = self.site_runs
        self.frame = figures.frame(self.runs, job_wall)
        # Values that measure the run-to-run noise of this side.
        self.noise_frame = (
            self.frame
            if len(self.runs) >= MIN_RUNS_FOR_NOISE
            else figures.frame(self.site_runs, job_wall)
        )


def robust_sigma(values):
    """1.4826 x MAD / median of ``values``; None with fewer than 3 values."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if len(values) < MIN_RUNS_FOR_NOISE:
        return None
    series = pd.Series(values)
    median = series.median()
    if median == 0:
        return None
    return MAD_TO_SIGMA * (series - median).abs().median() / abs(median)


def _stats(df):
    grouped = df.groupby(KEYS, dropna=False)
    return grouped.agg(median=("value", "median"), n=("value", "count"), unit=("unit", "first"))


def _noise(df):
    return df.groupby(KEYS, dropna=False)["value"].apply(lambda s: robust_sigma(list(s)))


def compare(a, b):
    """A DataFrame with one row per figure present on both sides."""
    left, right = _stats(a.frame), _stats(b.frame)
    table = left.add_suffix("_a").join(right.add_suffix("_b"), how="inner")
    if table.empty:
        return pd.DataFrame(
            columns=KEYS
            + ["unit", "n_a", "median_a", "n_b", "median_b", "ratio", "noise", "beyond_noise"]
        )
    noise = pd.concat(
        [_noise(a.noise_frame).rename("sa"), _noise(b.noise_frame).rename("sb")], axis=1
    )
    table = table.join(noise, how="left")
    table["noise"] = table[["sa", "sb"]].max(axis=1, skipna=True)
    table["ratio"] = table["median_b"] / table["median_a"]

    def verdict(row):
        if pd.isna(row["noise"]) or not math.isfinite(row["ratio"]):
            return "unknown"
        return "yes" if abs(row["ratio"] - 1) > NOISE_SIGMAS * row["noise"] else "no"

    table["beyond_noise"] = table.apply(verdict, axis=1)
    table = table.reset_index().rename(columns={"unit_a": "unit"})
    return table[
        KEYS + ["unit", "n_a", "median_a", "n_b", "median_b", "ratio", "noise", "beyond_noise"]
    ]


def num(value):
    """A figure as people read it: 23660, 85.72, 0.1234."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def render(table, a_label, b_label, fmt="table"):
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "json":
        return json.dumps(
            {"a": a_label, "b": b_label, "rows": json.loads(table.to_json(orient="records"))},
            indent=2,
        )
    if table.empty:
        return f"no figure is present in both {a_label} and {b_label}"
    shown = pd.DataFrame(
        {
            "check": table["check"],
            "params": table["params"],
            "figure": table["figure"],
            f"A: {a_label}": [
                f"{num(m)} {u} (n={n})"
                for m, u, n in zip(table["median_a"], table["unit"], table["n_a"])
            ],
            f"B: {b_label}": [
                f"{num(m)} (n={n})" for m, n in zip(table["median_b"], table["n_b"])
            ],
            "B/A": [f"{r:.3f}" for r in table["ratio"]],
            "noise": ["-" if pd.isna(s) else f"{100 * s:.1f}%" for s in table["noise"]],
            "beyond noise": table["beyond_noise"],
        }
    )
    note = (
        f"\nmedians over runs; noise = 1.4826 x MAD / median of run-to-run values; "
        f"beyond noise when |B/A - 1| > {NOISE_SIGMAS:g} x noise"
    )
    return shown.to_string(index=False) + note
