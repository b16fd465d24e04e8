"""Store the sessions of ReFrame's own results database as runs of a site, one run per
session, never twice; the database is only read."""

from sitebench.cli.common import warn
from sitebench.common.paths import shown
from sitebench.common import paths

description = "store the sessions of ReFrame's own results database as runs of a site"

section = "results"

example = """
  ./sitebench import-reframe-db mycluster ~/.reframe/reports/results.db --cpu-arch zen3
"""


def setup_parser(p):
    p.add_argument("site", help="the site the sessions ran on (results/<site>/)")
    p.add_argument(
        "db",
        nargs="?",
        help="the database (default: where ReFrame keeps it for the site's configuration: "
        "$RFM_SQLITE_DB_FILE, storage/sqlite_db_file, ~/.reframe/reports/results.db)",
    )
    p.add_argument(
        "--cpu-arch",
        help="the site's CPU microarchitecture (e.g. zen3), where the reports do not say",
    )


def command(args):
    from sitebench.common.names import check_name
    from sitebench.results import reframe_db

    # The sessions may come from a site configured elsewhere: only results/<site>/ is needed.
    site = check_name("site", args.site)
    config = paths.site_config_dir(site) / "reframe.py"
    db = args.db or reframe_db.default_db_path(config if config.is_file() else None)
    made = reframe_db.import_db(site, db, warn=warn, cpu_arch=args.cpu_arch)
    for run in made:
        print(f"imported {shown(run)}")
    print(f"{len(made)} new session(s) of {db} stored under results/{site}/")
    return 0
