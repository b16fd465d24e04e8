#!/usr/bin/env python3
"""The rules every commit of the results exchange must pass before it is accepted.

One module, the standard library only, used twice: by ``./sitebench pull`` and
``publish`` before this site's exchange accepts what another site pushed, and, copied as
``hooks/pre-receive``, by a shared bare repository that protects itself
(``./sitebench exchange init-remote``). A commit is accepted when:

* it has one parent (a root commit only when nothing was accepted before; its files that are
  not runs are inert: nothing is ever checked out);
* every change *adds* a regular file (mode 100644 or 100755) at ``<prefix><site>/<run>/...``
  with a valid site name, a run name as sitebench makes them, and path components git and
  every file system take (no ``..``, ``.git``, control characters, backslashes);
* each run it touches did not exist before (runs are never modified, extended or deleted);
* no file is over ``max_file`` bytes and no run over ``max_run``;
* it is signed (SSH, ``gpg.format=ssh``) by a key trusted for every site it adds runs to,
  or those sites are explicitly allowed unsigned.

The trust list is an OpenSSH ``allowed_signers`` file whose principals are site names, one
site per line (``beta ssh-ed25519 AAAA... comment``); git's own ``verify-commit`` machinery
(``%G?``) checks the signature, and the signing key's fingerprint (``%GK``) is mapped to the
sites trusted for it here, so a key trusted for one site cannot sign runs of another.
"""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

MAX_FILE = 16 * 2**20
MAX_RUN = 64 * 2**20
ZERO = "0" * 40
SITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RUN_NAME = re.compile(r"\d{8}T\d{6}Z-[0-9a-zA-Z._-]{1,64}")
REGULAR_MODES = ("100644", "100755")
MAX_DEPTH = 24
MAX_COMPONENT = 255
MAX_PATH = 1024
REWRITE = "history rewrite"


@dataclass
class Rules:
    """What the exchange accepts: where runs sit (``prefix``: "" or "results/"), the size
    caps, the trusted keys ({fingerprint: {sites}}) and the sites allowed unsigned."""

    prefix: str = ""
    max_file: int = MAX_FILE
    max_run: int = MAX_RUN
    trusted: dict = field(default_factory=dict)
    unsigned_sites: frozenset = frozenset()
    allowed_signers: str = None
    #: A partial copy sizes only a run's files under these paths (fetched to be verified);
    #: the others (its bulk) stay on the remote, never fetched to be sized here, and are
    #: sized when the run is written out. Empty: every file is sized.
    sized_only: tuple = ()


@dataclass
class Verdict:
    """One commit: accepted (``reason`` empty) with the runs it adds [(site, run)], or refused
    with the first rule it broke."""

    commit: str
    reason: str = ""
    runs: list = field(default_factory=list)

    @property
    def ok(self):
        return not self.reason


def fingerprint(public_key_line):
    """OpenSSH's ``SHA256:...`` fingerprint of a public key line (``type base64 [comment]``),
    computed as ``ssh-keygen -l`` does; None for a line that is not a key."""
    parts = public_key_line.split()
    for i, part in enumerate(parts[:-1]):
        if part.startswith(("ssh-", "ecdsa-", "sk-")):
            try:
                blob = base64.b64decode(parts[i + 1], validate=True)
            except ValueError:
                return None
            digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
            return "SHA256:" + digest
    return None


def read_allowed_signers(path):
    """{fingerprint: {sites}} of an allowed_signers file (missing: no key trusted)."""
    trusted = {}
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        return trusted
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        principals, _, key = line.partition(" ")
        fp = fingerprint(key)
        if fp:
            for site in principals.split(","):
                trusted.setdefault(fp, set()).add(site)
    return trusted


class Git:
    """git in one repository (a bare one is fine), text in and out."""

    def __init__(self, git_dir, config=()):
        self.git_dir = str(git_dir)
        self.config = [arg for item in config for arg in ("-c", item)]

    def run(self, *args, stdin=None, check=True):
        proc = subprocess.run(
            ["git", *self.config, "--git-dir", self.git_dir, *args],
            input=stdin,
            capture_output=True,
        )
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise RuntimeError(f"git {args[0]}: {err[-1] if err else proc.returncode}")
        return proc

    def text(self, *args, **kw):
        return self.run(*args, **kw).stdout.decode("utf-8", errors="surrogateescape")


