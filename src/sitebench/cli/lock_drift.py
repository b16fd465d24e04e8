"""Re-concretize committed environments and show how they drifted from their spack.lock
(a new package release, a changed recipe): exit 1 when one drifted."""

description = "re-concretize committed environments and show how they drifted from spack.lock"

section = "maintenance"

example = """
  ./sitebench lock-drift local                  # what a new concretization would change
"""


def setup_parser(p):
    p.add_argument("site", nargs="*", help="sites (default: every committed spack.lock)")


def command(args):
    from sitebench.sites import qemu_site
    from sitebench.sites.site import Site
    from sitebench.spack import lock_drift, pinned

    sites = [Site.resolve(name) for name in (args.site or lock_drift.committed_environments())]
    emulated = [s for s in sites if qemu_site.elsewhere(s)]
    for site in emulated:
        print(
            f"environments/{site.environment}: emulated site, not concretizable on this host; "
            f"run `./sitebench qemu-shell --site {site} -- ./sitebench lock-drift {site}`"
        )
    sites = [s for s in sites if s not in emulated]
    if not sites:
        print("no environment commits a spack.lock (git ls-files environments/*/spack.lock)")
        return 0
    spack = pinned.setup()
    drifted = 0
    for site in sites:
        lines = lock_drift.drift(spack, site.environment_dir)
        drifted += bool(lines)
        print(
            f"environments/{site.environment}: "
            + ("no drift" if not lines else f"{len(lines)} change(s)")
        )
        for line in lines:
            print(f"  {line}")
    return 1 if drifted else 0
