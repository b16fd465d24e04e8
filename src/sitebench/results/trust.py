"""Which keys this site trusts to publish which sites' runs, and this site's own key.

Kept outside the exchange and the checkout, so that no push and no ``git pull`` can change
it: ``$SITEBENCH_TRUST_DIR`` (default ``~/.config/sitebench/trust``, or
``$SITEBENCH_CONFIG_HOME/trust``) holds

* ``allowed_signers``: OpenSSH's own format, one site per line
  (``beta ssh-ed25519 AAAA... beta@host``), read by git (``gpg.ssh.allowedSignersFile``)
  and by :mod:`sitebench.results.verify`;
* ``unsigned-sites``: sites whose unsigned runs are accepted (insecure: anyone who can push
  can publish in their name; for a migration period only).

A site's signing key is ``$SITEBENCH_KEYS_DIR/<site>`` (default
``~/.config/sitebench/keys``, or ``$SITEBENCH_CONFIG_HOME/keys``), an ed25519 key made with
``ssh-keygen`` on first use; its public half is what the other sites add with
``./sitebench trust add SITE KEYFILE``.
"""

import json
import os
import subprocess
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic
from sitebench.common.names import check_name
from sitebench.results import verify
from sitebench.results.verify import Rules, fingerprint, read_allowed_signers

#: Where a results repository made by ``exchange init-remote`` keeps its trust files (read
#: by its pre-receive hook).
RULES_DIR = "sitebench"


def config_home():
    """The user's sitebench settings outside any checkout (``$SITEBENCH_CONFIG_HOME``)."""
    given = os.environ.get("SITEBENCH_CONFIG_HOME")
    return Path(given) if given else Path.home() / ".config" / "sitebench"


def trust_dir():
    return Path(os.environ.get("SITEBENCH_TRUST_DIR") or config_home() / "trust")


def keys_dir():
    return Path(os.environ.get("SITEBENCH_KEYS_DIR") or config_home() / "keys")


def allowed_signers_file():
    return trust_dir() / "allowed_signers"


def unsigned_file():
    return trust_dir() / "unsigned-sites"


def hosted(repo):
    """The trust files of a results repository this host keeps (``exchange init-remote``):
    (allowed_signers, rules.json) in ``REPO/sitebench/``, read by its pre-receive hook."""
    rules_dir = Path(repo) / RULES_DIR
    signers, settings = rules_dir / "allowed_signers", rules_dir / "rules.json"
    if not (signers.is_file() and settings.is_file()):
        raise SitebenchError(
            f"{repo} is not a results repository made by ./sitebench exchange init-remote "
            f"(no {RULES_DIR}/allowed_signers and rules.json in it)",
            "name the bare repository's directory on this host (--remote PATH); a remote "
            "made with plain git has no trust list of its own: every site checks on pull",
        )
    return signers, settings


def _signers(remote):
    return hosted(remote)[0] if remote else allowed_signers_file()


def _unsigned(remote):
    if remote:
        settings = json.loads(hosted(remote)[1].read_text(encoding="utf-8"))
        return [str(s) for s in settings.get("unsigned_sites", [])]
    return [s.strip() for s in _lines(unsigned_file()) if s.strip()]


def _set_unsigned(remote, sites):
    if remote:
        path = hosted(remote)[1]
        settings = json.loads(path.read_text(encoding="utf-8"))
        settings["unsigned_sites"] = sorted(sites)
        _keeping_mode(path, lambda: write_atomic(path, json.dumps(settings, indent=2) + "\n"))
    else:
        _write(unsigned_file(), sites)


def _lines(path):
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _keeping_mode(path, lambda: write_atomic(path, "".join(line + "\n" for line in lines)))


def _keeping_mode(path, write):
    """A hosted repository's hook runs as whichever user pushes (a group's members): the
    rewritten file keeps the mode it had, so they can still read it."""
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    write()
    if mode is not None:
        path.chmod(mode)


def key_line(keyfile):
    """The one public key line of ``keyfile`` (a .pub file or an authorized_keys-style line)."""
    path = Path(keyfile)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SitebenchError(
            f"cannot read the public key {keyfile} ({err})",
            "name the site's public key file (the .pub its admin sent, one line ssh-ed25519 ...)",
        ) from None
    keys = [ln.strip() for ln in text.splitlines() if fingerprint(ln.strip())]
    if len(keys) != 1 or "PRIVATE KEY" in text:
        raise SitebenchError(
            f"{keyfile} is not one SSH public key ({len(keys)} key lines found)",
            "name the site's public key file: one line 'ssh-ed25519 AAAA... comment'",
        )
    parts = keys[0].split()
    start = next(i for i, p in enumerate(parts) if p.startswith(("ssh-", "ecdsa-", "sk-")))
    return " ".join(parts[start : start + 3])


