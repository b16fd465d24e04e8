"""Send this site's new runs to the results repository, in one commit signed with the
site's SSH key (made on first use; ./sitebench trust key SITE prints it for the other
sites). Incoming runs are verified first, as by pull. Only <site>/<run>/ files travel: never
code or configuration. A remote that is down leaves the runs here: the next publish sends
them; a remote's refusal is shown and not retried. Exit 0 published (or nothing new), 1 not
published, 3 published but incoming commits were refused (as pull)."""

from sitebench.cli.common import add_site_argument

description = "send this site's new runs, signed, to the results repository"

section = "exchange"

example = """
  ./sitebench publish --site mycluster          # this site's new runs, in one signed commit
"""


def setup_parser(p):
    add_site_argument(p)
    p.add_argument(
        "--remote",
        help="the results repository's URL or path (default: results.remote of site.yaml)",
    )
    p.add_argument("--branch", help="default: results.branch of site.yaml, else main")
    p.add_argument("--retries", type=int, default=5, help="pushes tried again (default 5)")


def command(args):
    from sitebench.common.terminal import shown
    from sitebench.results import trust
    from sitebench.results.exchange import REFUSED_EXIT, RESTORE_HINT, publish

    key, public, made = trust.ensure_site_key(args.site)
    if made:
        print(f"made the signing key of {args.site}: {key}")
        print(f"give the other sites its public half ({key}.pub):\n  {public}")
    done = publish(args.site, remote=args.remote, branch=args.branch, retries=args.retries)
    for line in done.refused:
        print(shown(f"REFUSED incoming {line}"))
    runs = ", ".join(done.runs) or "none new"
    if done.published:
        print(f"published {args.site}: {runs}" + (f" ({done.commit[:12]})" if done.commit else ""))
        if done.refused:
            # As pull says it: what came in was refused, though this site's runs went out.
            print(
                f"runs refused: {len(done.refused)} incoming commit(s) kept aside "
                "(./sitebench exchange quarantine lists them)"
            )
            return REFUSED_EXIT
        return 0
    print(shown(f"not published: {done.reason}"))
    if done.rewritten:
        print(RESTORE_HINT)
    print("the runs stay here: the next publish sends them")
    return 1
