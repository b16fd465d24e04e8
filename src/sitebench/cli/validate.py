"""Check a site's files before a run: its ReFrame configuration, site.yaml, toolchains,
environment and references, every problem named with its file, key and fix. The Spack files
made from the toolchains (spack/toolchains.yaml, definitions.yaml) are rewritten if stale."""

description = "check a site's files (config, environment, references) before a run"

section = "sites"

example = """
  ./sitebench validate mycluster                # every problem named with its file, key and fix
"""


def setup_parser(p):
    p.add_argument("site", help="site under site-configs/")


def command(args):
    from sitebench.onboarding.validate import validate_site

    from sitebench.sites import toolchains

    settings = validate_site(args.site)
    env = settings["environment"]
    print(
        f"site {args.site!r} is valid: site-configs/{args.site}/ and "
        f"environments/{env}/spack.yaml"
    )
    found, problems = toolchains.declared(args.site, settings)
    if found and not problems:
        print(f"toolchains: {', '.join(tc.name for tc in found)}")
    else:  # validate_site passed: the local site, not detected yet
        print("toolchains: detected on the first `./sitebench run` (or `./sitebench detect`)")
    return 0
