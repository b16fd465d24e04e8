"""Run the suite of an emulated site inside its Debian root under QEMU user emulation; the
run is stored under results/<site>/ (its timings are the emulator's)."""

import argparse

description = (
    "run the suite of an emulated site inside its root (QEMU user emulation); "
    "the run is stored under results/<site>/"
)

section = "running"

example = """
  ./sitebench qemu-run --site arm64-neoverse-n1       # the suite inside it, stored as its run
"""


def setup_parser(p):
    p.add_argument("--site", required=True, help="an emulated site (emulation: in site.yaml)")
    p.add_argument("--scale", default="quick", help="quick (default) or full")
    p.add_argument(
        "--no-prepare", action="store_true", help="do not check or complete the root first"
    )
    p.add_argument(
        "reframe_args",
        nargs=argparse.REMAINDER,
        help="after --: extra ReFrame options (after the site's emulation.reframe_args)",
    )


def command(args):
    from sitebench.sites import qemu_site
    from sitebench.sites.site import Site

    site = Site.resolve(args.site)
    return qemu_site.run(
        site, args.scale, list(args.reframe_args or []), prepare=not args.no_prepare
    )
