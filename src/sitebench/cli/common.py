"""What several commands share: warnings on stderr, paths as the user reads them."""

import sys

from sitebench.common import paths


def warn(message):
    print(f"warning: {message}", file=sys.stderr)


def shown(path):
    """``path`` relative to the checkout where it is inside it."""
    return str(path.relative_to(paths.ROOT) if path.is_relative_to(paths.ROOT) else path)


def add_site_argument(p, default="local", positional=False):
    if positional:
        p.add_argument("site", help="site under site-configs/")
    else:
        p.add_argument(
            "--site", default=default, help=f"site under site-configs/ (default: {default})"
        )


def add_stale_days(p):
    p.add_argument(
        "--stale-days",
        type=float,
        default=3,
        metavar="N",
        help="name the sites whose newest run is older than N days (default 3): a site that "
        "stopped running or publishing",
    )
