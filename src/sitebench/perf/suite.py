"""``./sitebench perf [NAME]``: the performance suite, one benchmark or all of them.

Every benchmark measures its sides in one run, round after round, prints its figures and
ratios with their range, and keeps its result in ``perf/results/<name>-<UTC time>.json``.
``all`` (the default) runs them in turn and ends with one table of every ratio and
its goal, so a reader need not scroll.
"""

import sys

from sitebench.common import paths

from sitebench.perf import measure


def _hpl(args):
    return (
        measure.hpl(n=args.n, nb=args.nb, rounds=args.rounds, levels=args.levels),
        measure.render,
    )


def _stream(args):
    from sitebench.perf import stream

    return stream.stream(rounds=args.rounds), stream.render


def _store(args):
    from sitebench.perf import store_bench

    return store_bench.bench(args.rounds), store_bench.render


def _exchange(args):
    from sitebench.perf import exchange_bench

    return (
        exchange_bench.bench(
            rounds=args.rounds,
            sites=args.sites,
            nights=args.nights,
            pair_nights=args.pair_nights,
        ),
        exchange_bench.render,
    )


def _harness(args):
    from sitebench.perf import harness

    return harness.harness(rounds=args.rounds), harness.render


def _first_result(args):
    from sitebench.perf import harness

    # One round unless asked: each builds the whole suite from the mirror.
    alone = args.benchmark == "first-result"
    rounds = args.rounds if alone else (args.first_result_rounds or 1)
    return harness.first_result(rounds, args.cold_cache), harness.render_first_result


def _second_checkout(args):
    from sitebench.perf import harness

    alone = args.benchmark == "second-checkout"
    rounds = args.rounds if alone else (args.first_result_rounds or 1)
    return harness.second_checkout(rounds), harness.render_second_checkout


#: name -> function(args) returning (result, its renderer); ``all`` runs them in this order.
BENCHMARKS = {
    "hpl": _hpl,
    "stream": _stream,
    "store": _store,
    "exchange": _exchange,
    "harness": _harness,
    "first-result": _first_result,
    "second-checkout": _second_checkout,
}


def every_ratio(results):
    """(benchmark, ratio name, median, min, max, verdict) of each ratio of ``results``."""
    rows = []
    for result in results:
        name = result["benchmark"]
        for ratio_name, r in result.get("ratios", {}).items():
            rows.append(
                (
                    name,
                    ratio_name,
                    r["median"],
                    r["min"],
                    r["max"],
                    measure.verdict(ratio_name, r["median"], r["min"], r["max"]),
                )
            )
    return rows


def render_every_ratio(rows):
    lines = ["every ratio, median [range over rounds]"]
    for bench, name, med, low, high, verdict in rows:
        lines.append(
            f"  {bench:8s} {name:40s} {med:7.3f}  [{low:.3f}-{high:.3f}]  {verdict}".rstrip()
        )
    return "\n".join(lines)


def run(args):
    names = list(BENCHMARKS) if args.benchmark == "all" else [args.benchmark]
    results = []
    for name in names:
        if len(names) > 1:
            print(f"==> perf {name}", file=sys.stderr)
        result, render = BENCHMARKS[name](args)
        print(render(result))
        print(f"kept in {measure.save(result).relative_to(paths.ROOT)}", flush=True)
        results.append(result)
    if len(results) > 1:
        print(render_every_ratio(every_ratio(results)))
    return 0
