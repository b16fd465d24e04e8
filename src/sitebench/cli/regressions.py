"""Judge a run of a site (the newest by default) against the site's recent runs: a figure
that drifted beyond the run-to-run noise is flagged, even inside the static tolerance."""

from sitebench.cli.common import warn
from sitebench.common.terminal import shown

description = "flag figures of a run that drifted beyond noise from the site's recent runs"

section = "results"

example = """
  ./sitebench regressions local --fail-on-worse  # the newest run against the last 20
"""


def setup_parser(p):
    p.add_argument("site", help="site under results/")
    p.add_argument("--run", help="the run to judge (default: the newest)")
    p.add_argument("--history", type=int, default=20, help="earlier runs (default 20)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument(
        "--fail-on-worse", action="store_true", help="exit 1 when a figure drifted to worse"
    )
    p.add_argument(
        "--include-disturbed",
        action="store_true",
        help="judge figures measured while other work took the CPU, and keep them in the history",
    )


def command(args):
    from sitebench.results import regress

    run, earlier, df = regress.check_site(
        args.site, args.run, args.history, warn=warn, include_disturbed=args.include_disturbed
    )
    print(shown(regress.render(args.site, run, earlier, df, args.format)))
    worse = (df["drift"] == "worse").any()
    return 1 if worse and args.fail_on_worse else 0
