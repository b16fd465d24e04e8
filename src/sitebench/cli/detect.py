"""Detect this machine as the site 'local': compilers, MPI, BLAS and build tools become
Spack externals, ReFrame detects the CPU topology, and every compiler set with every MPI found
becomes a toolchain (site-configs/local/toolchains.yaml). Done once; --redetect after a
change."""

description = "detect this machine as the 'local' site"

section = "sites"

example = """
  ./sitebench detect --redetect                 # after the machine changed
"""


def setup_parser(p):
    p.add_argument("--redetect", action="store_true", help="detect again even if done")


def command(args):
    from sitebench.common import paths
    from sitebench.discovery import local_site
    from sitebench.spack import pinned

    from sitebench.sites import site_settings, toolchains

    topology = local_site.detect(pinned.setup(), redetect=args.redetect)
    print(
        f"site 'local': {topology.get('arch')} {topology.get('model', '')}, "
        f"{topology.get('num_cpus')} CPUs; Spack config in {local_site.spack_dir()}"
    )
    found, _problems = toolchains.declared("local", site_settings.load("local"))
    if found:
        print(
            f"toolchains: {', '.join(tc.name for tc in found)} "
            f"({paths.shown(toolchains.detected_file())})"
        )
    return 0
