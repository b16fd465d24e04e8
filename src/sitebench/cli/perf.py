"""sitebench's own performance suite: every ratio measured side by side in one run,
against its goal; the files are kept in perf/results/ (perf/README.md)."""

from sitebench.common.errors import SitebenchError

description = "performance benchmark: ratios measured side by side"

section = "maintenance"

example = """
  ./sitebench perf                              # every ratio against its goal (perf/README.md)
  ./sitebench perf hpl --n 16000 --no-levels    # one benchmark of the suite
"""


def setup_parser(p):
    p.add_argument(
        "benchmark",
        nargs="?",
        default="all",
        choices=(
            "all",
            "hpl",
            "stream",
            "store",
            "exchange",
            "harness",
            "first-result",
            "second-checkout",
        ),
        help="all (default): each below in turn, then a table of every ratio; hpl: our HPL "
        "against hpcc, Spack's builtin and DGEMM; stream: our STREAM against Spack's builtin "
        "and hpcc's SingleSTREAM; store: the results store on 10 million synthetic figures; "
        "exchange: a federation's exchange (100 sites, a history made from two real runs "
        "of the quick suite, perf/inputs/): disk, pull, refresh, a new site's first pull, "
        "compare, projected to 1 and 5 years; "
        "harness: the quick suite's wall time against its benchmarks' own, a no-change "
        "install against the first; first-result: a fresh clone to its first figure; "
        "second-checkout: a second fresh clone's run with the binary cache the first filled, "
        "against the first's",
    )
    p.add_argument("--n", type=int, default=8000, help="HPL matrix order (default 8000)")
    p.add_argument("--nb", type=int, default=192, help="HPL block size (default 192)")
    p.add_argument(
        "--no-levels",
        dest="levels",
        action="store_false",
        help="HPL: leave out the study's levels 1-3 (level 1 is ~12x slower than the rest)",
    )
    p.add_argument(
        "--rounds", type=int, default=None, help="repetitions (default 3; first-result: 1)"
    )
    p.add_argument(
        "--sites", type=int, default=100, help="exchange: sites of the federation (default 100)"
    )
    p.add_argument(
        "--nights",
        type=int,
        default=10,
        help="exchange: nights of history generated, then projected (default 10)",
    )
    p.add_argument(
        "--pair-nights",
        type=int,
        default=1825,
        help="exchange: nightly runs of each of the two sites compare and regressions are "
        "timed on (default 1825: 5 years; made once and kept)",
    )
    p.add_argument(
        "--keep-inputs",
        nargs="+",
        metavar="RUN_DIR",
        help="exchange: keep these real runs of ./sitebench run (two nights of the current "
        "quick suite; one: made new at the shares two committed nights differed by) as the "
        "benchmark's input in perf/inputs/, then stop",
    )
    p.add_argument(
        "--first-result-rounds",
        type=int,
        default=None,
        help="fresh clones built under `all` (default 1: each builds the whole suite)",
    )
    p.add_argument(
        "--cold-cache",
        action="store_true",
        help="first-result: the clone starts without the user's cache (~/.cache/sitebench), "
        "as on a machine sitebench never ran on: Spack indexes its repository again",
    )


def command(args):
    from sitebench.perf import suite

    if args.keep_inputs:
        return _keep_inputs(args)
    if args.rounds is None:
        args.rounds = 1 if args.benchmark in ("first-result", "second-checkout") else 3
    for flag, value in (
        ("--rounds", args.rounds),
        ("--nights", args.nights),
        ("--first-result-rounds", args.first_result_rounds),
    ):
        if value is not None and value < 1:
            raise SitebenchError(f"{flag} {value}: nothing would be measured", "use 1 or more")
    if args.sites < 2 or args.pair_nights < 2:
        raise SitebenchError(
            f"--sites {args.sites} / --pair-nights {args.pair_nights}: compare needs two",
            "use 2 or more",
        )
    return suite.run(args)


def _keep_inputs(args):
    from pathlib import Path

    from sitebench.common import paths
    from sitebench.perf import federation

    if args.benchmark != "exchange":
        raise SitebenchError(
            "--keep-inputs is the exchange benchmark's",
            "run: ./sitebench perf exchange " "--keep-inputs RUN_DIR RUN_DIR",
        )
    if len(args.keep_inputs) > 2:
        raise SitebenchError(
            f"--keep-inputs takes one or two runs, not {len(args.keep_inputs)}",
            "name the two nights: results/local/<first> results/local/<second>",
        )
    for path in federation.keep_inputs(*(Path(p).resolve() for p in args.keep_inputs)):
        print(f"kept {paths.shown(path)} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0
