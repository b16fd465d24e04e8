"""Bring every site's runs from the results repository. Every incoming commit is verified
first (only new runs, regular files, sizes, each run signed by a key trusted here for its
site: results/README.md); a refused commit is kept aside under refs/sitebench/quarantine/
and named, the accepted ones around it still arrive. Exit 0: all taken; 3: some refused."""

description = "bring every site's verified runs from the results repository"


def setup_parser(p):
    p.add_argument(
        "--site", help="take the remote and branch from this site's site.yaml (results:)"
    )
    p.add_argument("--remote", help="the results repository's URL or path (first pull only)")
    p.add_argument("--branch", help="default: main")


def command(args):
    from sitebench.results.exchange import REFUSED_EXIT, RESTORE_HINT, pull, results_settings

    remote, branch = args.remote, args.branch
    if args.site:
        settings = results_settings(args.site)
        remote = remote or settings.get("remote")
        branch = branch or settings.get("branch")
    done = pull(remote=remote, branch=branch)
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
    for line in done.kept:
        print(f"kept the copy here: {line}")
    for line in done.refused:
        print(f"REFUSED {line}")
    if done.refused:
        print(
            f"runs refused: {len(done.refused)} commit(s) kept aside "
            "(./sitebench exchange quarantine lists them)"
        )
        if done.rewritten:
            print(RESTORE_HINT)
        return REFUSED_EXIT
    return 0
