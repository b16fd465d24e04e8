"""Compare two sides (sites, partitions, toolchains, single runs or time ranges) figure by
figure.

A side is written ``SITE[:PARTITION][%TOOLCHAIN][/RUN]`` or
``SITE[:PARTITION][%TOOLCHAIN]@SINCE..UNTIL`` (dates or times in ISO 8601, UTC; either end
may be left out: ``local@2026-11-01..``).

A toolchain is a site's compiler set and MPI, run as the ReFrame programming environment of
that name (the store's ``environ``: ``gcc-mpich``, ``gcc-openmpi``; ``gnu`` in runs made before
sites declared toolchains). A side naming one keeps only the figures of that environment, and
naming one its runs never used is an error that lists those they used. The environment is not
part of the key: figures are matched on check, parameters, problem size and figure, so
``local%gcc-mpich`` against ``local%gcc-openmpi`` gives a verdict per figure. A side naming no
toolchain takes the figures of every environment its runs used, as before toolchains; when
those are several, a caveat says so.

For each check, parameter set, problem size and figure: the number of runs, median and
interquartile range (IQR) of each side, the ratio of medians B/A, and whether the difference
is beyond the run-to-run noise. Test (stated): the two-sided Mann-Whitney U test (rank-sum test; no
assumption on the shape of the noise), exact where neither side has ties and both have at
most 25 values, else its normal approximation with the tie correction; a difference is
beyond noise when p < ALPHA = 0.01. When even the most extreme ranking could not reach
that level (e.g. 3 runs against 3: the smallest possible p is 0.1), the verdict is
"too few runs" rather than a "no" that would mean nothing.

The problem size (the store's ``problem``: HPL's N, NB and grid, NPB's class, STREAM's array
size...) is part of the key: a figure present on both sides but with no problem size in
common is not compared; it is listed as such (``beyond_noise`` "not compared: no common
problem size", the sizes of each side in ``problem``) instead of given a ratio. A figure whose
median is 0 on either side (a time under its program's printed resolution) gets no ratio.

A side's figures measured while other work took the machine's CPU (the store's ``disturbed``)
are kept, and counted per side (``disturbed_a``, ``disturbed_b``): the table marks the side's
cell ("K disturbed"), so a ratio resting on them is read with care.

The figures come from the results store (:mod:`sitebench.results.store`, DuckDB over Parquet).
"""

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from sitebench.common import paths
from sitebench.results import figures, store
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.results.exchange import accepted_run_names
from sitebench.results.rundirs import run_dirs

ALPHA = 0.01
EXACT_MAX_N = 25
KEYS = ["check", "params", "problem", "figure"]
NOT_COMPARED = "not compared: no common problem size"
COLUMNS = KEYS + [
    "unit",
    "n_a",
    "median_a",
    "iqr_a",
    "n_b",
    "median_b",
    "iqr_b",
    "ratio",
    "p_value",
    "beyond_noise",
    "disturbed_a",
    "disturbed_b",
]
_SPEC = re.compile(
    r"^(?P<site>[^:/@%]+)(?::(?P<partition>[^/@%]+))?(?:%(?P<toolchain>[^/@%]+))?"
    r"(?:/(?P<run>[^@%]+)|@(?P<since>[^.]*)\.\.(?P<until>.*))?$"
)