def check_range(git, old, new, rules):
    """[Verdict] for every commit of ``old..new`` (``old`` None or zeros: from the root), in
    order; a single refusing verdict for ``new`` when ``old`` is not in its history (a
    rewrite of what was accepted)."""
    if old and old != ZERO:
        if git.run("merge-base", "--is-ancestor", old, new, check=False).returncode != 0:
            return [
                Verdict(
                    new,
                    f"{REWRITE}: the branch no longer contains {old[:12]}, accepted "
                    "before (runs are never removed or replaced)",
                )
            ]
        spec = [f"{old}..{new}"]
    else:
        spec = [new]
    listing = git.text("rev-list", "--reverse", "--topo-order", "--parents", *spec)
    commits = [line.split() for line in listing.splitlines() if line.strip()]
    signatures = _signatures(git, spec, rules)
    return [
        _check_commit(git, c[0], c[1:], signatures.get(c[0], ("N", "")), rules) for c in commits
    ]


def _signatures(git, spec, rules):
    """{commit: (%G?, %GK)} from one ``git log`` verifying every signature of the range."""
    config = []
    if rules.allowed_signers:
        config = [
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={rules.allowed_signers}",
        ]
    proc = subprocess.run(
        ["git", *config, "--git-dir", git.git_dir, "log", "--format=%H %G? %GK", *spec],
        capture_output=True,
        text=True,
    )
    found = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            found[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return found


def _check_commit(git, commit, parents, signature, rules):
    if len(parents) > 1:
        return Verdict(commit, "a merge commit (the exchange takes a linear history of runs)")
    try:
        changes = _changes(git, commit, parents[0] if parents else None)
    except RuntimeError as err:
        return Verdict(commit, f"unreadable commit ({err})")
    runs, reason = _check_changes(changes, rules, root=not parents)
    if reason:
        return Verdict(commit, reason)
    if not runs:
        return Verdict(commit, "" if not parents else "adds no run (an empty or non-run commit)")
    if parents:
        reason = _check_new_runs(git, parents[0], runs, rules)
        if reason:
            return Verdict(commit, reason)
    reason = _check_sizes(git, changes, rules)
    if reason:
        return Verdict(commit, reason)
    reason = _check_signature(signature, sorted({site for site, _ in runs}), rules)
    return Verdict(commit, reason, sorted(runs))


def _changes(git, commit, parent):
    """[(status, new mode, new blob, path)] of ``commit`` against its parent (or the empty
    tree for a root commit); paths as bytes decoded with surrogateescape."""
    args = ["diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-commit-id"]
    args += [parent, commit] if parent else ["--root", commit]
    raw = git.run(*args).stdout.split(b"\0")
    changes = []
    for i in range(0, len(raw) - 1, 2):
        meta = raw[i].decode().lstrip(":").split()
        if len(meta) < 5:
            break
        path = raw[i + 1].decode("utf-8", errors="surrogateescape")
        changes.append((meta[4][0], meta[1], meta[3], path))
    return changes


def _check_changes(changes, rules, root):
    """({(site, run)}, reason): every change must add a regular file inside a run."""
    runs = set()
    for status, mode, _, path in changes:
        where = _run_of(path, rules.prefix)
        if isinstance(where, str) and root:
            continue  # a root commit's other files are inert: never exported nor checked out
        if isinstance(where, str):
            return runs, f"{_shown(path)}: {where}"
        if status != "A":
            verb = {"M": "modifies", "D": "deletes", "T": "changes the type of"}.get(
                status, "changes"
            )
            return runs, f"{verb} {_shown(path)}: published runs are never changed"
        if mode not in REGULAR_MODES:
            kind = {"120000": "a symlink", "160000": "a gitlink (submodule)"}.get(
                mode, f"mode {mode}"
            )
            return runs, f"{_shown(path)} is {kind}: runs hold regular files only"
        runs.add(where)
    return runs, ""


def _run_of(path, prefix):
    """(site, run) of a file path, or a string saying why it is not a run file."""
    why = _not_a_run(path, prefix)
    if why:
        return f"not a run file ({why}; code and configuration never travel with runs)"
    parts = path[len(prefix) :].split("/")
    for part in parts[2:]:
        bad = _bad_component(part)
        if bad:
            return bad
    return parts[0], parts[1]


def _not_a_run(path, prefix):
    if not path.startswith(prefix):
        return f"outside {prefix}"
    parts = path[len(prefix) :].split("/")
    if len(parts) < 3:
        return "not inside a run directory <site>/<run>/"
    if len(parts) > MAX_DEPTH or len(path) > MAX_PATH:
        return "path too deep or too long"
    if not SITE_NAME.fullmatch(parts[0]) or ".." in parts[0]:
        return f"invalid site name {parts[0]!r}"
    if not RUN_NAME.fullmatch(parts[1]):
        return f"invalid run name {parts[1]!r}: runs are named <UTC time>-<random>"
    return ""


def _bad_component(part):
    if part in ("", ".", ".."):
        return f"path component {part!r}"
    if part.lower().rstrip(". ") in (".git", "git~1") or part.lower() == ".gitmodules":
        return f"path component {part!r} (git's own)"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in part) or "\\" in part:
        return "a control character or backslash in a file name"
    if len(part.encode("utf-8", errors="surrogateescape")) > MAX_COMPONENT:
        return "a file name over 255 bytes"
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return "a file name that is not UTF-8"
    return ""


