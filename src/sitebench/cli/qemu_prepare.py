"""Make an emulated site's Debian root (debootstrap, apt, CA certificates), each step once."""

import json

description = (
    "make an emulated site's Debian root (debootstrap, apt, CA certificates); each step once"
)

section = "sites"

example = """
  ./sitebench qemu-prepare --site arm64-neoverse-n1   # the arm64 Debian root, each step once
"""


def setup_parser(p):
    p.add_argument("--site", required=True, help="an emulated site (emulation: in site.yaml)")


def command(args):
    from sitebench.sites import qemu_site
    from sitebench.sites.site import Site

    site = Site.resolve(args.site)
    emu = qemu_site.emulation(site)
    done_steps = qemu_site.prepare_root(emu["root"], emu)
    print(f"root of {site.name!r}: {emu['root']}; steps (s): {json.dumps(done_steps)}")
    return 0
