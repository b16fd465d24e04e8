"""Which sites' runs this site accepts, signed by which keys. The list is OpenSSH's
allowed_signers file in ~/.config/sitebench/trust/ ($SITEBENCH_TRUST_DIR): outside the
checkout and the exchange, so no push and no git pull can change it.

  ./sitebench trust key SITE            this site's public key (made if missing): send it
  ./sitebench trust add SITE KEYFILE [--valid-after TIME] [--valid-before TIME]
                                        accept SITE's runs signed by that key (in that period)
  ./sitebench trust revoke SITE --since TIME [--fingerprint SHA256:...]
                                        a stolen key: commits it signed from TIME on refused
  ./sitebench trust list
  ./sitebench trust remove SITE [--fingerprint SHA256:...]
  ./sitebench trust allow-unsigned SITE INSECURE: anyone who can push publishes as SITE

The federation's registry (.sitebench-registry/allowed_signers in the results repository,
append-only, each change a signed commit), through this results directory's exchange:

  ./sitebench trust host-key            the host's registry key (made if missing): its fingerprint
                                        is what joining sites pin
  ./sitebench trust register SITE KEYFILE [--valid-after TIME]      (the host) a site's key
  ./sitebench trust rotate SITE         (the site) a new key announced under the old one
  ./sitebench trust revoke SITE --since TIME --shared               recorded in the registry
  ./sitebench trust import --host SHA256:...   every registered key taken in; then each pull

add, list, remove and allow-unsigned with --remote PATH change the trust list of a results
repository this host keeps (made by ./sitebench exchange init-remote PATH), which its
pre-receive hook checks every push against."""

description = "manage the keys trusted to sign each site's runs"

section = "exchange"

example = """
  ./sitebench trust key mycluster               # this site's public key: send it to the others
  ./sitebench trust add othercluster other.pub  # accept othercluster's runs signed by that key
  ./sitebench trust add othercluster new.pub --valid-after 2026-12-01   # a rotated key
  ./sitebench trust revoke othercluster --since 2026-11-27T03:00:00Z   # a stolen key
  ./sitebench trust list
  ./sitebench trust remove othercluster --fingerprint SHA256:3q2+7w...
  ./sitebench trust allow-unsigned oldsite      # insecure: during a migration only
  ./sitebench trust host-key                    # the host: the fingerprint joiners pin
  ./sitebench trust register othercluster other.pub   # the host: into the registry
  ./sitebench trust import --host SHA256:Xq3...  # a site: the registry's keys, pinned host
  ./sitebench trust rotate mycluster            # a new key, announced under the old one
  ./sitebench trust revoke othercluster --since 2026-11-27T03:00:00Z --shared
"""


def setup_parser(p):
    sub = p.add_subparsers(dest="action", required=True)
    key = sub.add_parser("key", help="print this site's public signing key (made if missing)")
    key.add_argument("site")
    add = sub.add_parser("add", help="trust a site's public key (a .pub file)")
    add.add_argument("site")
    add.add_argument("keyfile")
    add.add_argument("--valid-after", metavar="TIME", help="ISO 8601 UTC, e.g. 2026-11-27")
    add.add_argument("--valid-before", metavar="TIME", help="ISO 8601 UTC")
    rev = sub.add_parser(
        "revoke", help="refuse the commits a site's key signed from a time on (a stolen key)"
    )
    rev.add_argument("site")
    rev.add_argument("--since", required=True, metavar="TIME", help="ISO 8601 UTC")
    rev.add_argument("--fingerprint", help="only this key (SHA256:...)")
    rev.add_argument(
        "--shared",
        action="store_true",
        help="record it in the federation's registry (signed by the host's key, or the site's)",
    )
    sub.add_parser("host-key", help="the host's registry key (made if missing), to be pinned")
    reg = sub.add_parser("register", help="(the host) add a site's key to the registry")
    reg.add_argument("site")
    reg.add_argument("keyfile")
    reg.add_argument("--valid-after", metavar="TIME", help="ISO 8601 UTC")
    rot = sub.add_parser("rotate", help="a new key for this site, announced under the old one")
    rot.add_argument("site")
    imp = sub.add_parser("import", help="take the registry's keys (with validity) in")
    imp.add_argument("--host", metavar="SHA256:...", help="the host key's fingerprint to pin")
    ls = sub.add_parser("list", help="the trusted keys, by site")
    rm = sub.add_parser("remove", help="stop trusting a site's keys")
    rm.add_argument("site")
    rm.add_argument("--fingerprint", help="only this key (SHA256:...)")
    un = sub.add_parser(
        "allow-unsigned", help="accept a site's unsigned runs (insecure: for a migration only)"
    )
    un.add_argument("site")
    for each in (add, ls, rm, un, rev):
        each.add_argument(
            "--remote",
            metavar="PATH",
            help="the trust list of the results repository at PATH (exchange init-remote), "
            "not this site's",
        )


