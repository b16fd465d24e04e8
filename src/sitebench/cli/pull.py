"""Bring every site's runs from the results repository (this checkout's remote, or the
separate results repository results/ is a clone of; an empty or missing results directory
becomes a clone of --remote URL). Runs committed here and not yet published stay on top."""

description = "bring every site's runs from the results repository"


def setup_parser(p):
    p.add_argument(
        "--site", help="take the remote and branch from this site's site.yaml (results:)"
    )
    p.add_argument("--remote", help="a remote, or the URL or path (default: origin)")
    p.add_argument("--branch", help="default: the remote's default branch")


def command(args):
    from sitebench.results.exchange import pull, results_settings

    remote, branch = args.remote, args.branch
    if args.site:
        settings = results_settings(args.site)
        remote = remote or settings.get("remote")
        branch = branch or settings.get("branch")
    found = pull(remote=remote, branch=branch)
    if not found:
        print("pulled: no new runs")
    for site, runs in found:
        print(
            f"pulled {site}: {len(runs)} new run{'s' if len(runs) != 1 else ''}"
            + (f" ({runs[0]} .. {runs[-1]})" if runs else "")
        )
    return 0
