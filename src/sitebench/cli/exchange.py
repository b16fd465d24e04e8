"""The results exchange itself: make a shared results repository that protects itself,
move a checkout from the old layout (runs shared through the code's remote), list what
was refused, and the runs found changed after they were indexed.

  ./sitebench exchange init-remote PATH [--trust FILE] [--branch main]
  ./sitebench exchange upgrade-remote PATH
  ./sitebench exchange migrate --site SITE
  ./sitebench exchange quarantine [--rejudge [COMMIT ...]]
  ./sitebench exchange restore
  ./sitebench exchange accepted
  ./sitebench exchange altered [SITE ...]
  ./sitebench exchange status
  ./sitebench exchange prune [--days N]
  ./sitebench exchange refill SITE/RUN"""

description = (
    "make a protected results repository, migrate to it, list refused commits and altered "
    "runs, show and prune what the exchange costs on disk"
)

section = "exchange"

example = """
  ./sitebench exchange init-remote /srv/git/results.git   # a repository that guards itself
  ./sitebench exchange upgrade-remote /srv/git/results.git  # after updating sitebench
  ./sitebench exchange migrate --site mycluster  # once: results/ leaves the code's remote
  ./sitebench exchange quarantine               # the incoming commits refused here, and why
  ./sitebench exchange quarantine --rejudge     # after trust add/remove: judge them again
  ./sitebench exchange restore                  # after a history rewrite on the remote
  ./sitebench exchange accepted                 # the commit a joining site pins (pull --expect)
  ./sitebench exchange altered local            # runs changed after they were indexed
  ./sitebench exchange status                   # runs, bytes on disk and packed, per site
  ./sitebench exchange prune --days 30          # drop other sites' run copies older than 30 days
  ./sitebench exchange refill beta/20261122T111440Z-ebb65a   # its outputs back
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
    upgrade = sub.add_parser(
        "upgrade-remote", help="give a repository init-remote made this version's checks"
    )
    upgrade.add_argument("path")
    mig = sub.add_parser("migrate", help="connect results/ to its own exchange, once")
    mig.add_argument("--site", required=True)
    quar = sub.add_parser("quarantine", help="the incoming commits refused here, and why")
    quar.add_argument(
        "--rejudge",
        nargs="*",
        metavar="COMMIT",
        help="verify these refused commits again (default: all) under today's trust list, "
        "as a pull does; what passes has its runs taken",
    )
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
    sub.add_parser(
        "status",
        help="per site: runs, bytes on disk, bytes packed, oldest bulk, refused, limits",
    )
    prune = sub.add_parser(
        "prune",
        help="drop copies of other sites' runs older than N days (identical to the exchange's; "
        "figures and provenance stay there) and old quarantine",
    )
    prune.add_argument(
        "--days", type=int, help="keep copies written in the last N days (default: keep_days)"
    )
    refill = sub.add_parser("refill", help="write back a run (or its bulk) dropped by prune")
    refill.add_argument("run", metavar="SITE/RUN")


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
    elif args.action == "upgrade-remote":
        hook = shared_remote.upgrade_remote(args.path)
        print(f"{hook} now checks pushes as this sitebench's pull does; trust and limits kept")
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
    elif args.action in ("status", "prune", "refill"):
        return {"status": _status, "prune": _prune, "refill": _refill}[args.action](args)
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
    elif args.rejudge is not None:
        return _rejudge(args.rejudge)
    else:
        from sitebench.results import quarantine, rejudge

        ex = exchange.Exchange(exchange.paths.results_dir())
        rows = quarantine.log_rows(ex.git_dir)
        later = rejudge.accepted_before(ex)
        if not rows:
            print("nothing refused")
        for when, commit, site, reason in rows:
            again = f" (judged again {later[commit][0]}: accepted)" if commit in later else ""
            print(shown(f"{when} {commit[:12]} {site + ' ' if site else ''}{reason}{again}"))
    return 0


def _rejudge(commits):
    """One line per commit judged again; exit 3 (as pull) when some stay refused."""
    from sitebench.common.terminal import shown
    from sitebench.results import rejudge
    from sitebench.results.exchange import REFUSED_EXIT

    done = rejudge.rejudge(commits=commits)
    if not (done.accepted or done.refused or done.before):
        print("nothing refused here: nothing to judge again")
    for commit, site, runs in done.accepted:
        names = f" ({', '.join(runs[:3])}{', ...' if len(runs) > 3 else ''})" if runs else ""
        print(shown(f"accepted {commit[:12]} {site}: {len(runs)} run(s) taken{names}"))
    for commit in done.before:
        print(f"accepted {commit[:12]} before (an earlier --rejudge): nothing to do")
    for commit, site, reason in done.refused:
        print(shown(f"still refused {commit[:12]} {site}: {reason}"))
    for line in done.set_aside:
        print(shown(f"SET ASIDE {line}"))
    if done.refused:
        print(
            f"{len(done.refused)} commit(s) stay in quarantine; a refusal caused by this "
            "site's list goes once the list is fixed (./sitebench trust add / remove) and "
            "--rejudge runs again"
        )
        return REFUSED_EXIT
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


def _connected():
    from sitebench.common.errors import SitebenchError
    from sitebench.results import exchange

    ex = exchange.Exchange(exchange.paths.results_dir())
    if not ex.exists:
        raise SitebenchError(
            f"{ex.results_root} is not connected to a results repository",
            "./sitebench pull --remote URL connects it (results/README.md)",
        )
    return ex


def _mib(n):
    return f"{n / 2**20:.1f}"


def _status(args):
    """One row per site; the totals below are those of ``du`` and ``git count-objects``."""
    import time

    from sitebench.results import retention

    ex = _connected()
    rows = retention.status(ex)
    print(
        f"{'site':<16} {'runs':>6} {'on disk':>8} {'w/ bulk':>8} {'disk MiB':>9} "
        f"{'files':>8} {'packed MiB':>10} {'refused':>7}  {'oldest bulk':<16} "
        "limits (per night; total)"
    )
    for r in rows:
        oldest = (
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.oldest_bulk[0]))
            if r.oldest_bulk
            else "-"
        )
        lim = r.limits
        limits = (
            f"{lim['runs_per_night']} runs, {_mib(lim['bytes_per_night'])} MiB; "
            f"{lim['runs_total']} runs, {lim['bytes_total'] / 2**30:.0f} GiB"
            if lim
            else "-"
        )
        print(
            f"{r.site + (' (own)' if r.own else ''):<16} {r.runs:>6} {r.on_disk:>8} "
            f"{r.with_bulk:>8} {_mib(r.disk_bytes):>9} {r.disk_files:>8} "
            f"{_mib(r.packed_bytes):>10} {r.refused:>7}  {oldest:<16} {limits}"
        )
    from sitebench.common.terminal import shown
    from sitebench.results import refused_figures, registry, store

    for site, runs in sorted(registry.retracted(ex).items()):
        print(shown(store.retracted_message(site, runs)))
    for site, runs in sorted(refused_figures.listed(ex).items()):
        print(shown(refused_figures.message(site, runs)))
    for line in registry.aside_lines(ex):
        print(shown(f"SET ASIDE {line}"))
    disk, files = retention.du_bytes(ex.results_root)
    print(
        f"results/ on disk: {_mib(disk)} MiB in {files} files (du -s, .exchange included); "
        f"exchange packed: {_mib(retention.packed_bytes(ex))} MiB (git count-objects -v)"
    )
    return 0


def _prune(args):
    from sitebench.common.errors import SitebenchError
    from sitebench.results import limits, retention

    ex = _connected()
    days = args.days
    if days is None:
        days = limits.configured(ex.git_dir, ex.setting("site")).get("keep_days")
    if days is None or days < 0:
        raise SitebenchError(
            "how long to keep other sites' run bulk is not set",
            "give --days N, or set results: keep_days: N in this site's site.yaml",
        )
    done = retention.prune(ex, days)
    freed = sum(size for *_, size, _ in done.dropped)
    files = sum(n for *_, n in done.dropped)
    if done.backfilled:
        print(
            f"logged {len(done.backfilled)} run(s) of other sites that an earlier version "
            "pulled as files, from the accepted history"
        )
    print(
        f"dropped {len(done.dropped)} copies of other sites' runs older than {days} "
        f"day(s): {_mib(freed)} MiB in {files} files, each identical to its accepted tree "
        "(figures and provenance are read from the exchange; ./sitebench show SITE/RUN "
        "writes a run again)"
    )
    for site, run, why in done.kept:
        print(f"kept {site}/{run}: {why}")
    print(
        f"quarantine: {done.refs_dropped} ref(s) dropped; exchange packed "
        f"{_mib(done.packed_before)} -> {_mib(done.packed_after)} MiB; {done.seconds:.1f} s"
    )
    return 0


def _refill(args):
    from sitebench.common.errors import SitebenchError
    from sitebench.common.names import check_name
    from sitebench.results import retention

    site, _, run = args.run.partition("/")
    if not run:
        raise SitebenchError(f"{args.run!r} is not SITE/RUN", "e.g. beta/20261127T010203Z-ab12cd")
    ex = _connected()
    written = retention.refill(ex, check_name("site", site), check_name("run", run))
    print(
        f"{site}/{run}: " + (f"wrote back {', '.join(written)}" if written else "nothing missing")
    )
    return 0
