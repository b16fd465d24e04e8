"""Commit this site's new runs (only results/<site>/<run>/, never code, configs or another
site's files) and push them to the results repository: this checkout's remote or a separate
repository (results.remote in site-configs/<site>/site.yaml; results/README.md). When
another site pushed in between, the runs are rebased and pushed again. A remote that is down
leaves them committed here: the next publish pushes them."""

from sitebench.cli.common import add_site_argument

description = "commit this site's new runs and push them to the results repository"


def setup_parser(p):
    add_site_argument(p)
    p.add_argument(
        "--remote",
        help="a remote of the results repository, or its URL or path "
        "(default: results.remote of site.yaml, else origin)",
    )
    p.add_argument(
        "--branch", help="default: results.branch of site.yaml, else the remote's default"
    )
    p.add_argument("--retries", type=int, default=5, help="pushes tried again (default 5)")


def command(args):
    from sitebench.results.exchange import publish

    done = publish(args.site, remote=args.remote, branch=args.branch, retries=args.retries)
    runs = ", ".join(done.runs) or "none new"
    if done.published:
        print(f"published {args.site}: {runs}" + (f" ({done.commit[:12]})" if done.commit else ""))
        return 0
    print(f"not published: {done.reason}")
    if done.runs:
        print(f"committed here, pushed by the next publish: {runs}")
    return 1