def command(args):
    from sitebench.results import trust

    if args.action == "key":
        path, public, made = trust.ensure_site_key(args.site)
        print(public)
        print(("made " if made else "") + f"{path}.pub: give it to the other sites' admins")
    elif args.action == "add":
        fp = trust.add(
            args.site,
            args.keyfile,
            remote=args.remote,
            valid_after=args.valid_after,
            valid_before=args.valid_before,
        )
        print(f"trusted for {args.site}: {fp} ({_where(trust, args.remote)})")
        _rejudge_hint(args.remote)
    elif args.action in ("host-key", "register", "rotate", "import") or (
        args.action == "revoke" and args.shared
    ):
        return _registry(args)
    elif args.action == "revoke":
        done = trust.revoke(args.site, args.since, args.fingerprint, remote=args.remote)
        if not done:
            print(f"{args.site}: no key trusted here to revoke")
            return 1
        print(
            f"{args.site}: {done} key(s) valid only before {args.since}: commits they signed "
            "from then on are refused"
        )
    elif args.action == "list":
        rows = trust.listing(remote=args.remote)
        if not rows:
            print(f"no site trusted ({_where(trust, args.remote)})")
        for site, fp, comment in rows:
            print(f"{site:20} {fp}  {comment}".rstrip())
    elif args.action == "remove":
        gone = trust.remove(args.site, args.fingerprint, remote=args.remote)
        print(f"{args.site}: {gone} entr{'y' if gone == 1 else 'ies'} removed")
        if gone:
            _rejudge_hint(args.remote)
        return 0 if gone else 1
    else:
        trust.allow_unsigned(args.site, remote=args.remote)
        print(
            f"WARNING: unsigned runs of {args.site} are now accepted: anyone who can push to "
            "the results repository can publish in its name (./sitebench trust remove "
            f"{args.site} ends it)"
        )
    return 0


def _rejudge_hint(remote):
    """The commits refused here before this change are not judged again by themselves
    (results/README.md, "Judged again, on request"): say how, when there are any."""
    if remote:
        return  # a hosted list: the remote's hook judges the pushes to come
    from sitebench.results import exchange, rejudge

    ex = exchange.Exchange(_results())
    waiting = len(rejudge.waiting(ex)) if ex.exists else 0
    if waiting:
        print(
            f"{waiting} commit(s) refused here before stay refused: ./sitebench exchange "
            "quarantine --rejudge judges them again under this list"
        )


def _where(trust, remote):
    return trust.hosted(remote)[0] if remote else trust.allowed_signers_file()


def _registry(args):
    from sitebench.results import exchange, registry, registry_changes

    if args.action == "host-key":
        path, public = registry.host_key()
        from sitebench.results.verify import fingerprint

        print(public)
        print(f"{fingerprint(public)}: joining sites pin it (./sitebench trust import --host)")
        return 0
    if args.action == "import" and args.host and not exchange.Exchange(_results()).exists:
        # A joiner pins the host first: its first pull takes the registry in before it
        # judges any run.
        registry.pin(args.host)
        print(f"pinned the host key {args.host}: the first pull takes the registry in")
        return 0
    ex = exchange.open_exchange(None)
    if args.action == "register":
        commit = registry_changes.register(ex, args.site, args.keyfile, args.valid_after)
        print(f"{args.site} registered in the federation's registry (commit {commit[:12]})")
    elif args.action == "rotate":
        commit, fp, since = registry_changes.rotate(ex, args.site)
        print(
            f"{args.site}: new key {fp}, valid from {since}; the old one ends then ({commit[:12]})"
        )
    elif args.action == "revoke":
        commit = registry_changes.revoke(ex, args.site, args.since, args.fingerprint)
        print(
            f"{args.site}: revoked from {args.since} in the registry (commit {commit[:12]}); "
            "every site learns it on pull"
        )
    else:
        sites, keys, retracted = registry.import_registry(ex, args.host)
        print(f"imported {keys} key(s) of {len(sites)} site(s): {', '.join(sites)}")
        for site, run, _, key, since in retracted:
            print(f"retracted {site}/{run}: signed by {key} at or after {since}")
        from sitebench.common.terminal import shown

        for line in registry.aside_lines(ex):
            print(shown(f"SET ASIDE {line}"))
    return 0


def _results():
    from sitebench.common import paths

    return paths.results_dir()
