"""``./sitebench perf store``: the results store at scale, on a synthetic history it makes.

10 sites x 5 years of nightly runs x 550 figures per run (the quick suite has about that
many cases times figures) = 10,037,500 figures. They are generated here - lognormal noise
around per-site levels, and a 20 % step in one figure of one site in its last year - and
written as the store's own Parquet segments (figures and runs), then timed, each the
median of ``repeat`` repetitions with its spread:

* the two-site comparison (``compare.query`` + ``compare.verdicts``: medians, IQRs and the
  Mann-Whitney U test over all 1825 runs of each side);
* the references from history (``propose.history`` + ``propose.build``, last 30 runs);
* the regression check of one run against its 20 predecessors (``regress.drifts``).

Goal (issue 7): <= 2 s each on a 2-core machine. The synthetic store lives in a temporary
directory and is deleted afterwards; the results are kept in ``perf/results/``.
"""

import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sitebench.results import compare

from sitebench.results import propose

from sitebench.results import regress

from sitebench.results import store
from sitebench.perf.measure import now, ratio

FIGURES_PER_RUN = 550
CHECKS = 11  # 50 figures each: 10 parameter sets x 5 figures
GOAL_S = 2.0


def _dict(values, n_rows=None, codes=None):
    """A dictionary-encoded column: ``values`` repeated, or indexed by ``codes``."""
    values = pa.array(values, pa.string())
    if codes is None:
        codes = np.zeros(n_rows, dtype="int32")
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), values)


def synthesize(root, sites=10, years=5, seed=1):
    """Write the synthetic store under ``root``; return the number of figures."""
    rng = np.random.default_rng(seed)
    nights = 365 * years
    start = np.datetime64("2021-11-22T02:00:00")
    started = start + np.arange(nights).astype("timedelta64[D]")
    per_run = np.arange(FIGURES_PER_RUN)
    checks = [f"Check{i}" for i in range(CHECKS)]
    params = [f"%scale=quick %p={i}" for i in range(10)]
    figures = [f"fig{i}" for i in range(5)]
    ref_index = [json.dumps(["quick", i]) for i in range(10)]
    case_vars = [json.dumps({"scale": "quick", "p": i}) for i in range(10)]
    check_code = np.tile(per_run // 50, nights)
    param_code = np.tile((per_run // 5) % 10, nights)
    figure_code = np.tile(per_run % 5, nights)
    total = 0
    for s in range(sites):
        site = f"site{s:02d}"
        level = rng.lognormal(3, 1, FIGURES_PER_RUN)
        values = level * rng.lognormal(0, 0.05, (nights, FIGURES_PER_RUN))
        if s == 1:  # a step: the last year of one figure 20 % slower
            values[-365:, 0] *= 0.8
        n = nights * FIGURES_PER_RUN
        runs = [f"{str(t)[:10].replace('-', '')}T020000Z-{s:06x}" for t in started]
        times = pa.array(started.astype("datetime64[s]"), pa.timestamp("s", tz="UTC"))
        arch = "zen3" if s % 2 else "neoverse_v1"
        table = pa.table(
            {
                "site": _dict([site], n),
                "run": _dict(runs, codes=np.repeat(np.arange(nights), FIGURES_PER_RUN)),
                "started": pa.array(
                    np.repeat(started, FIGURES_PER_RUN).astype("datetime64[s]"),
                    pa.timestamp("s", tz="UTC"),
                ),
                "system": _dict([site], n),
                "partition": _dict(["default"], n),
                "environ": _dict(["gnu"], n),
                "check": _dict(checks, codes=check_code),
                "params": _dict(params, codes=param_code),
                "figure": _dict(figures, codes=figure_code),
                "value": values.ravel(),
                "unit": _dict(["MB/s"], n),
                "reference": pa.nulls(n, pa.float64()),
                "lower": pa.nulls(n, pa.float64()),
                "upper": pa.nulls(n, pa.float64()),
                "result": _dict(["pass"], n),
                "arch": _dict([arch], n),
                "ref_keys": _dict([json.dumps(["scale", "p"])], n),
                "ref_index": _dict(ref_index, codes=param_code),
                "case_vars": _dict(case_vars, codes=param_code),
                "problem": _dict([json.dumps({"n": 10000})], n),
                "host": pa.nulls(n, pa.string()),
            }
        )
        run_table = pa.table(
            {
                "site": [site] * nights,
                "run": runs,
                "started": times,
                "finished": times,
                "arch": [arch] * nights,
                "hostname": [f"{site}-login"] * nights,
                "source": ["sitebench"] * nights,
                "emulated": [False] * nights,
                "cases": [FIGURES_PER_RUN // 5] * nights,
                "failures": [0] * nights,
                "provenance": ["{}"] * nights,
            },
            schema=store.RUNS,
        )
        out = Path(root) / site
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out / "fig-000000.parquet", compression="zstd")
        pq.write_table(run_table, out / "run-000000.parquet", compression="zstd")
        total += n
    return total


def timed(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times, result


def run(root, repeat=3):
    t0 = time.perf_counter()
    total = synthesize(root)
    made = time.perf_counter() - t0
    con = store.connect(root)
    a = compare.Side(label="site00", site="site00")
    b = compare.Side(label="site01", site="site01")

    def two_sites():
        return compare.verdicts(compare.query(con, a.where(), b.where()))

    def references():
        _, rows = propose.history(con, "site01", 30)
        return propose.build(rows)[0]

    def drift():
        return regress.drifts(con, "site01", None, 20)[2]

    result = {"figures": total, "synthesis_s": made, "repeat": repeat}
    for name, fn in (("compare", two_sites), ("references", references), ("regressions", drift)):
        times, out = timed(fn, repeat)
        result[name] = {"times_s": times, "rows": len(out)}
    # The synthetic step must be found: the comparison sees the two sites' levels differ,
    # and the regression check flags the figure that dropped 20 %.
    table = two_sites()
    result["compare"]["beyond_noise"] = int((table["beyond_noise"] == "yes").sum())
    # Each query's time over its goal, round by round, judged like every other ratio.
    result["ratios"] = {
        f"{name} time / {GOAL_S:g} s": ratio(result[name]["times_s"], [GOAL_S] * repeat)
        for name in ("compare", "references", "regressions")
    }
    return result


def render(result):
    lines = [
        f"synthetic store: {result['figures']:,} figures (10 sites x 5 years x 550 per night), "
        f"made in {result['synthesis_s']:.1f} s",
        f"{'query':<14}{'median s':>10}{'min-max s':>16}{'goal':>8}{'ratio to goal':>15}",
    ]
    for name in ("compare", "references", "regressions"):
        times = result[name]["times_s"]
        med = statistics.median(times)
        lines.append(
            f"{name:<14}{med:>10.3f}{f'{min(times):.3f}-{max(times):.3f}':>16}"
            f"{GOAL_S:>7.1f}s{med / GOAL_S:>15.2f}"
        )
    lines.append(
        f"(median of {result['repeat']}; ratio to goal <= 1 meets it; compare found "
        f"{result['compare']['beyond_noise']} of {result['compare']['rows']} figures beyond noise)"
    )
    return "\n".join(lines)


def bench(repeat=3):
    with tempfile.TemporaryDirectory(prefix="sitebench-store-bench-") as tmp:
        return {"benchmark": "store", "when": now(), **run(tmp, repeat)}
