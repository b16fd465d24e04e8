"""What several commands share: warnings on stderr, the site and staleness options, the
walk over the parsers."""

import argparse
import sys

from sitebench.common.terminal import shown


def warn(message):
    print(shown(f"warning: {message}"), file=sys.stderr)


def add_site_argument(p, default="local", positional=False):
    if positional:
        p.add_argument("site", help="site under site-configs/")
    else:
        p.add_argument(
            "--site", default=default, help=f"site under site-configs/ (default: {default})"
        )


def add_toolchain_argument(p, what="run"):
    p.add_argument(
        "--toolchain",
        action="append",
        metavar="NAME",
        help=f"{what} only this toolchain of the site (repeatable; 'all': every one; "
        "default: the site's default toolchains, all but those marked default: false, see "
        "site-configs/README.md)",
    )


def add_stale_days(p):
    p.add_argument(
        "--stale-days",
        type=float,
        default=3,
        metavar="N",
        help="name the sites whose newest run is older than N days (default 3): a site that "
        "stopped running or publishing",
    )


def subcommands(parser):
    """The subparsers of an argparse parser by name ({} when it has none): what the
    completion and the guide's command reference walk."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}
