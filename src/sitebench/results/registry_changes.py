"""Changes to the federation's registry (:mod:`sitebench.results.registry`): the host
registers a site, a site rotates or revokes its key. Each change is one commit signed with
the key allowed to make it, on top of the history this site accepted (what it refused left
out and named, as publish does), pushed like a publish: hence here, above the exchange, and
not in the registry's reading half, which the exchange itself uses.
"""

import os
import time
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.results import exchange, registry, trust, verify


def register(ex, site, keyfile, valid_after=None):
    """The host adds ``site``'s key to the registry (made, with the host's key first, on
    the first use); the pushed commit."""
    check_name("site", site)
    key = trust.key_line(keyfile)
    options = {"valid-after": trust.stamp(valid_after)} if valid_after else {}
    path, public = registry.host_key()
    if not registry.pinned():
        registry.pin(verify.fingerprint(public))  # the host trusts the sites it registers

    def lines(text):
        _, keys = registry.state(text)
        held = [
            fp
            for (principal, fp), (opts, _) in keys.items()
            if principal == site and not opts.get("valid-before")
        ]
        if held:
            raise SitebenchError(
                f"{site} is registered already, with the key {held[0]}: a site name is "
                "unique in the federation",
                f"a new key of {site} is announced by {site} (./sitebench trust rotate "
                f"{site}); a lost one is revoked first (trust revoke {site} --since TIME "
                "--shared), then registered; another site takes another name",
            )
        start = (
            [] if text else [registry.entry_line(verify.HOST, {}, " ".join(public.split()[:3]))]
        )
        return start + [registry.entry_line(site, options, key)]

    return change(ex, path, lines, f"registry: {site} registered")


def rotate(ex, site):
    """``site`` announces its next key under its current one, which ends now; the new key
    is this site's from then on (the old one is kept as ``<site>.retired-<time>``)."""
    old = trust.site_key(site)
    if old is None:
        raise SitebenchError(
            f"{site} has no signing key here to rotate",
            "./sitebench trust key SITE makes it; the host registers it",
        )
    fresh = old.with_name(f"{site}.next")
    trust.make_key(fresh, f"sitebench-{site}", replace=not Path(f"{fresh}.pub").is_file())
    old_key = trust.key_line(f"{old}.pub")
    new_key = trust.key_line(f"{fresh}.pub")
    # The old key's last second is the one after the commit is made (OpenSSH includes
    # valid-before), the new key's first the next: every commit has one key valid for it.
    last = []

    def lines(_text):
        last.append(int(time.time()) + 1)
        return [
            registry.entry_line(site, {"valid-before": registry.utc(last[-1])}, old_key),
            registry.entry_line(site, {"valid-after": registry.utc(last[-1] + 1)}, new_key),
        ]

    commit = change(ex, old, lines, f"registry: {site} rotates its key")
    time.sleep(max(0.0, last[-1] + 1 - time.time()))
    now = registry.utc(last[-1] + 1)
    retired = old.with_name(f"{site}.retired-{now}")
    os.replace(f"{old}.pub", f"{retired}.pub")
    os.replace(old, retired)
    os.replace(f"{fresh}.pub", f"{old}.pub")
    os.replace(fresh, old)
    return commit, verify.fingerprint(new_key), now


def revoke(ex, site, since, fp=None):
    """A revocation every site learns: ``site``'s keys (or the one ``fp``) valid only before
    ``since``, signed by the host's key when this host has it, else by the site's own."""
    check_name("site", site)
    # Refused from ``since`` on: OpenSSH's valid-before is the key's last valid second.
    stamp = registry.utc(registry.seconds(trust.stamp(since)) - 1)
    shown = trust.stamp(since)
    host = trust.keys_dir() / registry.HOST_KEY
    signer = host if host.is_file() else trust.site_key(site)
    if signer is None:
        raise SitebenchError(
            f"neither the host's key nor {site}'s is here to sign its revocation",
            "run it on the host, or on the site with its key",
        )

    def lines(text):
        _, keys = registry.state(text)
        found = [
            registry.entry_line(site, {"valid-before": stamp}, key)
            for (principal, key_fp), (_, key) in keys.items()
            if principal == site and (fp is None or key_fp == fp)
        ]
        if not found:
            raise SitebenchError(
                f"the registry holds no key of {site}" + (f" of fingerprint {fp}" if fp else ""),
                "./sitebench trust list shows the keys; the host registers a site first",
            )
        return found

    return change(ex, signer, lines, f"registry: {site} revoked from {shown}")


def change(ex, key, lines, subject, retries=3):
    """Append ``lines(text)`` to the registry of the history accepted here and push it as one
    commit signed with ``key`` on top of the remote's branch (what this site refused is left
    out and named, as publish does). The pushed commit."""
    with ex.locked():
        for _ in range(retries + 1):
            tip = exchange._fetched(ex)
            pulled = ex.accept(tip, exchange._rules(ex))
            if pulled.rewritten:
                raise SitebenchError(pulled.refused[0], exchange.RESTORE_HINT)
            accepted = ex.rev(exchange.ACCEPTED)
            text = registry.text_at(ex, accepted)
            new = text + "".join(f"{line}\n" for line in lines(text))
            aside = {}
            for site, run, commit, *rest in registry.retract(ex, new, write=False):
                aside.setdefault(site, {})[run] = (commit, *rest)
            commit = _commit(ex, tip, accepted, new, key, subject, pulled.left_out, aside)
            proc = ex.push(commit)
            if proc.returncode == 0:
                ex.git("update-ref", exchange.ACCEPTED, commit)
                registry.sync(ex, commit)
                return commit
            if exchange._refused_for_good(proc.stdout + proc.stderr):
                break
        raise SitebenchError(
            f"the remote refused the registry change: {exchange._reason(proc.stderr + proc.stdout)}",
            "read the remote's reason; pull and try again if another site pushed meanwhile",
        )


def _commit(ex, parent, base, text, key, subject, left_out, aside):
    blob = ex.git("hash-object", "-w", "--stdin", stdin=text).stdout.strip()
    folder = ex.git("mktree", stdin=f"100644 blob {blob}\tallowed_signers\n").stdout.strip()
    top = ex._entries(base) if base else []
    top = [e for e in top if e.split("\t", 1)[1] != verify.REGISTRY_DIR]
    top.append(f"040000 tree {folder}\t{verify.REGISTRY_DIR}")
    tree = ex.git("mktree", "-z", "--missing", stdin="".join(e + "\0" for e in top)).stdout.strip()
    # The runs this change retracts leave the tree it signs (named, as publish does).
    tree, dropped = ex.without_runs(tree, ex.setting("prefix", ""), aside)
    left_out = [*left_out, *(c for c in dropped if c not in left_out)]
    message = f"{subject}\n\nChanged by ./sitebench trust.\n"
    if left_out:
        message += "\n" + "".join(f"{verify.LEFT_OUT}: {c}\n" for c in left_out)
    args = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={key}", "commit-tree", "-S", tree]
    args += ["-p", parent] if parent else []
    return ex.git(*args, "-m", message).stdout.strip()