@dataclass
class Side:
    """One side of a comparison, parsed from its spec and checked against results/."""

    label: str
    site: str
    partition: str = None
    run: str = None
    since: pd.Timestamp = None
    until: pd.Timestamp = None
    toolchain: str = None  # the ReFrame environment (the store's ``environ``) kept

    @classmethod
    def parse(cls, spec, results_root=None):
        match = _SPEC.match(spec)
        if not match:
            raise SitebenchError(
                f"cannot read the comparison side {spec!r}",
                "write SITE, SITE:PARTITION, SITE%TOOLCHAIN, SITE/RUN or SITE@SINCE..UNTIL, "
                "or combine them in that order: SITE:PARTITION%TOOLCHAIN/RUN or "
                "SITE:PARTITION%TOOLCHAIN@SINCE..UNTIL "
                "(e.g. local%gcc-mpich@2026-11-01..2026-11-15)",
            )
        site = check_name("site", match["site"])
        side = cls(
            label=spec,
            site=site,
            partition=match["partition"],
            toolchain=match["toolchain"],
            run=match["run"],
        )
        if side.partition:
            check_name("partition", side.partition)
        if side.toolchain:
            check_name("toolchain", side.toolchain)
        if match["since"] is not None:
            side.since = _when(match["since"], spec)
            side.until = _when(match["until"], spec)
        runs = {p.name for p in run_dirs(site, results_root)} | accepted_run_names(
            site, results_root
        )
        site_dir = Path(results_root or paths.results_dir()) / site
        if site_dir.is_symlink():
            raise SitebenchError(
                f"results/{site} is a symbolic link: runs are read from real directories only",
                f"copy the site's runs into results/{site}/ (or pull them) instead of linking",
            )
        if not runs:
            raise SitebenchError(
                f"site {site!r} has no runs under results/ nor accepted from the exchange",
                "run `./sitebench run --site <site>` (or ./sitebench pull) first, or check "
                "the name",
            )
        if side.run:
            check_name("run", side.run)
            if side.run not in runs:
                raise SitebenchError(
                    f"run {spec!r} does not exist under results/{site}/ nor in the exchange",
                    f"list the runs with `ls results/{site}` (./sitebench pull brings those "
                    "of other sites)",
                )
        return side

    def with_toolchain(self, toolchain):
        """This side's spec naming ``toolchain`` instead (None: none)."""
        spec = self.label.replace(f"%{self.toolchain}", "", 1) if self.toolchain else self.label
        cut = min((i for i in (spec.find("/"), spec.find("@")) if i >= 0), default=len(spec))
        return spec[:cut] + (f"%{toolchain}" if toolchain else "") + spec[cut:]

    def where(self, toolchain=True):
        """SQL condition and parameters selecting this side's figures (``toolchain=False``:
        of every environment of the side's runs)."""
        cond, params = ["site = ?"], [self.site]
        chosen = [("partition", self.partition), ("run", self.run)]
        if toolchain:
            chosen.append(("environ", self.toolchain))
        for column, value in chosen:
            if value:
                cond.append(f"{column} = ?")
                params.append(value)
        if self.since is not None:
            cond.append("started >= ?")
            params.append(self.since.to_pydatetime())
        if self.until is not None:
            cond.append("started < ?")
            params.append(self.until.to_pydatetime())
        return " AND ".join(cond), params


def _when(text, spec):
    if not text:
        return None
    stamp = pd.to_datetime(text, utc=True, errors="coerce")
    if pd.isna(stamp):
        raise SitebenchError(
            f"{text!r} in {spec!r} is not a date or time",
            "write ISO 8601 in UTC, e.g. 2026-11-01 or 2026-11-01T02:00",
        )
    return stamp


