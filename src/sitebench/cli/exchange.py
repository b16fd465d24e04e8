"""The results exchange itself: make a shared results repository that protects itself,
move a checkout from the old layout (runs shared through the code's remote), list what
was refused, and the runs found changed after they were indexed.

  ./sitebench exchange init-remote PATH [--trust FILE] [--branch main]
  ./sitebench exchange migrate --site SITE
  ./sitebench exchange quarantine
  ./sitebench exchange restore
  ./sitebench exchange accepted
  ./sitebench exchange altered [SITE ...]"""

description = (
    "make a protected results repository, migrate to it, list refused commits and altered runs"
)

section = "exchange"

example = """
  ./sitebench exchange init-remote /srv/git/results.git   # a repository that guards itself
  ./sitebench exchange migrate --site mycluster  # once: results/ leaves the code's remote
  ./sitebench exchange quarantine               # the incoming commits refused here, and why
  ./sitebench exchange restore                  # after a history rewrite on the remote
  ./sitebench exchange accepted                 # the commit a joining site pins (pull --expect)
  ./sitebench exchange altered local            # runs changed after they were indexed
"""


def setup_parser(p):
    sub = p.add_subparsers(dest="action", required=True)
    init = sub.add_parser("init-remote", help="a bare results repository with its own checks")
    init.add_argument("path")
    init.add_argument(
        "--trust",
        help="allowed_signers file of the sites' keys (default: this site's trust list)",
    )
    init.add_argument("--branch", default="main")
    init.add_argument("--allow-unsigned", action="append", default=[], metavar="SITE")
    mig = sub.add_parser("migrate", help="connect results/ to its own exchange, once")
    mig.add_argument("--site", required=True)
    sub.add_parser("quarantine", help="the incoming commits refused here, and why")
    sub.add_parser(
        "restore",
        help="after a history rewrite on the remote: push back the history verified here",
    )
    sub.add_parser(
        "accepted",
        help="the last commit accepted here: what a joining site pins (pull --expect)",
    )
    alt = sub.add_parser(
        "altered", help="runs changed after they were indexed (exit 1 when there are any)"
    )
    alt.add_argument("sites", nargs="*", help="only these sites (default: every site)")


def command(args):
    from sitebench.common.terminal import shown
    from sitebench.results import exchange, shared_remote, trust

    if args.action == "init-remote":
        trust_file = args.trust or str(trust.allowed_signers_file())
        path = shared_remote.init_remote(
            args.path, trust_file, args.branch, unsigned_sites=args.allow_unsigned
        )
        print(f"made {path}: runs only, fast-forward only, signed by the keys of {trust_file}")
        print(f"sites connect with: ./sitebench pull --remote {path}")
    elif args.action == "migrate":
        ex = exchange.migrate(args.site)
        print(
            f"{ex.results_root} now exchanges runs through {ex.git_dir} with "
            f"{ex.setting('remote')} (runs at {ex.setting('prefix') or '/'}); "
            "pull and publish no longer touch the code's checkout"
        )
    elif args.action == "altered":
        return _altered(args.sites)
    elif args.action == "accepted":
        commit = exchange.Exchange(exchange.paths.results_dir()).rev(exchange.ACCEPTED)
        if not commit:
            print("nothing accepted here yet")
            return 1
        print(commit)
    elif args.action == "restore":
        done = exchange.restore()
        if not done.pushed:
            print(
                f"nothing to restore: the remote's branch ({done.accepted[:12]}) holds "
                "every commit accepted here"
            )
        else:
            dropped = (
                f", replacing {done.dropped[:12]} (kept in quarantine)" if done.dropped else ""
            )
            print(
                f"restored the remote's branch to {done.accepted[:12]}, the history "
                f"verified here{dropped}; each site's next publish sends its runs again"
            )
    else:
        rows = exchange.Exchange(exchange.paths.results_dir()).quarantined()
        if not rows:
            print("nothing refused")
        for when, commit, reason in rows:
            print(shown(f"{when} {commit[:12]} {reason}"))
    return 0


def _altered(sites):
    """Index what is new first (a change made since the last command is found now), then
    list every run the index found changed: runs are never modified, each is one to look
    into."""
    from sitebench.cli.common import warn
    from sitebench.results import store

    store.refresh_all(warn=warn)
    rows = store.altered(sites or None)
    if not rows:
        print("no run changed after it was indexed")
        return 0
    for site, run, when, why in rows:
        # Run names come from other sites: one line each, control characters made visible.
        print(store.one_line(f"{when} {site}/{run}: {why}"))
    return 1
