"""``./sitebench perf store``: the results store at scale, on a synthetic history it makes.

10 sites x 5 years of nightly runs x the quick suite's figures (about 550 per run) is about
10 million figures. They are generated here (lognormal noise around per-site levels, a
step change in one figure of one site), written as the store's Parquet, and then timed:
the two-site comparison and the history-derived references, each a median of 3.
"""

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sitebench import store

FIGURES_PER_RUN = 550


def synthesize(root, sites=10, years=5, seed=1):
    """Write the synthetic store under ``root``; return the number of figures."""
    rng = np.random.default_rng(seed)
    nights = 365 * years
    start = np.datetime64("2021-11-22T02:00:00")
    started = start + np.arange(nights).astype("timedelta64[D]")
    checks = np.array([f"Check{i // 50}" for i in range(FIGURES_PER_RUN)])
    params = np.array([f"%scale=quick %p={i % 50}" for i in range(FIGURES_PER_RUN)])
    names = np.array([f"fig{i % 5}" for i in range(FIGURES_PER_RUN)])
    total = 0
    for s in range(sites):
        site = f"site{s:02d}"
        level = rng.lognormal(3, 1, FIGURES_PER_RUN)
        noise = rng.lognormal(0, 0.05, (nights, FIGURES_PER_RUN))
        values = level * noise
        if s == 1:  # a step: the last year of one figure 20 % slower
            values[-365:, 0] *= 0.8
        n = nights * FIGURES_PER_RUN
        runs = np.array([f"{str(t)[:10].replace('-', '')}T020000Z-{s:06x}" for t in started])
        table = pa.table(
            {
                "site": pa.array([site] * n).dictionary_encode(),
                "run": pa.DictionaryArray.from_arrays(
                    np.repeat(np.arange(nights), FIGURES_PER_RUN).astype("int32"), runs
                ),
                "started": pa.array(
                    np.repeat(started, FIGURES_PER_RUN).astype("datetime64[s]"),
                    pa.timestamp("s", tz="UTC"),
                ),
                "check": pa.array(np.tile(checks, nights)).dictionary_encode(),
                "params": pa.array(np.tile(params, nights)).dictionary_encode(),
                "figure": pa.array(np.tile(names, nights)).dictionary_encode(),
                "value": values.ravel(),
                "unit": pa.array(["MB/s"] * n).dictionary_encode(),
                "reference": pa.nulls(n, pa.float64()),
                "lower": pa.nulls(n, pa.float64()),
                "upper": pa.nulls(n, pa.float64()),
                "result": pa.array(["pass"] * n).dictionary_encode(),
            }
        )
        out = Path(root) / site
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out / "seg-000000.parquet", compression="zstd")
        total += n
    return total


def timed(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], times, result


def history_references(con, site, last=30):
    """The references-from-history query: per figure, median and MAD of the last runs."""
    return con.execute(
        """
        WITH recent AS (
            SELECT * FROM figures WHERE site = ? AND run IN (
                SELECT DISTINCT run FROM figures WHERE site = ?
                ORDER BY run DESC LIMIT ?)
        ), med AS (
            SELECT "check", params, figure, median(value) AS m FROM recent GROUP BY ALL
        )
        SELECT r."check", r.params, r.figure, any_value(m) AS median,
               median(abs(value - m)) AS mad, count(*) AS n
        FROM recent r JOIN med USING ("check", params, figure)
        GROUP BY ALL
        """,
        [site, site, last],
    ).df()


def run(root):
    t0 = time.perf_counter()
    total = synthesize(root)
    made = time.perf_counter() - t0
    con = store.connect(root)
    a = store.side_filter("site00")
    b = store.side_filter("site01")
    cmp_t, cmp_all, table = timed(lambda: store.compare(con, a, b))
    ref_t, ref_all, refs = timed(lambda: history_references(con, "site01"))
    return {
        "figures": total,
        "synthesis_s": made,
        "compare_s": cmp_t,
        "compare_runs_s": cmp_all,
        "compare_rows": len(table),
        "references_s": ref_t,
        "references_runs_s": ref_all,
        "references_rows": len(refs),
    }


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(run(sys.argv[1] if len(sys.argv) > 1 else tmp))
