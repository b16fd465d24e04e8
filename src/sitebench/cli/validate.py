"""Check a site's files before a run: its ReFrame configuration, site.yaml, environment and
references, every problem named with its file, key and fix."""

description = "check a site's files (config, environment, references) before a run"


def setup_parser(p):
    p.add_argument("site", help="site under site-configs/")


def command(args):
    from sitebench.sites.validate import validate_site

    settings = validate_site(args.site)
    env = settings["environment"]
    print(
        f"site {args.site!r} is valid: site-configs/{args.site}/ and "
        f"environments/{env}/spack.yaml"
    )
    return 0
