"""Propose a site's references from its last runs: the median of each figure and a
tolerance from its noise, shown as a diff of references.yaml; --write writes it."""

import sys

description = "propose a site's references from its last runs (diff, --write)"

section = "sites"

example = """
  ./sitebench references local                  # proposed references, as a diff
  ./sitebench references local --write          # after 3 or more runs: write them
"""


def setup_parser(p):
    p.add_argument("site", help="site under site-configs/ and results/")
    p.add_argument("--last", type=int, default=5, help="runs to use (default 5, at least 3)")
    p.add_argument("--write", action="store_true", help="write the file after the diff")
    p.add_argument(
        "--min-tolerance",
        type=float,
        default=0.05,
        help="smallest tolerance, a fraction (default 0.05; raise it on shared machines)",
    )
    p.add_argument(
        "--include-disturbed",
        action="store_true",
        help="use figures measured while other work took the CPU too (left out by default)",
    )


def command(args):
    from sitebench.results import propose
    from sitebench.sites.site import Site

    site = Site.resolve(args.site)
    path = site.references
    change, notes = propose.apply(
        site.name,
        path,
        last=args.last,
        write=args.write,
        min_tolerance=args.min_tolerance,
        include_disturbed=args.include_disturbed,
    )
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if not change:
        print(f"{path} already holds these references")
    else:
        print(change, end="")
        print(f"\n==> {'written to' if args.write else 'not written (add --write)'}: {path}")
    return 0
