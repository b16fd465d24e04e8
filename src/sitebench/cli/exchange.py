"""The results exchange itself: make a shared results repository that protects itself,
move a checkout from the old layout (runs shared through the code's remote), list what
was refused.

  ./sitebench exchange init-remote PATH [--trust FILE] [--branch main]
  ./sitebench exchange migrate --site SITE
  ./sitebench exchange quarantine"""

description = "make a protected results repository, migrate to it, list refused commits"


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


def command(args):
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
    else:
        rows = exchange.Exchange(exchange.paths.results_dir()).quarantined()
        if not rows:
            print("nothing refused")
        for when, commit, reason in rows:
            print(f"{when} {commit[:12]} {reason}")
    return 0
