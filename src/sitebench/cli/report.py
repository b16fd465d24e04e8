"""A static HTML report of results/: plots and provenance in one file, no server needed."""

from sitebench.cli.common import add_stale_days
from sitebench.common.paths import shown
from sitebench.common import paths

description = "a static HTML report of results/ (plots, provenance), one file"

section = "results"

example = """
  ./sitebench report                            # .sitebench/report/index.html, one file
  ./sitebench report --site local --out /tmp/report.html
"""


def setup_parser(p):
    p.add_argument(
        "--out",
        default=str(paths.state_dir() / "report" / "index.html"),
        help="where to write it (default: .sitebench/report/index.html; never in results/)",
    )
    p.add_argument("--site", action="append", help="only this site (repeatable)")
    p.add_argument(
        "--include-disturbed",
        action="store_true",
        help="keep the figures measured while other work took the CPU (left out and "
        "counted by default, as in regressions and references)",
    )
    add_stale_days(p)


def command(args):
    from sitebench import report

    out = report.build(
        args.out,
        sites=args.site or None,
        stale_days=args.stale_days,
        include_disturbed=args.include_disturbed,
    )
    print(f"report written to {shown(out)} (one file; open it in a browser, no server needed)")
    return 0