def query(con, a_where, b_where, job_wall=False):
    """Per check, parameters and figure: n, median, IQR of each side, and the rank sum of
    side A with the tie term sum(t^3 - t) for the U test, computed in DuckDB."""
    (cond_a, par_a), (cond_b, par_b) = a_where, b_where
    keys = '"check", params, problem, figure'
    wall = "" if job_wall else "AND figure <> 'job_wall'"
    sql = f"""
    WITH sel AS (
        SELECT false AS b, {keys}, unit, value, disturbed FROM figures
        WHERE {cond_a} AND isfinite(value) {wall}
        UNION ALL
        SELECT true AS b, {keys}, unit, value, disturbed FROM figures
        WHERE {cond_b} AND isfinite(value) {wall}
    ), keyed AS (
        -- One 64-bit key per figure: grouping and ranking on it instead of four strings
        -- (6x faster over 5 years of two sites; two of a thousand figures sharing a hash:
        -- about 3e-14).
        SELECT hash({keys}) AS k, * FROM sel
    ), stats AS (
        SELECT k, any_value("check") AS "check", any_value(params) AS params,
            any_value(problem) AS problem, any_value(figure) AS figure,
            any_value(unit) AS unit,
            count(*) FILTER (NOT b) AS n_a,
            quantile_cont(value, [0.25, 0.5, 0.75]) FILTER (NOT b) AS q_a,
            count(*) FILTER (b) AS n_b,
            quantile_cont(value, [0.25, 0.5, 0.75]) FILTER (b) AS q_b,
            count(*) FILTER (NOT b AND disturbed) AS disturbed_a,
            count(*) FILTER (b AND disturbed) AS disturbed_b
        FROM keyed GROUP BY k
        HAVING count(*) FILTER (NOT b) > 0 AND count(*) FILTER (b) > 0
    ), tied AS (
        -- Equal values make a tie of size t; t_a of them are side A's.
        SELECT k, value, count(*) AS t, count(*) FILTER (NOT b) AS t_a
        FROM keyed GROUP BY k, value
    ), ranked AS (
        -- A tie ending at rank "upto" shares the mid-rank upto - (t - 1) / 2.
        SELECT k, t, t_a,
            sum(t) OVER (PARTITION BY k ORDER BY value ROWS UNBOUNDED PRECEDING) AS upto
        FROM tied
    ), u AS (
        SELECT k, sum(t_a * (upto - (t - 1) / 2.0)) AS rank_sum_a, sum(t * t * t - t) AS ties
        FROM ranked GROUP BY k
    )
    SELECT {keys}, unit, n_a, q_a[2] AS median_a, q_a[3] - q_a[1] AS iqr_a,
        n_b, q_b[2] AS median_b, q_b[3] - q_b[1] AS iqr_b, rank_sum_a, ties,
        disturbed_a, disturbed_b
    FROM stats JOIN u USING (k)
    ORDER BY "check", params, problem, figure
    """
    return con.execute(sql, par_a + par_b).df()


