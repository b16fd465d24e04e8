"""The federation's registry of sites and keys, kept in the results repository itself.

``.sitebench-registry/allowed_signers`` (:data:`sitebench.results.verify.REGISTRY_FILE`) is an
OpenSSH allowed_signers file, append-only: its first line names the host's key (principal
``@host``, the federation's root), each later line gives a site a key or changes a key's
validity (``valid-after``/``valid-before``; a later line for the same key updates it). Each
change is a commit of its own, verified by every site as runs are
(:func:`sitebench.results.verify.check_registry`): the host adds sites and keys, a site ends
its own keys (revocation) and announces its next key under the old one (rotation).

A site takes it in once with ``./sitebench trust import --host FINGERPRINT`` (the host's key
pinned in its trust directory, ``registry-host``); from then on every pull brings the
registry's changes into the local allowed_signers, and the runs already accepted that a
revoked key signed from its ``valid-before`` on are retracted: kept in the exchange, out of
the store (compare, regressions, references), listed in ``.exchange/sitebench-retracted.tsv``.
"""

import os
import re
import subprocess
import time
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic
from sitebench.common.names import check_name
from sitebench.results import trust, verify

#: The host's signing key in the keys directory: not a site name (those start with a letter
#: or a digit), so no site's key is ever taken for it.
HOST_KEY = "_host"
PINNED = "registry-host"
IMPORTED = "sitebench.registryimported"
RETRACTED = "sitebench-retracted.tsv"


def pinned():
    """The host key fingerprint this site pinned (``trust import --host``), or None."""
    try:
        return (trust.trust_dir() / PINNED).read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def host_key():
    """(private key path, public key line) of this host's registry key, made once."""
    path = trust.keys_dir() / HOST_KEY
    trust.make_key(path, "sitebench-host")
    return path, Path(f"{path}.pub").read_text(encoding="utf-8").strip()


def text_at(ex, commit):
    """The registry's text at ``commit`` ("" where it has none)."""
    if not commit:
        return ""
    proc = ex.read("cat-file", "blob", f"{commit}:{verify.REGISTRY_FILE}")
    return proc.stdout.decode("utf-8", errors="replace") if proc.returncode == 0 else ""


def _utc(seconds):
    return time.strftime("%Y%m%d%H%M%SZ", time.gmtime(seconds))


def _seconds(stamp):
    import calendar

    return calendar.timegm(time.strptime(stamp, "%Y%m%d%H%M%SZ"))


def _blob_at(ex, commit):
    proc = ex.read("rev-parse", "-q", "--verify", f"{commit}:{verify.REGISTRY_FILE}")
    return proc.stdout.decode().strip() if proc.returncode == 0 else ""


def state(text):
    entries, _ = verify.registry_entries(text)
    return entries, verify.registry_state(entries)


def host_of(text):
    """The fingerprint of the registry's root: the host key of its first line."""
    entries, _ = state(text)
    return entries[0][1] if entries and entries[0][0] == verify.HOST else None


def _line(principal, options, key):
    shown = ",".join(f'{name}="{value}"' for name, value in sorted(options.items()))
    return f"{principal} {shown} {key}" if shown else f"{principal} {key}"


def signer_lines(text):
    """The allowed_signers lines of every site's key in the registry, with its validity."""
    _, keys = state(text)
    return [
        _line(principal, options, key)
        for (principal, _), (options, key) in keys.items()
        if principal != verify.HOST
    ]


# -- taking it in ------------------------------------------------------------------------


def import_registry(ex, host=None):
    """Take the registry of the history accepted here into the local allowed_signers (each
    of its keys replaces the local line of that site and key); pin the host's key the first
    time (``host``). Returns (sites, keys, retracted runs)."""
    held = pinned()
    if host and held and host != held:
        raise SitebenchError(
            f"this site pinned the host key {held}, not {host}",
            f"remove {trust.trust_dir() / PINNED} only if the federation's host really changed",
        )
    fp = host or held
    if not fp:
        raise SitebenchError(
            "the host's key is not pinned here: a registry is trusted only from the host you "
            "were told of",
            "give its fingerprint: ./sitebench trust import --host SHA256:... (the host "
            "prints it with ./sitebench trust host-key)",
        )
    accepted = ex.rev("refs/sitebench/accepted")
    text = text_at(ex, accepted)
    root = host_of(text)
    if root is None and host:
        # A joiner pins first: its first pull then takes the registry in before it judges
        # the runs (their keys are the registry's).
        pin(fp)
        return [], 0, []
    if root is None:
        raise SitebenchError(
            "the history accepted here holds no registry (.sitebench-registry/allowed_signers)",
            "pull first (./sitebench pull --remote URL --expect COMMIT); the host makes the "
            "registry with ./sitebench trust register SITE KEYFILE",
        )
    if root != fp:
        raise SitebenchError(
            f"the registry accepted here is rooted in {root}, not the host key {fp}",
            "a registry made by someone else: tell the host; nothing was imported",
        )
    pin(fp)
    lines = signer_lines(text)
    trust.merge_lines(lines)
    ex.git("config", IMPORTED, _blob_at(ex, accepted))
    retracted = retract(ex, text)
    return sorted({ln.split()[0] for ln in lines}), len(lines), retracted


