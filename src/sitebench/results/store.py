"""The query layer over ``results/``: every figure of every run in Parquet, queried with DuckDB.

``results/`` stays the truth and is never written here. The index of a results directory
lives in ``.sitebench/results/store/<hash of its path>/<site>/`` (or ``$SITEBENCH_STORE_DIR``):
Parquet segments of figure rows (the columns of :mod:`sitebench.results.figures`), Parquet segments
of run rows (one per run: its times, CPU, host, where it came from, its provenance), and
``runs.json``, the runs already indexed. A stored run never changes, so a refresh reads only
the runs that are new since the last one and writes them as one new segment (atomically: a
temporary name, then a rename); segments are merged when there are more than
``MAX_SEGMENTS``. A run that disappeared from ``results/`` makes its site's index be rebuilt.
Unreadable runs are reported and skipped (and tried again at the next refresh).
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sitebench.results import figures

from sitebench.common import paths
from sitebench.common.names import check_name
from sitebench.common.progress import progress_bar
from sitebench.results.rundirs import BadRun, leftovers, load_run, run_dirs, site_dirs

MAX_SEGMENTS = 8
#: The index's layout: a new version (new columns) makes a new index, read from results/ anew.
SCHEMA_VERSION = 2
_TIME = pa.timestamp("s", tz="UTC")
FIGURES = pa.schema(
    [
        ("site", pa.string()),
        ("run", pa.string()),
        ("started", _TIME),
        ("system", pa.string()),
        ("partition", pa.string()),
        ("environ", pa.string()),
        ("check", pa.string()),
        ("params", pa.string()),
        ("figure", pa.string()),
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("reference", pa.float64()),
        ("lower", pa.float64()),
        ("upper", pa.float64()),
        ("result", pa.string()),
        ("arch", pa.string()),
        ("ref_keys", pa.string()),
        ("ref_index", pa.string()),
        ("case_vars", pa.string()),
        ("problem", pa.string()),
        ("host", pa.string()),
    ]
)
RUNS = pa.schema(
    [
        ("site", pa.string()),
        ("run", pa.string()),
        ("started", _TIME),
        ("finished", _TIME),
        ("arch", pa.string()),
        ("hostname", pa.string()),
        ("source", pa.string()),
        ("emulated", pa.bool_()),
        ("cases", pa.int64()),
        ("failures", pa.int64()),
        ("provenance", pa.string()),
    ]
)


def store_dir(results_root=None):
    """The index of ``results_root`` (default: the project's results/), under
    ``$SITEBENCH_STORE_DIR`` (default ``.sitebench/store``)."""
    root = Path(results_root or paths.results_dir()).resolve()
    # One index per results directory: tests and other checkouts never share one.
    # Another SCHEMA_VERSION: another index (old segments lack the new columns).
    digest = hashlib.sha256(f"{root}\0v{SCHEMA_VERSION}".encode()).hexdigest()[:16]
    return Path(os.environ.get("SITEBENCH_STORE_DIR", paths.state_dir() / "store")) / digest


def _time(text):
    """ReFrame's "20261122T153115+0000" or ISO 8601; NaT if neither."""
    for fmt in ("%Y%m%dT%H%M%S%z", None):
        stamp = pd.to_datetime(text, format=fmt, utc=True, errors="coerce")
        if not pd.isna(stamp):
            return stamp
    return pd.NaT


def _figure_table(rows):
    df = pd.DataFrame(rows, columns=FIGURES.names)
    # Typed even when empty: a run without a figure (every build failed) is indexed too.
    df["started"] = pd.Series(
        [_time(t) for t in df["started"]], index=df.index, dtype="datetime64[ns, UTC]"
    )
    for col in ("value", "reference", "lower", "upper"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return pa.Table.from_pandas(df, schema=FIGURES, preserve_index=False)


def _run_row(run):
    info = run.report.get("session_info", {})
    prov = run.provenance or {}
    return {
        "site": run.site,
        "run": run.name,
        "started": _time(info.get("time_start") or prov.get("started")),
        "finished": _time(info.get("time_end") or prov.get("finished")),
        "arch": prov.get("cpu_arch"),
        "hostname": (prov.get("host") or {}).get("hostname") or info.get("hostname"),
        "source": prov.get("source", "sitebench"),
        "emulated": bool(prov.get("emulated", False)),
        "cases": info.get("num_cases"),
        "failures": info.get("num_failures"),
        "provenance": json.dumps(prov, sort_keys=True),
    }


def _write_atomic(table, path):
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def refresh(site, results_root=None, store=None, warn=None, progress=None):
    """Bring ``site``'s index up to date with its runs; return the number of new runs."""
    base = Path(store or store_dir(results_root)) / site
    if warn:
        # Half-assembled runs of a killed or failed writer: never indexed, never removed.
        for path, why in leftovers(site, results_root):
            warn(f"{path} is not a run ({why}); remove it once inspected")
    known_file = base / "runs.json"
    known = set(json.loads(known_file.read_text())) if known_file.is_file() else set()
    on_disk = run_dirs(site, results_root)
    if known - {p.name for p in on_disk}:
        # A run was removed from results/: the index must not keep its figures.
        shutil.rmtree(base)
        known = set()
    base.mkdir(parents=True, exist_ok=True)
    _drop_unlisted_segments(base, known)
    new = [p for p in on_disk if p.name not in known]
    figure_rows, run_rows, added = [], [], []
    for path in progress_bar(new, f"indexing {site}", progress):
        try:
            run = load_run(path)
        except BadRun as err:
            if warn:
                warn(f"skipped {site}/{path.name}: {err}")
            continue
        figure_rows.extend(figures.rows_of_run(run, job_wall=True))
        run_rows.append(_run_row(run))
        added.append(path.name)
    if not added:
        return 0
    number = _next_segment(base)
    runs_table = pa.Table.from_pandas(
        pd.DataFrame(run_rows, columns=RUNS.names), schema=RUNS, preserve_index=False
    )
    _write_atomic(_figure_table(figure_rows), base / f"fig-{number:06d}.parquet")
    _write_atomic(runs_table, base / f"run-{number:06d}.parquet")
    # The runs list follows the segments: after a crash between them, the next refresh
    # drops the segments of runs not in the list and reads those runs again.
    tmp = known_file.with_name(".runs.json.tmp")
    tmp.write_text(json.dumps(sorted(known | set(added))))
    tmp.replace(known_file)
    if number + 1 > MAX_SEGMENTS and len(list(base.glob("fig-*.parquet"))) > MAX_SEGMENTS:
        compact(base)
    return len(added)


def _drop_unlisted_segments(base, known):
    for runs_file in base.glob("run-*.parquet"):
        if not set(pq.read_table(runs_file, columns=["run"])["run"].to_pylist()) <= known:
            runs_file.with_name(runs_file.name.replace("run-", "fig-", 1)).unlink(True)
            runs_file.unlink()
    for path in base.glob(".*.tmp"):
        path.unlink()


def refresh_all(results_root=None, store=None, warn=None, progress=None):
    """Refresh every site of ``results_root``; return {site: new runs}."""
    return {
        site.name: refresh(site.name, results_root, store, warn, progress)
        for site in site_dirs(results_root)
    }


def _next_segment(base):
    numbers = [int(p.stem.split("-")[1]) for p in Path(base).glob("fig-*.parquet")]
    return max(numbers) + 1 if numbers else 0


def compact(base):
    """Merge a site's segments into one (duplicates of a crashed refresh dropped)."""
    base = Path(base)
    figs, runs = sorted(base.glob("fig-*.parquet")), sorted(base.glob("run-*.parquet"))
    if len(figs) < 2:
        return
    con = duckdb.connect()
    number = _next_segment(base)
    fig_files, run_files = [str(p) for p in figs], [str(p) for p in runs]
    merged_figs = con.sql(
        'SELECT DISTINCT ON (run, partition, environ, "check", params, figure) * '
        f"FROM read_parquet({fig_files!r})"
    ).to_arrow_table()
    merged_runs = con.sql(
        f"SELECT DISTINCT ON (run) * FROM read_parquet({run_files!r})"
    ).to_arrow_table()
    _write_atomic(merged_figs, base / f"fig-{number:06d}.parquet")
    _write_atomic(merged_runs, base / f"run-{number:06d}.parquet")
    for path in figs + runs:
        path.unlink()


def _view(con, name, files, schema):
    if files:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({files!r})")
        return
    columns = ", ".join(f'NULL::{_duck(f.type)} AS "{f.name}"' for f in schema)
    con.execute(f"CREATE VIEW {name} AS SELECT * FROM (SELECT {columns}) WHERE false")


def connect(store=None, sites=None, results_root=None):
    """A DuckDB connection with views ``figures`` and ``runs`` over the index.

    ``sites``: only those: only their folders are looked at and only their segments are in
    the views, so a query over two sites costs the same whatever the number of sites in the
    index (a view over every site's segments makes DuckDB open every segment's footer even
    for a query that names one site). Call :func:`refresh` (or :func:`open_store`) first.
    """
    root = Path(store or store_dir(results_root))
    if sites is None:
        chosen = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    else:
        names = sorted({check_name("site", site) for site in sites})
        chosen = [root / site for site in names if (root / site).is_dir()]
    con = duckdb.connect()
    _view(
        con, "figures", [str(p) for d in chosen for p in sorted(d.glob("fig-*.parquet"))], FIGURES
    )
    _view(con, "runs", [str(p) for d in chosen for p in sorted(d.glob("run-*.parquet"))], RUNS)
    return con


def open_store(sites=None, results_root=None, warn=None, progress=None):
    """Refresh the index of ``sites`` (default: all) and connect to it."""
    store = store_dir(results_root)
    if sites is None:
        refresh_all(results_root, store, warn, progress)
    else:
        for site in sites:
            refresh(site, results_root, store, warn, progress)
    return connect(store, sites)


def _duck(arrow_type):
    return {
        pa.string(): "VARCHAR",
        pa.float64(): "DOUBLE",
        pa.int64(): "BIGINT",
        pa.bool_(): "BOOLEAN",
        _TIME: "TIMESTAMPTZ",
    }[arrow_type]