def _check_new_runs(git, parent, runs, rules):
    """Each run the commit touches must be absent from its parent (never extended)."""
    for site in sorted({site for site, _ in runs}):
        existing = set(
            git.text("ls-tree", "--name-only", "-z", parent, "--", f"{rules.prefix}{site}/").split(
                "\0"
            )
        )
        for s, run in sorted(runs):
            if s == site and f"{rules.prefix}{site}/{run}" in existing:
                return f"adds files to the published run {site}/{run}: runs are never changed"
    return ""


def _check_sizes(git, changes, rules):
    if rules.sized_only:
        changes = [c for c in changes if in_run(c[3], rules.prefix).startswith(rules.sized_only)]
    blobs = [blob for _, _, blob, _ in changes]
    if not blobs:
        return ""
    out = git.text("cat-file", "--batch-check=%(objectsize)", stdin="\n".join(blobs).encode())
    per_run = {}
    for size, (_, _, _, path) in zip(out.split(), changes):
        if not size.isdigit():
            return f"{_shown(path)}: its content is missing"
        where = _run_of(path, rules.prefix)
        if isinstance(where, str):
            continue
        if int(size) > rules.max_file:
            return (
                f"{_shown(path)} is {int(size)} bytes, over the cap of {rules.max_file} per file"
            )
        per_run[where] = per_run.get(where, 0) + int(size)
        if per_run[where] > rules.max_run:
            return f"the run {where[0]}/{where[1]} is over the cap of {rules.max_run} bytes"
    return ""


def in_run(path, prefix):
    """A path's part inside its run ("" for a path that is not in a run)."""
    parts = path[len(prefix) :].split("/", 2) if path.startswith(prefix) else []
    return parts[2] if len(parts) == 3 else ""


def _check_signature(signature, sites, rules):
    status, key = signature
    unsigned_ok = all(site in rules.unsigned_sites for site in sites)
    if status == "N":
        if unsigned_ok:
            return ""
        return (
            f"unsigned commit with runs of {', '.join(sites)} (allowed only for sites the admin "
            "let publish unsigned: ./sitebench trust allow-unsigned SITE)"
        )
    if status not in ("G", "U") or not key:
        return f"bad signature (git verify-commit status {status!r})"
    if status != "G":
        if unsigned_ok:
            return ""
        return f"signed by a key not trusted here ({key}): ./sitebench trust add SITE KEYFILE"
    allowed = rules.trusted.get(key, set())
    others = [site for site in sites if site not in allowed and site not in rules.unsigned_sites]
    if others:
        trusted_for = ", ".join(sorted(allowed)) or "no site"
        return (
            f"runs of {', '.join(others)} signed by {key}, a key trusted for {trusted_for} "
            "only: a site publishes only its own runs"
        )
    return ""


def _shown(path):
    return json.dumps(path, ensure_ascii=True)


def _hook(git_dir):
    """The pre-receive hook: refuse a push whose commits break a rule, saying which."""
    here = os.path.join(git_dir, "sitebench")
    settings = json.load(open(os.path.join(here, "rules.json"), encoding="utf-8"))
    signers = os.path.join(here, "allowed_signers")
    rules = Rules(
        prefix=settings.get("prefix", ""),
        max_file=int(settings.get("max_file", MAX_FILE)),
        max_run=int(settings.get("max_run", MAX_RUN)),
        trusted=read_allowed_signers(signers),
        unsigned_sites=frozenset(settings.get("unsigned_sites", [])),
        allowed_signers=signers,
    )
    branch = "refs/heads/" + settings.get("branch", "main")
    git = Git(git_dir)
    refused = []
    for line in sys.stdin.read().splitlines():
        old, new, ref = line.split()
        if ref != branch:
            refused.append(f"{ref}: only {branch} takes runs here")
            continue
        if new == ZERO:
            refused.append(f"{ref}: the results branch is never deleted")
            continue
        for verdict in check_range(git, old, new, rules):
            if not verdict.ok:
                refused.append(f"commit {verdict.commit[:12]}: {verdict.reason}")
    for reason in refused:
        print(f"sitebench: refused: {reason}", file=sys.stderr)
    if any("trust" in reason for reason in refused):
        # A joining site's first push: it sends its key to the host, who trusts it here.
        print(
            "sitebench: this repository's host trusts a site's key with: ./sitebench trust add "
            f"SITE KEYFILE --remote {os.path.abspath(git_dir)}",
            file=sys.stderr,
        )
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(_hook(os.environ.get("GIT_DIR", ".")))
