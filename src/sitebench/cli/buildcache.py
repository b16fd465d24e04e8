"""A centre's binaries: build a site's environment once, on one machine, and install it on
the centre's other clusters of the same target in seconds.

  push DIR   every spec of the site's installed environment into DIR, signed with this
             machine's Spack key (`./sitebench spack gpg create NAME EMAIL` makes one;
             `./sitebench spack gpg export KEY.pub` gives its public key to the clusters)
  pull DIR   the site's environment installed from DIR alone, each binary's signature
             checked (`--trust KEY.pub` trusts the centre's key first); an unsigned or
             wrongly signed cache is refused unless --allow-unsigned. What it installs goes
             to this machine's binary cache too, for every checkout here.

Nothing is built by pull: a binary DIR lacks (another target, recipe or toolchain) stops it,
naming the spec."""

from sitebench.cli.common import add_site_argument

description = "export or import a site's signed Spack binaries (a centre's build cache)"

section = "maintenance"

example = """
  ./sitebench buildcache push /shared/sitebench-binaries     # on the build machine
  ./sitebench buildcache pull /shared/sitebench-binaries --trust centre.pub   # on the others
"""


def setup_parser(p):
    sub = p.add_subparsers(dest="action", required=True)
    push = sub.add_parser("push", help="sign and copy the site's installed binaries into DIR")
    push.add_argument("directory", help="the centre's binary cache (made if missing)")
    add_site_argument(push)
    pull = sub.add_parser("pull", help="install the site's environment from DIR, verified")
    pull.add_argument("directory", help="a binary cache `buildcache push` wrote")
    pull.add_argument("--trust", metavar="KEY", help="a public key file to trust first")
    pull.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="install unsigned binaries too (only for a cache you made yourself)",
    )
    add_site_argument(pull)


def command(args):
    from sitebench.run import runner
    from sitebench.sites.site import Site
    from sitebench.spack import signed_cache

    site = Site.resolve(args.site)
    if args.action == "pull":
        signed_cache.check_cache(args.directory)  # before Spack is set up
    prepared = runner.prepare(site)
    if args.action == "push":
        url = signed_cache.export(prepared.spack, prepared.env_dir, args.directory)
        print(f"binaries of environments/{site.environment} signed into {url}")
        return 0
    signed_cache.import_(
        prepared.spack,
        prepared.env_dir,
        args.directory,
        trust=args.trust,
        allow_unsigned=args.allow_unsigned,
    )
    checked = "unchecked (--allow-unsigned)" if args.allow_unsigned else "signatures checked"
    print(f"environments/{site.environment} installed from {args.directory} ({checked})")
    return 0
