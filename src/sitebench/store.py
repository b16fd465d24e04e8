"""The query layer over ``results/``: every figure of every run in Parquet, queried with DuckDB.

``results/`` stays the truth and is never written here. The index lives in
``.sitebench/store/<site>/``: Parquet segments of figure rows (the columns of
:mod:`sitebench.figures`, plus ``job_wall``), and ``runs.json``, the runs already in it.
A run never changes once stored, so refreshing only reads the runs that are new since the
last refresh, writes them as one new segment (atomically: a temporary name, then a rename),
and merges the segments into one when there are more than ``MAX_SEGMENTS``. Unreadable runs
are reported and skipped (and tried again next time).
"""

import json
import os
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sitebench import figures, paths
from sitebench.results import BadRun, load_run, run_dirs

MAX_SEGMENTS = 8
SCHEMA = pa.schema(
    [
        ("site", pa.string()),
        ("run", pa.string()),
        ("started", pa.timestamp("s", tz="UTC")),
        ("check", pa.string()),
        ("params", pa.string()),
        ("figure", pa.string()),
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("reference", pa.float64()),
        ("lower", pa.float64()),
        ("upper", pa.float64()),
        ("result", pa.string()),
    ]
)


def store_dir():
    return Path(os.environ.get("SITEBENCH_STORE_DIR", paths.state_dir() / "store"))


def _table(rows):
    df = pd.DataFrame(rows, columns=[f.name for f in SCHEMA])
    df["started"] = pd.to_datetime(df["started"], utc=True, errors="coerce")
    for col in ("value", "reference", "lower", "upper"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False)


def _write_atomic(table, path):
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def refresh(site, results_root=None, store=None, warn=None):
    """Bring ``site``'s index up to date with its runs; return the number of new runs."""
    base = Path(store or store_dir()) / site
    base.mkdir(parents=True, exist_ok=True)
    known_file = base / "runs.json"
    known = set(json.loads(known_file.read_text())) if known_file.is_file() else set()
    rows, added = [], []
    for path in run_dirs(site, results_root):
        if path.name in known:
            continue
        try:
            run = load_run(path)
        except BadRun as err:
            if warn:
                warn(f"skipped {site}/{path.name}: {err}")
            continue
        rows.extend(figures.rows_of_run(run, job_wall=True))
        added.append(path.name)
    if added:
        segments = sorted(base.glob("seg-*.parquet"))
        number = int(segments[-1].stem.split("-")[1]) + 1 if segments else 0
        _write_atomic(_table(rows), base / f"seg-{number:06d}.parquet")
        # The runs list follows the segment: a crash between the two re-reads those runs,
        # and the duplicate rows are dropped at compaction (same run, check, params, figure).
        tmp = known_file.with_name(".runs.json.tmp")
        tmp.write_text(json.dumps(sorted(known | set(added))))
        tmp.replace(known_file)
        if len(segments) + 1 > MAX_SEGMENTS:
            compact(base)
    return len(added)


def compact(base):
    """Merge a site's segments into one (duplicates of a crashed refresh dropped)."""
    segments = sorted(Path(base).glob("seg-*.parquet"))
    if len(segments) < 2:
        return
    con = duckdb.connect()
    files = [str(p) for p in segments]
    merged = con.execute(
        "SELECT DISTINCT ON (run, check, params, figure) * FROM read_parquet(?)", [files]
    ).arrow()
    number = int(segments[-1].stem.split("-")[1]) + 1
    _write_atomic(merged, Path(base) / f"seg-{number:06d}.parquet")
    for path in segments:
        path.unlink()


def connect(store=None, sites=None):
    """A DuckDB connection with a view ``figures`` over the index (``sites``: only those)."""
    root = Path(store or store_dir())
    files = []
    for site_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if sites is None or site_dir.name in sites:
            files += [str(p) for p in sorted(site_dir.glob("seg-*.parquet"))]
    con = duckdb.connect()
    if files:
        con.execute(f"CREATE VIEW figures AS SELECT * FROM read_parquet({files!r})")
    else:
        con.execute(
            "CREATE VIEW figures AS SELECT * FROM (SELECT "
            + ", ".join(f"NULL::{_duck(f.type)} AS \"{f.name}\"" for f in SCHEMA)
            + ") WHERE false"
        )
    return con