def pin(fp):
    if not re.fullmatch(r"SHA256:[A-Za-z0-9+/]{43}", fp):
        raise SitebenchError(f"{fp!r} is not a key fingerprint", "give it as SHA256:...")
    trust.trust_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(trust.trust_dir() / PINNED, fp + "\n")


def sync(ex, commit):
    """On pull, once this site pinned a host: import the registry of ``commit`` (verified)
    when it changed since the last import; whether it did."""
    if not pinned():
        return False
    blob = _blob_at(ex, commit)
    if not blob or blob == ex.setting_of(IMPORTED):
        return False
    text = text_at(ex, commit)
    if host_of(text) != pinned():
        return False  # verification pins it too (rules.registry_host): never taken
    trust.merge_lines(signer_lines(text))
    ex.git("config", IMPORTED, blob)
    retract(ex, text)
    return True


def retract(ex, text, write=True):
    """Set aside the runs accepted here whose commit a key of the registry signed at or
    after the key's ``valid-before``; the list (site, run, commit, key, since) is written
    to ``.exchange/sitebench-retracted.tsv`` anew. Returns it."""
    _, keys = state(text)
    ended = {}
    for (site, fp), (options, _) in keys.items():
        if site != verify.HOST and options.get("valid-before"):
            ended.setdefault(site, {})[fp] = options["valid-before"]
    rows = []
    for site in sorted(ended):
        runs = ex.accepted_runs(site).get(site, {})
        commits = sorted({commit for _, commit in runs.values()})
        signed = _signers(ex, commits)
        for run, (_, commit) in sorted(runs.items()):
            fp, when = signed.get(commit, ("", 0))
            since = ended[site].get(fp)
            if since and _utc(when) > since:
                rows.append((site, run, commit, fp, since))
    if write:
        write_atomic(ex.git_dir / RETRACTED, "".join("\t".join(row) + "\n" for row in rows))
    return rows


def _signers(ex, commits):
    """{commit: (signing key fingerprint, commit time)} (git reads each signature)."""
    if not commits:
        return {}
    proc = subprocess.run(
        [
            "git",
            *exchange_no_fetch(),
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={os.devnull}",
            "--git-dir",
            str(ex.git_dir),
            "log",
            "--no-walk=unsorted",
            "--format=%H %ct %GK",
            *commits,
        ],
        capture_output=True,
        text=True,
    )
    found = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            found[parts[0]] = (parts[2], int(parts[1]))
    return found


def exchange_no_fetch():
    return ["-c", "protocol.allow=never"]


def retracted(ex):
    """{site: {run: (commit, key, since)}} of the runs set aside here."""
    found = {}
    try:
        text = (ex.git_dir / RETRACTED).read_text(encoding="utf-8")
    except FileNotFoundError:
        return found
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == 5:
            found.setdefault(fields[0], {})[fields[1]] = tuple(fields[2:])
    return found


# -- changing it ---------------------------------------------------------------------------


def register(ex, site, keyfile, valid_after=None):
    """The host adds ``site``'s key to the registry (made, with the host's key first, on
    the first use); the pushed commit."""
    check_name("site", site)
    key = trust.key_line(keyfile)
    options = {"valid-after": trust.stamp(valid_after)} if valid_after else {}
    path, public = host_key()
    if not pinned():
        pin(verify.fingerprint(public))  # the host trusts the sites it registers

    def lines(text):
        _, keys = state(text)
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
        start = [] if text else [_line(verify.HOST, {}, " ".join(public.split()[:3]))]
        return start + [_line(site, options, key)]

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
            _line(site, {"valid-before": _utc(last[-1])}, old_key),
            _line(site, {"valid-after": _utc(last[-1] + 1)}, new_key),
        ]

    commit = change(ex, old, lines, f"registry: {site} rotates its key")
    time.sleep(max(0.0, last[-1] + 1 - time.time()))
    now = _utc(last[-1] + 1)
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
    stamp = _utc(_seconds(trust.stamp(since)) - 1)
    shown = trust.stamp(since)
    host = trust.keys_dir() / HOST_KEY
    signer = host if host.is_file() else trust.site_key(site)
    if signer is None:
        raise SitebenchError(
            f"neither the host's key nor {site}'s is here to sign its revocation",
            "run it on the host, or on the site with its key",
        )

    def lines(text):
        _, keys = state(text)
        found = [
            _line(site, {"valid-before": stamp}, key)
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
    from sitebench.results import exchange

    with ex.locked():
        for _ in range(retries + 1):
            tip = exchange._fetched(ex)
            pulled = ex.accept(tip, exchange._rules(ex))
            if pulled.rewritten:
                raise SitebenchError(pulled.refused[0], exchange.RESTORE_HINT)
            accepted = ex.rev(exchange.ACCEPTED)
            text = text_at(ex, accepted)
            new = text + "".join(f"{line}\n" for line in lines(text))
            aside = {}
            for site, run, commit, *rest in retract(ex, new, write=False):
                aside.setdefault(site, {})[run] = (commit, *rest)
            commit = _commit(ex, tip, accepted, new, key, subject, pulled.left_out, aside)
            proc = ex.push(commit)
            if proc.returncode == 0:
                ex.git("update-ref", exchange.ACCEPTED, commit)
                sync(ex, commit)
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
