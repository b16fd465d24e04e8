"""Create site-configs/NAME/ and environments/NAME/ for this machine (or, with --slurm, the
cluster whose login node this is): compilers, MPI, BLAS and MariaDB detected as Spack
externals, the CPU topology and memory; every compiler set with every MPI found proposed as
a toolchain (site.yaml); it prints what it found and what to review."""

description = (
    "create site-configs/NAME/ and environments/NAME/ for this machine (or, with "
    "--slurm, the cluster whose login node this is)"
)

section = "sites"

example = """
  ./sitebench onboard mycluster --slurm         # site-configs/mycluster/, environments/mycluster/
"""


def setup_parser(p):
    p.add_argument("name", help="the new site's name (letters, digits, '.', '_', '-')")
    p.add_argument(
        "--slurm", action="store_true", help="one partition per Slurm partition (sinfo)"
    )
    p.add_argument(
        "--mirror",
        help="the site's Spack source mirror, a directory or URL "
        "(default: $SITEBENCH_MIRROR, if set)",
    )


def command(args):
    from sitebench.onboarding import onboard

    print(onboard.onboard(args.name, slurm=args.slurm, mirror=args.mirror).render())
    return 0