def not_compared(con, a_where, b_where, job_wall=False):
    """Figures (check, parameters, figure) on both sides that share no problem size: one row
    each, ``problem`` naming the sizes of A and of B, no statistics."""
    wall = "" if job_wall else "AND figure <> 'job_wall'"
    sizes = []
    for cond, params in (a_where, b_where):
        found = {}
        for check, par, figure, problem in con.execute(
            f'SELECT DISTINCT "check", params, figure, problem FROM figures '
            f"WHERE {cond} AND isfinite(value) {wall}",
            params,
        ).fetchall():
            found.setdefault((check, par, figure), set()).add(problem)
        sizes.append(found)
    rows = []
    for key in sorted(sizes[0].keys() & sizes[1].keys()):
        a, b = sizes[0][key], sizes[1][key]
        if a & b:
            continue
        shown = [", ".join(sorted(figures.shown_problem(p) or "-" for p in s)) for s in (a, b)]
        rows.append(
            {
                "check": key[0],
                "params": key[1],
                "problem": f"A: {shown[0]} | B: {shown[1]}",
                "figure": key[2],
                "beyond_noise": NOT_COMPARED,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


@lru_cache(maxsize=None)
def _u_counts(n_a, n_b):
    """Number of orderings giving each U (no ties), by the classic recursion."""
    # f[i][j] = counts of U for i values against j values; U ranges 0..i*j.
    f = [[None] * (n_b + 1) for _ in range(n_a + 1)]
    for i in range(n_a + 1):
        for j in range(n_b + 1):
            if i == 0 or j == 0:
                f[i][j] = np.zeros(i * j + 1)
                f[i][j][0] = 1
                continue
            counts = np.zeros(i * j + 1)
            counts[j:] += f[i - 1][j]  # the largest value is from A: it beats all j of B
            counts[: (i * (j - 1)) + 1] += f[i][j - 1]
            f[i][j] = counts
    return f[n_a][n_b]


def _exact_p(u, n_a, n_b):
    counts = _u_counts(n_a, n_b)
    total = counts.sum()
    low = min(u, n_a * n_b - u)
    return min(1.0, 2 * counts[: int(math.floor(low)) + 1].sum() / total)


def u_variance(n_a, n_b, ties):
    """Variance of U under the null hypothesis, corrected for ties (sum of t^3 - t)."""
    n = n_a + n_b
    return n_a * n_b / 12 * ((n + 1) - ties / (n * (n - 1)))


def _normal_p(u, n_a, n_b, ties):
    var = u_variance(n_a, n_b, ties)
    if var <= 0:
        return 1.0  # every value equal: nothing differs
    z = (abs(u - n_a * n_b / 2) - 0.5) / math.sqrt(var)  # continuity-corrected
    return math.erfc(max(z, 0) / math.sqrt(2))


def p_value(rank_sum_a, n_a, n_b, ties):
    """Two-sided Mann-Whitney p-value from side A's rank sum."""
    u = rank_sum_a - n_a * (n_a + 1) / 2
    if ties == 0 and n_a <= EXACT_MAX_N and n_b <= EXACT_MAX_N:
        return _exact_p(u, n_a, n_b)
    return _normal_p(u, n_a, n_b, ties)


def smallest_p(n_a, n_b):
    """The smallest p any ranking of n_a against n_b values can give (exact test)."""
    if n_a + n_b <= 2 * EXACT_MAX_N:
        return 2 / math.comb(n_a + n_b, n_a)
    # Through log-gamma: the exact binomial of 1,825 against 1,825 runs is a 1,100-digit
    # integer (3 ms a figure); this p is far below ALPHA anyway.
    return 2 * math.exp(math.lgamma(n_a + 1) + math.lgamma(n_b + 1) - math.lgamma(n_a + n_b + 1))


def verdicts(df):
    """Add ratio, p_value and beyond_noise to a :func:`query` frame."""
    df = df.copy()
    # A median of 0 on either side has no ratio: it is under the figure's printed resolution
    # (NPB class S's IS prints "Time in seconds = 0.00"), and B/A = 0 would read as infinitely
    # faster.
    both = (df["median_a"] != 0) & (df["median_b"] != 0)
    df["ratio"] = (df["median_b"] / df["median_a"]).where(both)
    df["p_value"] = [
        p_value(r, int(na), int(nb), t)
        for r, na, nb, t in zip(df["rank_sum_a"], df["n_a"], df["n_b"], df["ties"])
    ]
    df["beyond_noise"] = [
        "too few runs" if smallest_p(int(na), int(nb)) >= ALPHA else ("yes" if p < ALPHA else "no")
        for na, nb, p in zip(df["n_a"], df["n_b"], df["p_value"])
    ]
    return df.reindex(columns=COLUMNS)


def compare(a, b, results_root=None, job_wall=False, warn=None, progress=None):
    """The comparison table of sides ``a`` and ``b`` (:class:`Side`), from the store."""
    con = store.open_store(sorted({a.site, b.site}), results_root, warn, progress)
    used = [toolchains(con, side) for side in (a, b)]
    for side, names in zip((a, b), used):
        check_toolchain(side, names)
    table = verdicts(query(con, a.where(), b.where(), job_wall))
    apart = not_compared(con, a.where(), b.where(), job_wall)
    if not apart.empty:
        table = pd.concat([table, apart], ignore_index=True) if len(table) else apart
    table.attrs["caveats"] = caveats(con, [a.site, b.site]) + [
        pooled
        for side, name, names in zip((a, b), "AB", used)
        for pooled in _pooled(side, name, names)
    ]
    return table


def toolchains(con, side):
    """The toolchains (environments) the side's runs have figures of, sorted."""
    cond, params = side.where(toolchain=False)
    found = con.execute(
        f"SELECT DISTINCT environ FROM figures WHERE {cond} AND environ IS NOT NULL", params
    ).fetchall()
    return sorted(name for (name,) in found)


def check_toolchain(side, names):
    """Raise when the side names a toolchain its runs never used."""
    if not side.toolchain or side.toolchain in names:
        return
    runs = side.with_toolchain(None)
    if not names:
        raise SitebenchError(
            f"toolchain {side.toolchain!r} was never used in the runs of {runs}: "
            "they have no figures at all",
            f"check the partition, run or dates of {side.label!r}",
        )
    raise SitebenchError(
        f"toolchain {side.toolchain!r} was never used in the runs of {runs}; "
        f"their toolchains: {', '.join(names)}",
        f"write one of them after '%', e.g. {side.with_toolchain(names[0])}, "
        "or leave the toolchain out to take all of them",
    )


def _pooled(side, name, names):
    if side.toolchain or len(names) < 2:
        return []
    return [
        f"side {name} ({side.label}) pools the figures of {len(names)} toolchains "
        f"({', '.join(names)}) as one; name one to compare them apart, e.g. "
        f"{side.with_toolchain(names[0])}"
    ]


def caveats(con, sites):
    """What a reader must know before trusting a ratio: emulated sites, for now."""
    emulated = con.execute(
        "SELECT DISTINCT site FROM runs WHERE site IN (SELECT unnest(?::VARCHAR[])) "
        "AND emulated ORDER BY site",
        [sorted(set(sites))],
    ).fetchall()
    return [
        f"site {site!r} runs under emulation (QEMU): its timings and rates mean nothing for "
        "speed; only builds and verification are real"
        for (site,) in emulated
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
            {
                "a": a_label,
                "b": b_label,
                "test": f"two-sided Mann-Whitney U, alpha {ALPHA}",
                "caveats": table.attrs.get("caveats", []),
                "rows": json.loads(table.to_json(orient="records")),
            },
            indent=2,
        )
    warnings = "".join(f"\nCAVEAT: {c}" for c in table.attrs.get("caveats", []))
    apart = table[table["beyond_noise"] == NOT_COMPARED]
    table = table[table["beyond_noise"] != NOT_COMPARED]
    if table.empty:
        head = f"no figure of the same problem size is present in both {a_label} and {b_label}"
        return head + _not_compared_lines(apart) + warnings

    def spread(median, iqr, n, disturbed):
        marked = f", {int(disturbed)} disturbed" if disturbed > 0 else ""
        if n > 1:
            return f"{num(median)} ±{num(iqr / 2)} (n={n}{marked})"
        return f"{num(median)} (n=1{marked})"

    shown = pd.DataFrame(
        {
            "check": table["check"],
            "params": table["params"],
            "problem": [figures.shown_problem(p) for p in table["problem"]],
            "figure": table["figure"],
            "unit": table["unit"],
            f"A: {a_label}": map(
                spread, table["median_a"], table["iqr_a"], table["n_a"], table["disturbed_a"]
            ),
            f"B: {b_label}": map(
                spread, table["median_b"], table["iqr_b"], table["n_b"], table["disturbed_b"]
            ),
            "B/A": [f"{r:.3f}" if pd.notna(r) else "-" for r in table["ratio"]],
            "p": [f"{p:.2g}" for p in table["p_value"]],
            "beyond noise": table["beyond_noise"],
        }
    )
    note = (
        f"\nmedian ±IQR/2 over runs; beyond noise: two-sided Mann-Whitney U test, p < {ALPHA:g}"
        " (exact for small samples without ties)"
    )
    if (table["disturbed_a"] > 0).any() or (table["disturbed_b"] > 0).any():
        note += (
            "\ndisturbed: of the side's runs, measured while other work took the machine's CPU "
            "(not the machine's alone; the drift check and references leave them out)"
        )
    if not shown["problem"].astype(bool).any():
        shown = shown.drop(columns="problem")
    return shown.to_string(index=False) + note + _not_compared_lines(apart) + warnings


def _not_compared_lines(apart):
    """One line per check and parameters whose figures share no problem size."""
    if apart.empty:
        return ""
    lines = ["", f"NOT COMPARED, no common problem size ({len(apart)} figures):"]
    for (check, params, problem), group in apart.groupby(
        ["check", "params", "problem"], sort=True
    ):
        lines.append(f"  {check} {params} ({', '.join(group['figure'])}): {problem}")
    return "\n".join(lines)