def _duck(arrow_type):
    return {
        pa.string(): "VARCHAR",
        pa.float64(): "DOUBLE",
        pa.timestamp("s", tz="UTC"): "TIMESTAMPTZ",
    }[arrow_type]


#: Two sides differ beyond noise when the two-sided Mann-Whitney U test gives p below this.
ALPHA = 0.01
#: Fewer values than this on a side: no test (a single run says nothing about its noise).
MIN_N = 3


def side_filter(site, since=None, until=None, run=None):
    """SQL condition and parameters selecting one side of a comparison."""
    cond, params = ["site = ?"], [site]
    if run:
        cond.append("run = ?")
        params.append(run)
    if since:
        cond.append("started >= ?::TIMESTAMPTZ")
        params.append(since)
    if until:
        cond.append("started < ?::TIMESTAMPTZ")
        params.append(until)
    return " AND ".join(cond), params


def compare(con, a, b):
    """Per check, parameters and figure: n, median and IQR of each side, the ratio B/A and
    a two-sided Mann-Whitney U test (normal approximation, mid-ranks for ties).

    ``a``, ``b``: (condition, parameters) from :func:`side_filter`.
    """
    (cond_a, par_a), (cond_b, par_b) = a, b
    keys = "\"check\", params, figure"
    sql = f"""
    WITH sel AS (
        SELECT 0 AS side, {keys}, unit, value FROM figures
        WHERE {cond_a} AND isfinite(value)
        UNION ALL
        SELECT 1 AS side, {keys}, unit, value FROM figures
        WHERE {cond_b} AND isfinite(value)
    ), stats AS (
        SELECT {keys}, any_value(unit) AS unit,
            count(*) FILTER (side = 0) AS n_a,
            median(value) FILTER (side = 0) AS median_a,
            quantile_cont(value, 0.75) FILTER (side = 0)
                - quantile_cont(value, 0.25) FILTER (side = 0) AS iqr_a,
            count(*) FILTER (side = 1) AS n_b,
            median(value) FILTER (side = 1) AS median_b,
            quantile_cont(value, 0.75) FILTER (side = 1)
                - quantile_cont(value, 0.25) FILTER (side = 1) AS iqr_b
        FROM sel GROUP BY ALL
    ), tied AS (
        -- Equal values share their mid-rank: count each value once per side.
        SELECT {keys}, value, count(*) AS c, count(*) FILTER (side = 0) AS c_a
        FROM sel GROUP BY ALL
    ), ranks AS (
        SELECT {keys}, c_a,
            sum(c) OVER (PARTITION BY {keys} ORDER BY value) - (c - 1) / 2.0 AS midrank
        FROM tied
    ), u AS (
        SELECT {keys}, sum(c_a * midrank) AS rank_sum_a FROM ranks GROUP BY ALL
    )
    SELECT * FROM stats JOIN u USING ("check", params, figure)
    WHERE n_a > 0 AND n_b > 0
    ORDER BY "check", params, figure
    """
    df = con.execute(sql, par_a + par_b).df()
    return _with_test(df)


def _with_test(df):
    import math

    import numpy as np

    erfc = np.vectorize(math.erfc, otypes=[float])

    n_a, n_b = df["n_a"].astype(float), df["n_b"].astype(float)
    u = df["rank_sum_a"] - n_a * (n_a + 1) / 2
    sigma = np.sqrt(n_a * n_b * (n_a + n_b + 1) / 12)
    z = (u - n_a * n_b / 2) / sigma.where(sigma > 0)
    df["ratio"] = df["median_b"] / df["median_a"]
    df["p_value"] = erfc(np.abs(z) / np.sqrt(2))
    enough = (n_a >= MIN_N) & (n_b >= MIN_N)
    df["beyond_noise"] = np.where(
        ~enough, "n too small", np.where(df["p_value"] < ALPHA, "yes", "no")
    )
    return df.drop(columns=["rank_sum_a"])
