"""Build the quick suite with Spack, run it with ReFrame on a site, store the run under
results/<site>/ and print it against the site's references and its recent history."""

import argparse

from sitebench.cli.common import add_site_argument, shown, warn
from sitebench.common.errors import SitebenchError

description = "build, run and store the suite on a site"


def setup_parser(p):
    add_site_argument(p)
    p.add_argument("--scale", default="quick", help="quick (default) or full")
    p.add_argument(
        "reframe_args",
        nargs=argparse.REMAINDER,
        help="after --: extra ReFrame options, e.g. -- -n StreamCheck",
    )


def drift_of(run_dir):
    """The stored run against its site's history (a line; never fails the run)."""
    from sitebench.results import regress

    try:
        site, run = run_dir.parent.name, run_dir.name
        _, earlier, df = regress.check_site(site, run, warn=warn)
        return regress.render(site, run, earlier, df)
    except SitebenchError as err:
        return f"drift from history: not judged ({err})"


def command(args):
    from sitebench.results import record, summary
    from sitebench.sites.site import Site

    run_dir, code = record.run_and_store(Site.resolve(args.site), args.scale, args.reframe_args)
    print("\n==> stored " + shown(run_dir))
    print(summary.summarize(run_dir))
    print(drift_of(run_dir))
    # A run ended by a signal (Ctrl-C: 130) says so; otherwise 1 is "a check failed".
    return code if code >= 128 else (0 if code == 0 else 1)