def add(site, keyfile, remote=None, valid_after=None, valid_before=None):
    """Trust the key in ``keyfile`` for ``site`` (here, or in the hosted repository
    ``remote``), for commits made in its validity period if one is given (OpenSSH's
    ``valid-after``/``valid-before``, which git checks at each commit's time); return its
    fingerprint. Adding a key trusted already changes only its period."""
    check_name("site", site)
    key = key_line(keyfile)
    fp = fingerprint(key)
    signers = _signers(remote)
    lines = _lines(signers)
    options = ",".join(
        f'{name}="{stamp(when)}"'
        for name, when in (("valid-after", valid_after), ("valid-before", valid_before))
        if when
    )
    line = f"{site} {options} {key}" if options else f"{site} {key}"
    _one_site_per_key([(site, fp)], lines, signers)
    same = [ln for ln in lines if _entry(ln)[:2] == (site, fp)]
    if same and (not options or same == [line]):
        return fp
    _write(signers, [ln for ln in lines if ln not in same] + [line])
    return fp


def _one_site_per_key(adding, lines, signers, fix=None):
    """Refuse to trust a key for a site when ``lines`` trust it for another already;
    ``fix(site, others, fp)`` is the hint (default: the site makes its own key)."""
    owners = {}
    for principal, fp, _, _ in map(_entry, lines):
        if fp:
            owners.setdefault(fp, set()).add(principal)
    for site, fp in adding:
        others = sorted(owners.get(fp, set()) - {site})
        if others:
            raise SitebenchError(
                f"{signers}: {verify.shared_key_reason(fp, sorted({site, *others}))}",
                fix(site, others, fp) if fix else _own_key_hint(site),
            )


def _own_key_hint(site):
    return (
        f"nothing was changed; {site} makes its own key with ./sitebench trust key {site}, "
        "and you trust that one"
    )


def check_one_key_per_site(trusted, signers):
    """Refuse a trust list giving one key to two sites (a hand-written allowed_signers)."""
    for fp, sites in verify.shared_keys(trusted):
        raise SitebenchError(
            f"{signers}: {verify.shared_key_reason(fp, sites)}",
            "nothing was accepted with this list; fix it, then pull again",
        )


def revoke(site, since, fp=None, remote=None):
    """Stop trusting ``site``'s keys (all, or the one of fingerprint ``fp``) for commits
    made from ``since`` on (a stolen key): its ``valid-before`` becomes that time, and the
    commits signed before it stay verified. Returns how many keys."""
    check_name("site", site)
    until, changed, kept = stamp(since), 0, []
    for line in _lines(_signers(remote)):
        principal, key_fp, options, key = _entry(line)
        if principal == site and key_fp and (fp is None or key_fp == fp):
            options = [o for o in options if not o.startswith("valid-before=")]
            options.append(f'valid-before="{until}"')
            line = f"{principal} {','.join(options)} {key}"
            changed += 1
        kept.append(line)
    if changed:
        _write(_signers(remote), kept)
    return changed


def _entry(line):
    """(principal, fingerprint, [options], key) of an allowed_signers line (a comment, as
    OpenSSH skips it, is no key)."""
    parts = [] if line.lstrip().startswith("#") else line.split()
    at = next(
        (
            i
            for i, p in enumerate(parts)
            if fingerprint(" ".join(parts[i:])) and p.startswith(("ssh-", "ecdsa-", "sk-"))
        ),
        None,
    )
    if not parts or at is None:
        return (parts[0] if parts else "", None, [], "")
    options = ",".join(parts[1:at]).split(",") if at > 1 else []
    return (
        parts[0],
        fingerprint(" ".join(parts[at:])),
        [o for o in options if o],
        " ".join(parts[at:]),
    )


