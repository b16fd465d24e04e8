"""Bring every site's runs from the results repository. Every incoming commit is verified
first (only new runs, regular files, sizes, each run signed by a key trusted here for its
site: results/README.md); a refused commit is kept aside under refs/sitebench/quarantine/
and named, the accepted ones around it still arrive. Exit 0: all taken; 3: some refused."""

description = "bring every site's verified runs from the results repository"

section = "exchange"

example = """
  ./sitebench pull --remote ssh://git.example.org/sitebench-results.git   # once: connects results/
  ./sitebench pull                              # then: every site's new, verified runs
"""


def setup_parser(p):
    p.add_argument(
        "--site", help="take the remote and branch from this site's site.yaml (results:)"
    )
    p.add_argument("--remote", help="the results repository's URL or path (first pull only)")
    p.add_argument("--branch", help="default: main")
    p.add_argument(
        "--expect",
        metavar="COMMIT",
        help="a commit the remote's branch must hold (a joining site pins the history it "
        "joins: a site it knows prints it with ./sitebench exchange accepted)",
    )


def _per_site(lines, site_of, what):
    from sitebench.results.site_warnings import one_line

    grouped = {}
    for line in lines:
        grouped.setdefault(site_of(line), []).append(line)
    return [one_line(site, found, what) for site, found in grouped.items()]


def _retention(site):
    """A site that set results.keep_days drops old bulk of other sites' runs after a pull."""
    from sitebench.results import exchange, limits, retention

    ex = exchange.Exchange(exchange.paths.results_dir())
    keep_days = limits.configured(ex.git_dir, site or ex.setting("site")).get("keep_days")
    if keep_days and ex.exists:
        done = retention.prune(ex, keep_days)
        if done.dropped:
            freed = sum(size for *_, size, _ in done.dropped)
            print(
                f"retention (keep_days {keep_days}): dropped {len(done.dropped)} copies of "
                f"other sites' runs, {freed / 2**20:.1f} MiB"
            )


def command(args):
    from sitebench.common.terminal import shown
    from sitebench.results.exchange import REFUSED_EXIT, RESTORE_HINT, pull, results_settings
    from sitebench.results.site_warnings import one_line, refused_by_site

    remote, branch = args.remote, args.branch
    if args.site:
        settings = results_settings(args.site)
        remote = remote or settings.get("remote")
        branch = branch or settings.get("branch")
    done = pull(remote=remote, branch=branch, expect=args.expect, site=args.site)
    if not done.new:
        print("pulled: no new runs")
    for site, runs in done.new:
        print(
            f"pulled {site}: {len(runs)} new run{'s' if len(runs) != 1 else ''}"
            + (f" ({runs[0]} .. {runs[-1]})" if runs else "")
        )
    if done.new:
        print("their figures and provenance are here; a run's outputs: ./sitebench show SITE/RUN")
    if done.whole:
        print("the remote ignored the blob filter: every run came whole (correct, larger)")
    for line in _per_site(done.kept, lambda line: line.split("/", 1)[0], "runs"):
        print(shown(f"kept the copy here: {line}"))
    # One line per site, whatever the number of its commits refused (the log has each).
    for site, lines in refused_by_site(done.refusals).items():
        print(shown(f"REFUSED {one_line(site, lines, 'commits refused')}"))
    for line in done.set_aside:
        print(shown(f"SET ASIDE {line}"))
    if len(done.refused) > len(done.refusals):  # the branch itself (deleted)
        for line in done.refused[len(done.refusals) :]:
            print(shown(f"REFUSED {line}"))
    _retention(args.site)
    if done.refused:
        print(
            f"runs refused: {len(done.refused)} commit(s) kept aside "
            "(./sitebench exchange quarantine lists them)"
        )
        if done.baseline_refused:
            print(
                "the history accepted here was refused as a rewrite by another site's "
                "restore (this site joined while the branch was rewritten): pin the history "
                "the other sites hold with ./sitebench pull --expect COMMIT (never restore)"
            )
        elif done.rewritten:
            print(RESTORE_HINT)
        return REFUSED_EXIT
    return 0
