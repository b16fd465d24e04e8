"""Compare two sides of results/ figure by figure. Each side: SITE, SITE:PARTITION,
SITE%TOOLCHAIN, SITE/RUN or SITE@SINCE..UNTIL (ISO 8601 UTC; an end may be empty), combined
in that order (local:default%gcc-mpich@2026-11-01..2026-11-30). %TOOLCHAIN keeps the figures
of that toolchain, the ReFrame environment it runs as (runs made before toolchains: gnu);
a side without one takes every toolchain of its runs. Figures are matched on check,
parameters, problem size and figure, so `compare local%gcc-mpich local%gcc-openmpi` compares
two MPIs figure by figure. Per figure: runs, median, IQR, B/A and a two-sided Mann-Whitney U
test (p < 0.01: beyond noise)."""

from sitebench.cli.common import add_stale_days, warn
from sitebench.common.terminal import shown

description = "compare two sites, partitions, toolchains, runs or time ranges from results/"

section = "results"

example = """
  ./sitebench compare local local-slurm:srun
  ./sitebench compare local%gcc-mpich local%gcc-openmpi          # MPICH against Open MPI
  ./sitebench compare local@2026-11-01..2026-11-08 local@2026-11-15.. --format csv
"""


def setup_parser(p):
    p.add_argument(
        "a", help="side A, e.g. local, local@2026-11-01..2026-11-08 or local%%gcc-mpich"
    )
    p.add_argument("b", help="side B, e.g. local-slurm:srun, local/<run> or local%%gcc-openmpi")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument(
        "--job-wall",
        action="store_true",
        help="also compare each case's job wall time (submit to finish): between a site "
        "and the same machine behind a scheduler, the scheduler's overhead per check",
    )
    add_stale_days(p)


def command(args):
    from sitebench.results.compare import Side, compare, render

    a, b = Side.parse(args.a), Side.parse(args.b)
    from sitebench.results.staleness import describe, stale_sites

    table = compare(a, b, job_wall=args.job_wall, warn=warn)
    # Sites that stopped publishing: a caveat for the compared ones, a warning for the rest.
    compared = {a.site, b.site}
    for site, when in stale_sites(days=args.stale_days):
        if site in compared:
            table.attrs.setdefault("caveats", []).append(describe(site, when))
        else:
            warn(describe(site, when))
    print(shown(render(table, args.a, args.b, args.format)))
    if args.format == "csv":
        for caveat in table.attrs.get("caveats", []):
            warn(caveat)
    return 0
