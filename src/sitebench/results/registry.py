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

import calendar
import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.common.files import read_runs_table, write_atomic, write_runs_table
from sitebench.results import trust, verify
from sitebench.results.site_warnings import one_line

#: The host's signing key in the keys directory: not a site name (those start with a letter
#: or a digit), so no site's key is ever taken for it.
HOST_KEY = "_host"
PINNED = "registry-host"
IMPORTED = "sitebench.registryimported"
RETRACTED = "sitebench-retracted.tsv"
#: The registry lines set aside here (a key this site's own list trusts for another site),
#: with the registry blob and the local list they were judged against.
ASIDE = "sitebench-registry-aside.json"


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


def utc(epoch):
    """A registry time stamp (OpenSSH's form) of ``epoch`` seconds."""
    return time.strftime("%Y%m%d%H%M%SZ", time.gmtime(epoch))


def seconds(stamp):
    """The epoch seconds of a registry time stamp."""
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


def entry_line(principal, options, key):
    shown = ",".join(f'{name}="{value}"' for name, value in sorted(options.items()))
    return f"{principal} {shown} {key}" if shown else f"{principal} {key}"


def signer_lines(text):
    """The allowed_signers lines of every site's key in the registry, with its validity."""
    _, keys = state(text)
    return [
        entry_line(principal, options, key)
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
    aside = _merge(ex, text, _blob_at(ex, accepted))
    retracted = retract(ex, text)
    taken = [ln for ln in lines if (ln.split()[0], verify.fingerprint(ln)) not in aside]
    return sorted({ln.split()[0] for ln in taken}), len(taken), retracted


def pin(fp):
    if not re.fullmatch(r"SHA256:[A-Za-z0-9+/]{43}", fp):
        raise SitebenchError(f"{fp!r} is not a key fingerprint", "give it as SHA256:...")
    trust.trust_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomic(trust.trust_dir() / PINNED, fp + "\n")


def sync(ex, commit):
    """On pull, once this site pinned a host: import the registry of ``commit`` (verified)
    when it changed since the last import, or when lines were set aside and this site's
    list changed since; whether this site's list changed."""
    if not pinned():
        return False
    blob = _blob_at(ex, commit)
    if not blob:
        return False
    record = _aside_record(ex)
    signers = _signers_text()
    if record:
        if record.get("blob") == blob and record.get("signers") == _digest(signers):
            return False  # set aside against this very list: judged already
    elif blob == ex.setting_of(IMPORTED):
        return False
    text = text_at(ex, commit)
    if host_of(text) != pinned():
        return False  # verification pins it too (rules.registry_host): never taken
    _merge(ex, text, blob)
    retract(ex, text)
    return _signers_text() != signers


def _merge(ex, text, blob):
    """Merge the registry ``text`` (of ``blob``) into this site's list. IMPORTED records the
    blob only when nothing was set aside; otherwise the lines set aside are kept with the
    list they were judged against, so a pull after that list changed takes them again."""
    aside = trust.merge_lines(signer_lines(text))
    path = ex.git_dir / ASIDE
    if aside:
        ex.git("config", "--unset", IMPORTED, check=False)
        record = {"blob": blob, "signers": _digest(_signers_text()), "aside": aside}
        write_atomic(path, json.dumps(record, indent=1) + "\n")
    else:
        path.unlink(missing_ok=True)
        ex.git("config", IMPORTED, blob)
    return {(site, fp) for site, fp, _ in aside}


def _signers_text():
    try:
        return trust.allowed_signers_file().read_bytes()
    except FileNotFoundError:
        return b""


def _digest(data):
    return hashlib.sha256(data).hexdigest()


def _aside_record(ex):
    try:
        record = json.loads((ex.git_dir / ASIDE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def set_aside(ex):
    """[(site, fingerprint, [sites here])] of the registry lines set aside here."""
    rows = _aside_record(ex).get("aside", [])
    return [(site, fp, list(others)) for site, fp, others in rows]


def aside_lines(ex):
    """One line per announcing site of the registry lines set aside here, with the fix."""
    by_site = {}
    for site, fp, others in set_aside(ex):
        names, holder = " and ".join(others), others[0] if len(others) == 1 else "SITE"
        by_site.setdefault(site, []).append(
            f"{site}: the registry gives it the key {fp}, which this site trusts for "
            f"{names}: set aside (here that key signs for {names} only, never as {site}); "
            f"if {names} gave this key to {site}: ./sitebench trust remove {holder} "
            f"--fingerprint {fp} and pull again; else tell the host"
        )
    return [one_line(site, lines, "registry keys set aside") for site, lines in by_site.items()]


def retry_aside(ex):
    """A pull with nothing new judges the set-aside lines again when this site's list
    changed (``trust remove``); the lines still set aside, one per announcing site."""
    if not (ex.git_dir / ASIDE).exists():
        return []  # the usual pull: no git process more
    sync(ex, "refs/sitebench/accepted")  # one git process: the registry's blob there
    return aside_lines(ex)


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
            if since and utc(when) > since:
                rows.append((site, run, commit, fp, since))
    if write:
        write_runs_table(ex.git_dir / RETRACTED, rows)
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
    return read_runs_table(ex.git_dir / RETRACTED, 5)
