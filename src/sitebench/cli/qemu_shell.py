"""A shell (or a command) in an emulated site's root, mounted as for a run (debugging)."""

import argparse

description = "a shell (or a command) in an emulated site's root, mounted as for a run"

section = "sites"

example = """
  ./sitebench qemu-shell --site arm64-neoverse-n1 -- uname -m
"""


def setup_parser(p):
    p.add_argument("--site", required=True)
    p.add_argument("command_args", nargs=argparse.REMAINDER, help="command (default: bash)")


def command(args):
    from sitebench.sites import qemu_site
    from sitebench.sites.site import Site

    return qemu_site.shell(Site.resolve(args.site), list(args.command_args or []))
