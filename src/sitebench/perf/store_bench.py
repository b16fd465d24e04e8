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

Then the growth with the number of sites (issue 19): the same three queries on stores of
``SCALE_SITES`` sites of the same history each (5 years of 550 figures a night; 100 sites
are 100 million figures), side by side in each round (the sizes in turn, the first size
rotated every round), with the 1-minute load average read before each size. Each size is
measured two ways: as the commands query (``compare``, ``references`` and ``regress`` open
the store on the sites they name: ``store.connect(sites=...)``) and on views over every
site's segments (``store.connect()``), which is what grows. The stores share one synthetic
history of the largest size, made once and kept in ``.sitebench/perf-store/`` (26 s and
760 MB for 100 sites, 2026-11-24); each size is a folder of links to its first sites.
Goal: each query at 100 sites within 1.5 x of its time at 10 sites.
"""

import json
import os
import resource
import shutil
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
from sitebench.common import paths
from sitebench.perf.measure import in_turn, now, ratio

FIGURES_PER_RUN = 550
CHECKS = 11  # 50 figures each: 10 parameter sets x 5 figures
GOAL_S = 2.0
SCALE_SITES = (10, 30, 100)
SCALE_YEARS = 5
SCALE_GOAL = 1.5  # a query's time at the most sites / at the fewest
QUERIES = ("compare", "references", "regressions")


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
                "disturbed": pa.repeat(pa.scalar(False), n),
                "foreign_cores": pa.nulls(n, pa.float64()),
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
                "origin": ["results"] * nights,
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


def queries(con):
    """The three timed queries on ``con``: {name: function returning its rows}."""
    a = compare.Side(label="site00", site="site00")
    b = compare.Side(label="site01", site="site01")

    def two_sites():
        return compare.verdicts(compare.query(con, a.where(), b.where()))

    def references():
        _, rows = propose.history(con, "site01", 30)
        return propose.build(rows)[0]

    def drift():
        return regress.drifts(con, "site01", None, 20)[2]

    return {"compare": two_sites, "references": references, "regressions": drift}


#: The sites each query names (``compare`` site00 against site01, the others site01).
ASKED = {"compare": ["site00", "site01"], "references": ["site01"], "regressions": ["site01"]}


def run(root, repeat=3):
    t0 = time.perf_counter()
    total = synthesize(root)
    made = time.perf_counter() - t0
    con = store.connect(root)
    fns = queries(con)
    result = {"figures": total, "synthesis_s": made, "repeat": repeat}
    for name in QUERIES:
        times, out = timed(fns[name], repeat)
        result[name] = {"times_s": times, "rows": len(out)}
    # The synthetic step must be found: the comparison sees the two sites' levels differ,
    # and the regression check flags the figure that dropped 20 %.
    table = fns["compare"]()
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
    if "scale" in result:
        lines += ["", render_scale(result)]
    return "\n".join(lines)


def scale_history(sites, years=SCALE_YEARS, seed=1):
    """The synthetic history of ``sites`` sites, made once under ``.sitebench/perf-store/``
    (a folder is complete once its ``made.json`` exists); (its folder, seconds to make it,
    0 when it was there already)."""
    base = paths.state_dir() / "perf-store" / f"sites{sites}-years{years}-seed{seed}-v1"
    if (base / "made.json").is_file():
        return base, 0.0
    shutil.rmtree(base, ignore_errors=True)
    t0 = time.perf_counter()
    total = synthesize(base, sites=sites, years=years, seed=seed)
    made = time.perf_counter() - t0
    (base / "made.json").write_text(json.dumps({"figures": total, "synthesis_s": made}))
    return base, made


def _linked(history, sites, root):
    """A store of the first ``sites`` sites of ``history``, as links under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for s in range(sites):
        (root / f"site{s:02d}").symlink_to(history / f"site{s:02d}", target_is_directory=True)
    return root


def scale(tmp, rounds=3, sizes=SCALE_SITES):
    """The three queries' times against the number of sites, side by side in each round."""
    history, made = scale_history(max(sizes))
    roots = {n: _linked(history, n, Path(tmp) / f"sites{n}") for n in sizes}
    ways = {"named sites": lambda root, name: ASKED[name], "all sites": lambda root, name: None}
    times = {way: {n: {q: [] for q in QUERIES} for n in sizes} for way in ways}
    loads = {n: [] for n in sizes}
    for r in range(1, rounds + 1):
        for n in in_turn(r, sizes):
            loads[n].append(os.getloadavg()[0])
            for way, sites_of in ways.items():
                for name in QUERIES:
                    # A fresh connection per query, timed with it, as each command opens one.
                    t0 = time.perf_counter()
                    con = store.connect(roots[n], sites=sites_of(roots[n], name))
                    queries(con)[name]()
                    times[way][n][name].append(time.perf_counter() - t0)
                    con.close()
    low, high = min(sizes), max(sizes)
    return {
        "sites": list(sizes),
        "years": SCALE_YEARS,
        "figures_per_site": SCALE_YEARS * 365 * FIGURES_PER_RUN,
        "synthesis_s": made,
        "rounds": rounds,
        "load_1min": {str(n): loads[n] for n in sizes},
        "times_s": {way: {str(n): times[way][n] for n in sizes} for way in ways},
        "ratios": {
            way: {
                f"{name} {high} sites / {low} sites": ratio(
                    times[way][high][name], times[way][low][name]
                )
                for name in QUERIES
            }
            for way in ways
        },
        "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def render_scale(result):
    sc = result["scale"]
    lines = [
        f"the queries against the number of sites ({sc['years']} years, "
        f"{sc['figures_per_site']:,} figures a site; median [range] of {sc['rounds']} rounds, "
        f"s; history made in {sc['synthesis_s']:.1f} s, 0 = kept from an earlier run)",
        f"{'sites':>6}{'load 1 min':>14}  "
        + "".join(f"{q + ' (' + w.split()[0] + ')':>24}" for w in sc["times_s"] for q in QUERIES),
    ]
    for n in sc["sites"]:
        load = sc["load_1min"][str(n)]
        cells = "".join(
            f"{statistics.median(t):>9.3f} [{min(t):.3f}-{max(t):.3f}]"
            for w in sc["times_s"]
            for t in (sc["times_s"][w][str(n)][q] for q in QUERIES)
        )
        lines.append(f"{n:>6}{f'{min(load):.2f}-{max(load):.2f}':>14}  {cells}")
    for way, ratios in sc["ratios"].items():
        for name, r in ratios.items():
            met = "meets" if r["median"] <= SCALE_GOAL else "MISSES"
            lines.append(
                f"{way:<12} {name:<36}{r['median']:>7.2f} [{r['min']:.2f}-{r['max']:.2f}]"
                + (f"  {met} <= {SCALE_GOAL}" if way == "named sites" else "")
            )
    lines.append(f"peak memory of the process: {sc['max_rss_gib']:.2f} GiB")
    return "\n".join(lines)


def bench(repeat=3):
    with tempfile.TemporaryDirectory(prefix="sitebench-store-bench-") as tmp:
        result = {"benchmark": "store", "when": now(), **run(tmp, repeat)}
    with tempfile.TemporaryDirectory(prefix="sitebench-store-scale-") as tmp:
        result["scale"] = scale(tmp, repeat)
    return result