def stamp(when):
    """OpenSSH's UTC time (``YYYYMMDDHHMMSSZ``) of an ISO 8601 time (UTC) or a datetime."""
    from datetime import datetime, timezone

    if not isinstance(when, datetime):
        try:
            when = datetime.fromisoformat(str(when).replace("Z", "+00:00"))
        except ValueError:
            raise SitebenchError(
                f"{when!r} is not a time",
                "write it as ISO 8601 in UTC: 2026-11-27T23:00:00Z (or 2026-11-27)",
            ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y%m%d%H%M%SZ")


def remove(site, fp=None, remote=None):
    """Stop trusting ``site``'s keys (all, or the one of fingerprint ``fp``); return how many."""
    check_name("site", site)
    kept, gone = [], 0
    signers = _signers(remote)
    for line in _lines(signers):
        principal, key_fp, _, _ = _entry(line)
        if principal == site and (fp is None or key_fp == fp):
            gone += 1
        else:
            kept.append(line)
    if gone:
        _write(signers, kept)
    unsigned = _unsigned(remote)
    if site in unsigned:
        _set_unsigned(remote, [s for s in unsigned if s != site])
        gone += 1
    return gone


def allow_unsigned(site, remote=None):
    check_name("site", site)
    sites = _unsigned(remote)
    if site not in sites:
        _set_unsigned(remote, [*sites, site])


def listing(remote=None):
    """[(site, fingerprint or 'UNSIGNED ALLOWED', comment and validity)] sorted by site."""
    rows = []
    for line in _lines(_signers(remote)):
        principal, fp, options, key = _entry(line)
        if fp:
            comment = " ".join(key.split()[2:] + options)
            rows.append((principal, fp, comment))
    rows += [(s, "UNSIGNED ALLOWED (insecure)", "") for s in _unsigned(remote)]
    return sorted(rows)


def rules(prefix="", max_file=None, max_run=None):
    """The verification rules with this site's trust list."""
    signers = allowed_signers_file()
    if not signers.exists():
        # git needs the file to exist to verify at all; an empty one trusts no key.
        _write(signers, [])
    trusted = read_allowed_signers(signers)
    check_one_key_per_site(trusted, signers)
    return Rules(
        prefix=prefix,
        max_file=max_file or int(os.environ.get("SITEBENCH_EXCHANGE_MAX_FILE", verify.MAX_FILE)),
        max_run=max_run or int(os.environ.get("SITEBENCH_EXCHANGE_MAX_RUN", verify.MAX_RUN)),
        trusted=trusted,
        unsigned_sites=frozenset(s.strip() for s in _lines(unsigned_file()) if s.strip()),
        allowed_signers=str(signers),
        registry_host=_pinned_host(),
    )


def _pinned_host():
    try:
        return (trust_dir() / "registry-host").read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def site_key(site):
    """This site's private signing key, or None when it has none yet."""
    path = keys_dir() / check_name("site", site)
    return path if path.is_file() else None


def ensure_site_key(site):
    """(private key path, public key line, made now): the key is made once, with ssh-keygen,
    and this site's own key is trusted for its own runs here."""
    path = keys_dir() / check_name("site", site)
    made = make_key(path, f"sitebench-{site}")
    public = Path(f"{path}.pub").read_text(encoding="utf-8").strip()
    signers = allowed_signers_file()

    def fix(site, others, fp):
        # This site holds the private half: another site's line for it is a copied or
        # announced public key, or this key was handed over.
        names = " and ".join(others)
        return (
            f"nothing was changed; {path}.pub is this site's own key: if {names} never held "
            f"it (its public half announced as theirs), stop trusting it for them "
            f"(./sitebench trust remove SITE --fingerprint {fp}) and tell the host; if it "
            f"was given to {names}, move {path} and {path}.pub aside and run ./sitebench "
            f"trust key {site} for a new one"
        )

    _one_site_per_key([(site, fingerprint(public))], _lines(signers), signers, fix)
    add(site, f"{path}.pub")
    return path, public, made


def make_key(path, comment, replace=False):
    """Make the ed25519 key ``path`` with ssh-keygen unless it is there (``replace``: a
    half-made one is made again); whether it was made."""
    path = Path(path)
    if path.is_file() and not replace:
        return False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    for old in (path, Path(f"{path}.pub")):
        old.unlink(missing_ok=True)
    proc = subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SitebenchError(
            f"could not make the signing key {path} ({proc.stderr.strip()})",
            "install OpenSSH's client (Debian: openssh-client), or set SITEBENCH_KEYS_DIR "
            "to a writable directory",
        )
    return True


def merge_lines(lines):
    """Put allowed_signers ``lines`` (a registry's) into this site's list: each replaces the
    line of its site and key here; the other lines stay. A line giving a key that a line of
    this site's own (not among ``lines``) trusts for another site is set aside, not merged:
    the key stays trusted for that site only, so what it signs as the announcing site is
    refused, and the pull goes on (a registered site announcing a public key it copied
    cannot stop it). Returns the lines set aside: [(site, fingerprint, [sites here])]."""
    incoming = {_entry(line)[:2]: line for line in lines}
    signers = allowed_signers_file()
    kept = [ln for ln in _lines(signers) if _entry(ln)[:2] not in incoming]
    owners = {}
    for principal, fp, _, _ in map(_entry, kept):
        if fp:
            owners.setdefault(fp, set()).add(principal)
    aside = [
        (site, fp, sorted(owners[fp] - {site}))
        for site, fp in incoming
        if fp and owners.get(fp, set()) - {site}
    ]
    for site, fp, _ in aside:
        del incoming[(site, fp)]

    def fix(site, others, fp):
        # Only the registry's own lines are left to clash: its verification and the host's
        # hook refuse one key for two sites, so this registry was not checked by them.
        names = " and ".join(others)
        return (
            f"nothing was changed: the federation's registry gives this key to both {site} "
            f"and {names}; tell the host (a protected remote's hook refuses such a change)"
        )

    _one_site_per_key(list(incoming), list(incoming.values()), signers, fix)
    _write(signers, kept + list(incoming.values()))
    return aside
