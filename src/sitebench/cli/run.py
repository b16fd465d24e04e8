"""Build the quick suite with Spack, run it with ReFrame on a site, store the run under
results/<site>/ and print it against the site's references and its recent history."""

import argparse

from sitebench.cli.common import add_site_argument, add_toolchain_argument, warn

description = "build, run and store the suite on a site"

section = "running"

example = """
  ./sitebench run                               # the quick suite on this machine (site local)
  ./sitebench run --toolchain gcc-mpich         # one toolchain of the site
  ./sitebench run --site mycluster --scale full -- -n StreamCheck   # after --: ReFrame's options
"""


def setup_parser(p):
    add_site_argument(p)
    p.add_argument("--scale", default="quick", help="quick (default) or full")
    add_toolchain_argument(p)
    p.add_argument(
        "reframe_args",
        nargs=argparse.REMAINDER,
        help="after --: extra ReFrame options, e.g. -- -n StreamCheck",
    )


def command(args):
    from sitebench.nightly.suite import run_once
    from sitebench.run import count_settings
    from sitebench.sites import toolchains
    from sitebench.sites.site import Site

    count_settings.check(args.reframe_args)  # before the site is detected (seconds)
    if args.toolchain:
        toolchains.select(args.toolchain)

    outcome = run_once(Site.resolve(args.site), args.scale, args.reframe_args, warn=warn)
    code = outcome.code
    # A run ended by a signal (Ctrl-C: 130) says so; otherwise 1 is "a check failed".
    return code if code >= 128 else (0 if code == 0 else 1)
