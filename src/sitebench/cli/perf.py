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
        "exchange: publish, pull and the store's refresh in a results repository of 10 "
        "sites x 1 year of runs; "
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

    if args.rounds is None:
        args.rounds = 1 if args.benchmark in ("first-result", "second-checkout") else 3
    for flag, value in (
        ("--rounds", args.rounds),
        ("--first-result-rounds", args.first_result_rounds),
    ):
        if value is not None and value < 1:
            raise SitebenchError(f"{flag} {value}: nothing would be measured", "use 1 or more")
    return suite.run(args)
