"""Make a source mirror of a site's environment, for sites without internet: Spack copies
the source of every concrete spec into DIRECTORY, and the site's spack/mirrors.yaml points
at it. Carry the directory to the site; nothing is fetched there. With --binaries the
installed environment's signed binaries go in too: the site installs instead of building."""

from sitebench.cli.common import add_site_argument

description = "make a source mirror of a site's environment"

section = "maintenance"

example = """
  ./sitebench mirror /media/usb/sitebench-mirror             # every source, for an air-gapped site
  ./sitebench mirror /media/usb/sitebench-mirror --binaries  # and the signed binaries
"""


def setup_parser(p):
    p.add_argument("directory", help="where to put the mirror (carry it to the site)")
    p.add_argument(
        "--binaries",
        action="store_true",
        help="add the installed environment's binaries, signed with this machine's Spack key "
        "(see `./sitebench buildcache --help`)",
    )
    add_site_argument(p)


def command(args):
    from sitebench.run import runner
    from sitebench.sites.site import Site
    from sitebench.spack import mirror

    site = Site.resolve(args.site)
    prepared = runner.prepare(site)
    url = mirror.create(
        prepared.spack,
        prepared.env_dir,
        args.directory,
        site.spack_config_dir / "mirrors.yaml",
        name=f"sitebench-{site}",
        committed=not site.detected_here,
        binaries=args.binaries,
    )
    print(
        f"mirror of environments/{site.environment} in {url}; "
        f"site-configs/{site}/spack/mirrors.yaml points at it"
    )
    return 0
