#!/usr/bin/env python3
"""The rules every commit of the results exchange must pass before it is accepted.

One module, the standard library only, used twice: by ``./sitebench pull`` and
``publish`` before this site's exchange accepts what another site pushed, and, copied as
``hooks/pre-receive``, by a shared bare repository that protects itself
(``./sitebench exchange init-remote``). A commit is accepted when:

* it has one parent (a root commit only when nothing was accepted before; its files that are
  not runs are inert: nothing is ever checked out);
* it is judged against the last commit accepted, not only its parent: what a refused commit
  brought counts for nothing, and a commit may leave out whole runs only of the commits it
  names as refused by its site (``Sitebench-Left-Out: <commit>``, what publish writes);
* every tree it brings passes git fsck's checks (sorted, no duplicate or file/folder name
  clash, modes git writes, each entry's object of the type its mode says);
* every change *adds* a regular file (mode 100644 or 100755) at ``<prefix><site>/<run>/...``
  with a valid site name, a run name as sitebench makes them, and path components git and
  every file system take (no ``..``, ``.git``, control characters, backslashes), and at
  the run's top only what a run holds (``report.json``, ``perflogs/``, ``output/``,
  ``provenance/``, ``failed-stage/``);
* each run it touches did not exist before (runs are never modified, extended or deleted);
* no file is over ``max_file`` bytes and no run over ``max_run``;
* it is signed (SSH, ``gpg.format=ssh``) by a key trusted for every site it adds runs to,
  or those sites are explicitly allowed unsigned; git checks the key's validity period
  at the commit's time, a commit is not dated after now, and no run it adds is dated after
  the commit.

The trust list is an OpenSSH ``allowed_signers`` file whose principals are site names, one
site per line (``beta ssh-ed25519 AAAA... comment``); git's own ``verify-commit`` machinery
(``%G?``) checks the signature, and the signing key's fingerprint (``%GK``) is mapped to the
sites trusted for it here, so a key trusted for one site cannot sign runs of another.
"""

import base64
import calendar
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

MAX_FILE = 16 * 2**20
MAX_RUN = 64 * 2**20
ZERO = "0" * 40
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
SITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RUN_NAME = re.compile(r"\d{8}T\d{6}Z-[0-9a-zA-Z._-]{1,64}")
REGULAR_MODES = ("100644", "100755")
MAX_DEPTH = 24
CONTROL_OR_BACKSLASH = re.compile(r"[\x00-\x1f\x7f\\]")
MAX_COMPONENT = 255
MAX_PATH = 1024
REWRITE = "history rewrite"
REFUSED_BEFORE = "refused here before"
#: How far clocks of two sites may disagree.
CLOCK_SKEW_S = 600
#: The trailer of a publish commit naming a commit it left out (refused by its site).
LEFT_OUT = "Sitebench-Left-Out"
#: What a run holds at its top (results/README.md): nothing else travels, so no
#: ``sitecustomize.py``, ``*.pth`` or package a Python started in a run folder would import.
RUN_TOP_FILES = ("report.json", "figures.json")
RUN_TOP_DIRS = ("perflogs", "output", "provenance", "failed-stage")
#: The federation's registry of sites and keys: one OpenSSH allowed_signers file at the
#: repository's top (a name no site can have: site names start with a letter or digit),
#: append-only, each change a commit of its own signed by the host or by the site it changes.
REGISTRY_DIR = ".sitebench-registry"
REGISTRY_FILE = REGISTRY_DIR + "/allowed_signers"
#: The registry's principal for the host's key (the federation's root); never a site name.
HOST = "@host"
REGISTRY_OPTIONS = ("valid-after", "valid-before")
#: git's tree entry modes (fsck refuses or warns on any other spelling) and their objects.
ENTRY_TYPES = {
    b"100644": "blob",
    b"100755": "blob",
    b"120000": "blob",
    b"40000": "tree",
    b"160000": "commit",
}


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
    now: float = None  # the time commits are bounded by (None: the clock's)
    #: A partial copy sizes only the files it fetched to be verified (:func:`sized`): their
    #: paths in the repository (a set), or their starts inside a run (a tuple); the others
    #: (a run's bulk) stay on the remote, never fetched to be sized here, and are sized
    #: when the run is written out. Empty: every file is sized.
    sized_only: tuple | frozenset = ()
    #: The host key's fingerprint this site (or the protected remote) pinned: a registry
    #: rooted in another key is refused. None: the registry's first commit names it.
    registry_host: str = None


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
        # Split as OpenSSH does (at any blank): a tab after the principals is theirs too.
        principals, _, key = line.replace("\t", " ").partition(" ")
        fp = fingerprint(key)
        if fp:
            for site in principals.split(","):
                trusted.setdefault(fp, set()).add(site)
    return trusted


def shared_keys(trusted):
    """[(fingerprint, [sites])] of the keys ``trusted`` ({fingerprint: {sites}}) lists for
    more than one site. git checks a key's validity period for the one site it names
    (find-principals at the commit's time), and the fingerprint maps to every site: one
    site's period would vouch for another's runs, and revoking the key for one site would
    leave it signing for the other. A key belongs to one site, as in the registry."""
    return [(fp, sorted(sites)) for fp, sites in sorted(trusted.items()) if len(sites) > 1]


def shared_key_reason(fp, sites):
    return (
        f"the key {fp} is trusted for {' and '.join(sites)}: one key per site (git checks "
        "its validity period for one of them only, and it would vouch for the others' runs); "
        f"keep it for its own site only (./sitebench trust remove SITE --fingerprint {fp} "
        "for the others) and trust each site's own key (./sitebench trust key SITE)"
    )


class BatchReader:
    """One ``git cat-file --batch`` kept open and asked one object at a time: the objects of
    many commits or runs from one process, one held at a time. ``argv``: the git command
    before ``cat-file`` (its configuration and repository)."""

    def __init__(self, argv):
        self.argv, self.proc = list(argv), None

    def read(self, oid):
        """(type, bytes) of ``oid``, None when git has not got it; OSError when git died or
        answered out of step (closed then: the next read starts a new process)."""
        return self.read_many([oid])[0]

    #: Requests written at once: well under a pipe's 64 KiB, so writing them never waits
    #: for git, which has read every earlier request once its answers are read.
    AT_ONCE = 512

    def read_many(self, oids):
        """[(type, bytes) or None] of ``oids``, the requests of up to :data:`AT_ONCE` written
        before their answers are read (no round trip per object); OSError as :meth:`read`."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [*self.argv, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        found, oid = [], None
        try:
            for at in range(0, len(oids), self.AT_ONCE):
                part = oids[at : at + self.AT_ONCE]
                self.proc.stdin.write("".join(f"{oid}\n" for oid in part).encode())
                self.proc.stdin.flush()
                for oid in part:
                    found.append(self._answer(oid))
            return found
        except (OSError, ValueError) as err:
            self.close()
            raise OSError(f"git could not read {oid} ({err})") from None

    def _answer(self, oid):
        head = self.proc.stdout.readline().split()
        if head == [oid.encode(), b"missing"]:
            return None
        if len(head) != 3 or head[0].decode() != oid:
            raise OSError(f"git answered {b' '.join(head)!r}")
        size = int(head[2])
        data = self.proc.stdout.read(size + 1)
        if len(data) != size + 1:
            raise OSError("git stopped short")
        return head[1].decode(), data[:-1]

    def close(self):
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.stdin.close()
            proc.kill()
            proc.wait()


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

    def objects(self, shas):
        """{sha: (type, raw bytes)} of objects present (trees and commits: a partial copy
        holds them all), read by one ``cat-file --batch`` kept open while this Git lives
        (a commit's trees cost no process each)."""
        if getattr(self, "_reader", None) is None:
            self._reader = BatchReader(["git", *self.config, "--git-dir", self.git_dir])
        shas = list(shas)
        try:
            return {sha: got for sha, got in zip(shas, self._reader.read_many(shas)) if got}
        except OSError:
            pass  # one object git gave up on: each read on its own, that one as missing
        found = {}
        for sha in shas:
            got = self._read(sha)
            if got:
                found[sha] = got
        return found

    @property
    def partial(self):
        """Whether the repository is a partial clone (objects it lacks are fetched)."""
        if getattr(self, "_partial", None) is None:
            proc = self.run("config", "--get", "extensions.partialClone", check=False)
            self._partial = bool(proc.stdout.strip())
        return self._partial

    def _read(self, sha):
        if getattr(self, "_reader", None) is None:
            self._reader = BatchReader(["git", *self.config, "--git-dir", self.git_dir])
        try:
            return self._reader.read(sha)
        except OSError:
            return None  # git gave up on it: judged as missing

    def close(self):
        reader, self._reader = getattr(self, "_reader", None), None
        if reader is not None:
            reader.close()

    def twin(self):
        """Another Git on the same repository, with a reader of its own (one per thread)."""
        other = Git(self.git_dir)
        other.config = list(self.config)
        return other

    def kinds(self, shas):
        """{sha: type} of objects present, from one ``cat-file --batch-check``."""
        if not shas:
            return {}
        out = self.text(
            "cat-file", "--batch-check", stdin="".join(f"{s}\n" for s in shas).encode()
        )
        return {p[0]: p[1] for p in (ln.split() for ln in out.splitlines()) if len(p) == 3}


def read_range(git, old, new):
    """([[commit, *parents]] of ``old..new`` in order (``old`` None: from the root), {commit:
    its changes against its parent} (:func:`changes_of`)): what the pull's readers (the blobs
    it fetches, the rules, the limits) all read, read once and handed to each."""
    spec = [f"{old}..{new}"] if old and old != ZERO else [new]
    listing = git.text("rev-list", "--reverse", "--topo-order", "--parents", *spec)
    commits = [line.split() for line in listing.splitlines() if line.strip()]
    # Every commit's changes against its parent from one git process (10,000 empty commits
    # cost one diff-tree); a commit after a refused one is read against the last accepted.
    return commits, changes_of(git, [c[0] for c in commits if len(c) <= 2])


class Signing:
    """The signatures of a range read by :func:`read_range` (:func:`_signatures`), checked
    in the background from the moment it is read: a pull starts it before fetching the
    files it verifies, and :func:`check_range` takes it for the same ``rules``."""

    def __init__(self, git, old, new, rules, read):
        self.rules, self.signer = rules, git.twin()
        spec = [f"{old}..{new}"] if old and old != ZERO else [new]
        commits = [c[0] for c in read[0]]
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.future = self.pool.submit(_signatures, self.signer, spec, rules, commits, read[1])

    def result(self):
        """{commit: signature} (:func:`_signatures`), once checked; its git closed."""
        try:
            return self.future.result()
        finally:
            self.close()

    def close(self):
        """Wait for the check (a pull that stops early leaves no git behind) and close."""
        self.pool.shutdown(wait=True)
        self.signer.close()


def check_range(git, old, new, rules, refused=frozenset(), read=None, signing=None):
    """[Verdict] for every commit of ``old..new`` (``old`` None or zeros: from the root), in
    order; a single refusing verdict for ``new`` when ``old`` is not in its history (a
    rewrite of what was accepted).

    Each commit is judged against the last commit *accepted* (``old`` at first), not only its
    parent: a refused commit leaves nothing behind, and a later commit that leaves its content
    out (as publish does, naming it) is judged on what it adds. Commits in ``refused`` (refused
    here before) get :data:`REFUSED_BEFORE` without a second look. ``read``: what
    :func:`read_range` read of the range already (read here when None); ``signing``: its
    signatures' check started already (:class:`Signing`; taken for the same ``rules``)."""
    if old and old != ZERO:
        if git.run("merge-base", "--is-ancestor", old, new, check=False).returncode != 0:
            return [
                Verdict(
                    new,
                    f"{REWRITE}: the branch no longer contains {old[:12]}, accepted "
                    "before (runs are never removed or replaced)",
                )
            ]
    else:
        old = None
    commits, changes = read if read is not None else read_range(git, old, new)
    # The signatures are checked (ssh-keygen, one per core) while the trees are read: every
    # commit's against its parent's, a few hundred commits at a time, and the sizes of what
    # they add.
    if signing is None or signing.rules is not rules:
        signing = Signing(git, old, new, rules, (commits, changes))
    try:
        held = held_kinds(git, changes)
        trees = tree_reasons(git, [c for c in commits if len(c) <= 2], held)
        found = [c for entries in changes.values() for c in _sized(entries, rules)]
        sizes = blob_sizes(git, [c[2] for c in found])
        # What each commit adds, judged while the signatures are still being checked
        # (used where the commit is judged against its parent, as nearly always).
        ruled = {
            c[0]: _check_changes(changes[c[0]], rules, root=len(c) == 1)
            for c in commits
            if c[0] in changes and c[0] not in refused
        }
    finally:
        signatures = signing.result()
    verdicts, base = [], old
    changes = (changes, trees, sizes, ruled)
    try:
        return _judge(git, commits, signatures, refused, rules, verdicts, base, changes)
    finally:
        git.close()


def _judge(git, commits, signatures, refused, rules, verdicts, base, changes):
    for commit, *parents in commits:
        if commit in refused:
            verdicts.append(Verdict(commit, REFUSED_BEFORE))
            continue
        signature = signatures.get(commit)
        if signature is None:
            verdicts.append(Verdict(commit, UNREAD_SIGNATURE))
            continue
        parent = parents[0] if parents else None
        known = changes[0].get(commit) if parent == base else None
        trees = changes[1].get(commit) if parent == base else None
        ruled = changes[3].get(commit) if parent == base else None
        verdict = _check_commit(
            git, commit, parents, base, signature, rules, known, trees, changes[2], ruled
        )
        verdicts.append(verdict)
        if verdict.ok:
            base = commit
    return verdicts


def changes_of(git, commits):
    """{commit: [(status, new mode, new blob, path)]} against each one's parent (or the empty
    tree), from one ``git diff-tree --stdin``; {} when git cannot read one of them (each is
    then read on its own, and the unreadable one named)."""
    if not commits:
        return {}
    proc = git.run(
        "diff-tree",
        "--stdin",
        "-r",
        "-z",
        "--raw",
        "--no-renames",
        "--root",
        stdin="".join(f"{c}\n" for c in commits).encode(),
        check=False,
    )
    if proc.returncode != 0:
        return {}
    found = {c: [] for c in commits}
    tokens = iter(proc.stdout.decode("utf-8", errors="surrogateescape").split("\0"))
    entries = None
    for token in tokens:
        if token[:1] == ":" and entries is not None:
            path = next(tokens, None)
            if path is None:
                break
            meta = token.split()  # ":<old mode>", new mode, old blob, new blob, status
            entries.append((meta[4][0], meta[1], meta[3], path))
        elif token.strip() in found:
            entries = found[token.strip()]
    return found


#: How many more times a commit git's log left out is read again (each time alone).
LOG_ATTEMPTS = 3
#: The refusal of a commit whose signature git could not read on any attempt.
UNREAD_SIGNATURE = (
    f"its signature could not be checked: git log died reading it {LOG_ATTEMPTS + 1} times "
    "(a malformed signature can kill git 2.39; refused, never trusted)"
)
#: Below this many commits the signatures git checks are checked by one git process.
PARALLEL_FROM = 64
#: How an SSH signature starts (git's ``get_format_by_sig``: it picks ssh-keygen by it).
SSH_ARMOR = b"-----BEGIN SSH SIGNATURE-----"
#: A committer line as git writes it: the commit's time, the one git verifies the key at.
COMMITTER = re.compile(rb"committer [^<>\n]*<[^<>\n]*> ([1-9][0-9]{0,11}) [+-][0-9]{4}\n")
GOOD = 'Good "git" signature for '
SHA256_KEY = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


def _signatures(git, spec, rules, commits=(), changes=None):
    """{commit: (%G?, %GK, [commits it says it left out], committer time)} of every commit
    of the range (``commits``). git checks a key's validity period (``valid-after`` /
    ``valid-before`` in allowed_signers) at the commit's time, running ``ssh-keygen`` twice
    per commit (find-principals, then verify), one commit after the other. A commit adding
    runs of a site (from ``changes``) is first verified as git would verify it for that
    site, by one ``ssh-keygen -Y verify -I <site>`` with the commit's time, one per core at
    once (:func:`ssh_verified`): good, it is what git says (G and the key's fingerprint);
    anything else (unsigned, another key, another namespace, a key outside its validity, a
    registry commit, a signature git reads otherwise) is judged by git itself as before."""
    hints = _signer_hints(changes or {}, rules, commits)
    good = ssh_verified(git, rules, hints)
    found = _logged(git, rules, [c for c in commits if c not in good], verify=True)
    for commit, (_, _, named, committed) in _logged(git, rules, list(good), False).items():
        found[commit] = ("G", good[commit][0], named, committed)
        if committed != good[commit][1]:
            # git reads another time than the committer line verified: git judges it.
            found.pop(commit)
            found.update(_logged(git, rules, [commit], verify=True))
    # git 2.39 dies of SIGPIPE when ssh-keygen refuses a malformed signature before reading
    # the payload git writes to it (measured: 7 in 300 with an ssh-keygen that exits at
    # once); the commits its log left out are read again, each by a git of its own.
    for _ in range(LOG_ATTEMPTS):
        missing = [c for c in commits if c not in found]
        for commit in missing:
            found.update(_logged(git, rules, [commit], verify=True))
    return found


def _logged(git, rules, commits, verify):
    """``git log``'s reading of ``commits`` (its %G? and %GK when ``verify``, else "-"); a
    long list is split among as many ``git log --no-walk --stdin`` as there are cores."""
    if not commits:
        return {}
    config = []
    if rules.allowed_signers:
        config = [
            "-c",
            "gpg.format=ssh",
            "-c",
            f"gpg.ssh.allowedSignersFile={rules.allowed_signers}",
        ]
    trailer = f"%(trailers:key={LEFT_OUT},valueonly,separator=%x20)"
    log = ["git", *config, "--git-dir", git.git_dir, "log", "--no-walk=unsorted", "--stdin"]
    log.append(f"--format=%H %ct {'%G? %GK' if verify else '-'}%x1f{trailer}%x1e")
    shares = max(1, min(_cores(), len(commits) // PARALLEL_FROM)) if verify else 1
    procs = []
    for k in range(shares):
        # Into a file each: no process waits for its output to be read to go on.
        out = tempfile.TemporaryFile()
        proc = subprocess.Popen(log, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.DEVNULL)
        proc.stdin.write("".join(f"{c}\n" for c in commits[k::shares]).encode())
        proc.stdin.close()
        procs.append((proc, out))
    outputs = []
    for proc, out in procs:
        proc.wait()
        out.seek(0)
        outputs.append(out.read().decode("utf-8", errors="replace"))
        out.close()
    found = {}
    for record in "".join(outputs).split("\x1e"):
        head, _, left_out = record.strip().partition("\x1f")
        parts = head.split()
        if len(parts) >= 3 and parts[1].isdigit():
            named = [c for c in left_out.split() if re.fullmatch(r"[0-9a-f]{40}", c)]
            key = parts[3] if len(parts) > 3 else ""
            found[parts[0]] = (parts[2], key, named, int(parts[1]))
    return found


def _cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def _signer_hints(changes, rules, commits):
    """{commit: the site whose key must sign it}: the first site (sorted) of the runs it adds
    against its parent that is not allowed unsigned. A hint only: the verdict is judged on
    the commit's own changes; a wrong hint only sends the commit to git."""
    hints = {}
    for commit in commits:
        skip = len(rules.prefix)
        tops = {
            path[skip:].partition("/")[0]
            for status, _, _, path in changes.get(commit, ())
            if status == "A" and path.startswith(rules.prefix)
        }
        # Each name the commit's files start with checked once, not once per file.
        sites = {site for site in tops if SITE_NAME.fullmatch(site) and ".." not in site}
        sites -= set(rules.unsigned_sites)
        if sites and not any(c[3].startswith(REGISTRY_DIR + "/") for c in changes[commit]):
            hints[commit] = sorted(sites)[0]
    return hints


def ssh_verified(git, rules, hints):
    """{commit: (key fingerprint, committer time)} of the commits of ``hints`` ({commit:
    site}) that OpenSSH finds signed, under git's namespace, by a key allowed_signers lists
    for that site and valid at the commit's time: the ``ssh-keygen -Y verify`` git itself
    runs once find-principals named the site, on the payload git verifies (the commit
    without its ``gpgsig`` header, gpg-interface.c), with the time git gives (the committer's,
    as local time). One process per commit, as many at once as there are cores. Only where
    git's reading is known to be the same: allowed_signers of plain site names with
    validity options only, and no revocation file configured for git."""
    program = _ssh_program(git, rules) if hints else None
    if program is None:
        return {}
    objects = git.objects(list(hints))
    with tempfile.TemporaryDirectory(prefix="sitebench-sig-") as tmp:
        jobs = []
        for n, (commit, site) in enumerate(hints.items()):
            kind, raw = objects.get(commit, ("missing", b""))
            split = ssh_signed(raw) if kind == "commit" else None
            if split is None:
                continue
            payload, signature, committed = split
            try:
                stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(committed))
            except (OverflowError, OSError, ValueError):
                continue
            path = os.path.join(tmp, f"{n}.sig")
            with open(path, "wb") as out:
                out.write(signature)
            argv = [program, "-Y", "verify", "-n", "git", "-f", rules.allowed_signers]
            argv += ["-I", site, "-s", path, f"-Overify-time={stamp}"]
            jobs.append((commit, argv, payload, committed))
        with ThreadPoolExecutor(max_workers=_cores()) as pool:
            verified = list(pool.map(_ssh_keygen, jobs))
    return {commit: found for commit, found in verified if found}


def _ssh_keygen(job):
    """(commit, (fingerprint, committer time) or None): git's reading of ssh-keygen's answer
    (parse_ssh_output: 'Good "git" signature for <principal> with <type> key <fingerprint>')."""
    commit, argv, payload, committed = job
    try:
        proc = subprocess.run(argv, input=payload, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return commit, None
    line = proc.stdout.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
    if proc.returncode != 0 or not line.startswith(GOOD):
        return commit, None
    rest = line[len(GOOD) :]
    cut = rest.rfind(" with ")
    key = rest[cut + 1 :].partition("key ")[2] if cut > 0 else ""
    return commit, ((key, committed) if SHA256_KEY.fullmatch(key) else None)


def ssh_signed(raw):
    """(payload, signature, committer time) of a raw commit, split as git splits it to verify
    it (commit.c's parse_buffer_signed_by_header: the ``gpgsig`` header's lines are the
    signature, the rest is the payload), or None for anything but one SSH signature header
    and one committer line as git writes it (git then judges the commit itself)."""
    payload, signature, at, signing = [], [], 0, False
    while at < len(raw):
        end = raw.find(b"\n", at)
        end = len(raw) if end < 0 else end + 1
        line = raw[at:end]
        if line == b"\n":
            payload.append(raw[at:])
            break
        if signing and line.startswith(b" "):
            signature.append(line[1:])
        elif line.startswith(b"gpgsig"):
            if signature or not line.startswith(b"gpgsig "):
                return None
            signature.append(line[len(b"gpgsig ") :])
            signing = True
        else:
            signing = False
            payload.append(line)
        at = end
    else:
        return None
    committers = [line for line in payload[:-1] if line.startswith(b"committer ")]
    signature = b"".join(signature)
    if len(committers) != 1 or not signature.startswith(SSH_ARMOR):
        return None
    match = COMMITTER.fullmatch(committers[0])
    return (b"".join(payload), signature, int(match.group(1))) if match else None


def _ssh_program(git, rules):
    """The ssh-keygen git would run (``gpg.ssh.program``), or None where one verify per
    commit could read a signature otherwise than git: no allowed_signers, a revocation file
    configured (git passes it), or allowed_signers lines other than one plain site name (or
    the host) with validity options (patterns, several principals, namespaces, CAs)."""
    if not rules.allowed_signers:
        return None
    proc = git.run("config", "--get-regexp", r"^gpg\.ssh\.", check=False)
    settings = {}
    for line in proc.stdout.decode("utf-8", errors="replace").splitlines():
        name, _, value = line.partition(" ")
        settings[name.lower()] = value
    if "gpg.ssh.revocationfile" in settings or not _plain_signers(rules.allowed_signers):
        return None
    return settings.get("gpg.ssh.program") or "ssh-keygen"


def _plain_signers(path):
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError):
        return False
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        principal = parts[0]
        if principal != HOST and not (SITE_NAME.fullmatch(principal) and ".." not in principal):
            return False
        if len(parts) > 1 and not parts[1].startswith(("ssh-", "ecdsa-", "sk-")):
            for option in parts[1].split(","):
                name, _, value = option.partition("=")
                if name not in REGISTRY_OPTIONS or not re.fullmatch(r'"?\d{8,14}Z?"?', value):
                    return False
    return True


def _check_commit(
    git, commit, parents, base, signature, rules, known=None, trees=None, sizes=None, ruled=None
):
    """The verdict on ``commit`` against ``base``; ``known``, ``trees`` (reason, paths base
    held), ``sizes`` and ``ruled`` (:func:`_check_changes` of ``known``) are what was read
    of it against its parent when that is ``base``."""
    if len(parents) > 1:
        return Verdict(commit, "a merge commit (the exchange takes a linear history of runs)")
    try:
        reason = trees[0] if trees is not None else _check_trees(git, commit, base)
        if reason:
            return Verdict(commit, reason)
        changes = known if known is not None else _changes(git, commit, base)
    except RuntimeError as err:
        return Verdict(commit, f"unreadable commit ({err})")
    registry = [c for c in changes if c[3].startswith(REGISTRY_DIR + "/") or c[3] == REGISTRY_DIR]
    if registry:
        root = not parents
        reason = _check_registry_commit(
            git, commit, base, changes, registry, signature, rules, root
        )
        return Verdict(commit, reason)
    if ruled is None or known is None:
        ruled = _check_changes(changes, rules, root=not parents)
    runs, reason = ruled
    if reason:
        return Verdict(commit, reason)
    reason = _check_left_out(git, commit, changes, signature[2], rules)
    if reason:
        return Verdict(commit, reason)
    if not runs:
        return Verdict(commit, "" if not parents else "adds no run (an empty or non-run commit)")
    if base:
        reason = _check_new_runs(git, base, runs, rules, trees[1] if trees else None)
        if reason:
            return Verdict(commit, reason)
    reason = _check_sizes(git, [c for c in changes if c[0] == "A"], rules, sizes)
    if reason:
        return Verdict(commit, reason)
    reason = _check_times(runs, signature[3], rules)
    if reason:
        return Verdict(commit, reason)
    reason = _check_signature(signature[:2], sorted({site for site, _ in runs}), rules)
    return Verdict(commit, reason, sorted(runs))


def _changes(git, commit, parent):
    """[(status, new mode, new blob, path)] of ``commit`` against ``parent`` (the last
    accepted commit; None: the empty tree); paths as bytes decoded with surrogateescape."""
    args = ["diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-commit-id"]
    args += [parent or EMPTY_TREE, commit]
    raw = git.run(*args).stdout.split(b"\0")
    changes = []
    for i in range(0, len(raw) - 1, 2):
        meta = raw[i].decode().lstrip(":").split()
        if len(meta) < 5:
            break
        path = raw[i + 1].decode("utf-8", errors="surrogateescape")
        changes.append((meta[4][0], meta[1], meta[3], path))
    return changes


def _check_registry_commit(git, commit, base, changes, registry, signature, rules, root):
    """A change of the registry is a commit of its own (a root commit's other files are
    inert), of the one file, appended to, signed as :func:`check_registry` says."""
    others = [c for c in changes if c not in registry]
    if others and not root and all(c[0] == "D" for c in others):
        # What its signer refused and left out (named in its trailers, as publish does).
        left_out = _check_left_out(git, commit, others, signature[2], rules)
        if left_out:
            return left_out
        others = []
    if others and not root:
        return (
            f"changes {REGISTRY_FILE} and other files: a registry change is a commit of " "its own"
        )
    for status, mode, _, path in registry:
        if path != REGISTRY_FILE:
            return f"{_shown(path)}: the registry is the one file {REGISTRY_FILE}"
        if status == "D":
            return f"deletes {REGISTRY_FILE}: the registry is append-only"
        if mode != "100644":
            return f"{REGISTRY_FILE} is mode {mode}: the registry is a regular file (100644)"
    old = _blob_text(git, f"{base}:{REGISTRY_FILE}") if base else ""
    new = _blob_text(git, f"{registry[0][2]}")
    if old is None or new is None:
        return f"{REGISTRY_FILE}: its content is missing or not UTF-8"
    return check_registry(old, new, signature[0], signature[1], signature[3], rules)


def _blob_text(git, what):
    proc = git.run("cat-file", "blob", what, check=False)
    if proc.returncode != 0:
        return "" if ":" in what else None  # no registry in the base yet: an empty one
    try:
        return proc.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None


def registry_entries(text):
    """([(principal, fingerprint, {option: value}, key)] of a registry's lines, reason): the
    lines are OpenSSH allowed_signers lines, ``valid-after``/``valid-before`` their only
    options; anything else is a reason."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split(" ")
        if len(parts) < 3:
            return entries, f"line {number} is not 'principal [options] key'"
        principal, rest = parts[0], parts[1:]
        options = {}
        if not rest[0].startswith(("ssh-", "ecdsa-", "sk-")):
            for option in rest[0].split(","):
                name, _, value = option.partition("=")
                if name not in REGISTRY_OPTIONS or not re.fullmatch(r'"\d{14}Z"', value):
                    return entries, (
                        f"line {number}: option {option[:40]!r} (only valid-after/valid-before"
                        '="YYYYMMDDHHMMSSZ")'
                    )
                options[name] = value.strip('"')
            rest = rest[1:]
        key = " ".join(rest[:3])
        fp = fingerprint(" ".join(rest[:2])) if len(rest) >= 2 else None
        if not fp or len(rest) > 3:
            return entries, f"line {number} holds no single public key"
        if principal != HOST and not (SITE_NAME.fullmatch(principal) and ".." not in principal):
            return entries, f"line {number}: {principal[:64]!r} is not a site name"
        entries.append((principal, fp, options, key))
    return entries, ""


def registry_state(entries):
    """{(principal, fingerprint): ({option: value}, key)}: each later line for a key updates
    its options (a revocation is a line giving the key a ``valid-before``)."""
    state = {}
    for principal, fp, options, key in entries:
        before = state.get((principal, fp), ({}, key))[0]
        state[(principal, fp)] = ({**before, **options}, key)
    return state


def _valid_at(options, when):
    after, before = options.get("valid-after"), options.get("valid-before")
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(when)) + "Z"
    # OpenSSH's reading: valid from valid-after to valid-before, both included.
    return (not after or after <= stamp) and (not before or stamp <= before)


def check_registry(old, new, status, key, committed, rules):
    """Why a change of the registry from ``old`` to ``new`` text, signed with ``key``
    (``%G?`` ``status``) at ``committed``, is refused ("" when it is not). The registry is
    append-only; its first line names the host's key and is signed by it; the host (its
    key valid at the commit's time) adds sites and keys and sets any key's validity; a
    site (its key valid then) only ends its own keys' validity (revocation) and announces
    its new key in the commit that ends the old one's (rotation). A key belongs to one
    site, and a site name to the keys the host or that site put there."""
    if not new.startswith(old) or (old and not old.endswith("\n")) or not new.endswith("\n"):
        return (
            f"rewrites or removes earlier entries of {REGISTRY_FILE} (it is append-only: "
            "changes are lines added at its end)"
        )
    before, reason = registry_entries(old)
    added = []
    if not reason:
        added, reason = registry_entries(new[len(old) :])
    if reason:
        return f"{REGISTRY_FILE}: {reason}"
    if not added:
        return f"changes nothing in {REGISTRY_FILE}"
    if status not in ("G", "U") or not key:
        return f"a registry change without a good signature (git verify-commit status {status!r})"
    if committed > (rules.now if rules.now is not None else time.time()) + CLOCK_SKEW_S:
        return "a registry change committed in the future: commit times are bounded by now"
    state = registry_state(before)
    if not before:
        first = added[0]
        if first[0] != HOST or first[1] != key:
            return (
                f"a new registry's first line names the host's key and is signed by it "
                f"(signed by {key})"
            )
        if rules.registry_host and key != rules.registry_host:
            return (
                f"a registry rooted in {key}, not the host key pinned here "
                f"({rules.registry_host})"
            )
    hosts = {fp for (p, fp), (o, _) in state.items() if p == HOST and _valid_at(o, committed)}
    signer_is_host = key in hosts or not before
    signer_sites = {
        p
        for (p, fp), (o, _) in state.items()
        if fp == key and p != HOST and _valid_at(o, committed)
    }
    owners = {}
    for principal, fp, _, _ in before + added:
        owners.setdefault(fp, principal)
    ended = {fp for p, fp, o, _ in added if "valid-before" in o}
    for principal, fp, options, _ in added:
        if owners[fp] != principal:
            return (
                f"gives the key {fp} to {principal}, registered already for {owners[fp]} "
                "(a key belongs to one site)"
            )
        if signer_is_host:
            continue
        if principal not in signer_sites:
            registered = sorted(f for p, f in state if p == principal)
            if registered:
                return (
                    f"a second site claiming the name {principal} (registered with "
                    f"{registered[0]}; signed by {key}, neither the host's key nor {principal}'s)"
                    ": site names are unique in the federation"
                )
            return (
                f"registers {principal}, signed by {key}, not the host's key: only the host "
                "registers a site"
            )
        known = state.get((principal, fp))
        if known is None:
            if key not in ended:
                return (
                    f"announces a new key of {principal} ({fp}) without ending the key that "
                    f"signs it ({key}): a rotation is signed by the old key and ends it"
                )
            continue
        was_after, was_before = known[0].get("valid-after"), known[0].get("valid-before")
        now_before = options.get("valid-before")
        if (
            options.get("valid-after", was_after) != was_after
            or not now_before
            or (was_before and now_before > was_before)
        ):
            return (
                f"changes the validity of {principal}'s key {fp} other than by ending it: a "
                "site only revokes its keys (valid-before), the host sets their periods"
            )
    return ""


def _check_changes(changes, rules, root):
    """({(site, run)}, reason): every change must add a regular file inside a run, or leave
    out a whole run (:func:`_check_left_out`)."""
    runs = set()
    for status, mode, _, path in changes:
        where, inside = _run_parts(path, rules.prefix)
        if isinstance(where, str) and root:
            continue  # a root commit's other files are inert: never exported nor checked out
        if isinstance(where, str):
            return runs, f"{_shown(path)}: {where}"
        if status == "D":
            continue
        if status != "A":
            verb = {"M": "modifies", "T": "changes the type of"}.get(status, "changes")
            return runs, f"{verb} {_shown(path)}: published runs are never changed"
        if mode not in REGULAR_MODES:
            kind = {"120000": "a symlink", "160000": "a gitlink (submodule)"}.get(
                mode, f"mode {mode}"
            )
            return runs, f"{_shown(path)} is {kind}: runs hold regular files only"
        if not (
            (len(inside) == 1 and inside[0] in RUN_TOP_FILES)
            or (len(inside) > 1 and inside[0] in RUN_TOP_DIRS)
        ):
            return runs, (
                f"{_shown(path)} is not a file a run holds (at its top: "
                f"{', '.join(RUN_TOP_FILES)}, {'/, '.join(RUN_TOP_DIRS)}/ only)"
            )
        runs.add(where)
    return runs, ""


def _check_left_out(git, commit, changes, named, rules):
    """A commit may leave out (delete against the last accepted tree) only whole runs that a
    commit it names in its ``Sitebench-Left-Out`` trailer added: publish leaves out what its
    site refused, and the sites that had accepted it keep their copy. Anything else that
    disappears is a deletion, refused."""
    gone = {}
    for status, _, _, path in changes:
        if status == "D":
            gone.setdefault(_run_of(path, rules.prefix), []).append(path)
    if not gone:
        return ""
    added = {}
    for left in named:
        if git.run("merge-base", "--is-ancestor", left, commit, check=False).returncode != 0:
            continue
        parent = git.run("rev-parse", "-q", "--verify", f"{left}^", check=False)
        try:
            for status, _, _, path in _changes(git, left, parent.stdout.decode().strip() or None):
                if status == "A":
                    added.setdefault(_run_of(path, rules.prefix), set()).add(left)
        except RuntimeError:
            continue
    for (site, run), paths in sorted(gone.items()):
        whole = not git.text("ls-tree", "--name-only", commit, "--", f"{rules.prefix}{site}/{run}")
        if not whole or (site, run) not in added:
            return f"deletes {_shown(paths[0])}: published runs are never changed"
    return ""


def _check_trees(git, commit, base):
    """The checks git's fsck makes of a tree, for every tree the commit holds that the last
    accepted one did not: entries sorted as git sorts them, each name once (a file and a
    folder of the same name included), no empty name, no '/', modes git writes, and each
    entry's object of the type its mode says (a "blob" that is a tree is refused). An export
    of such a tree would fail halfway on every site that took it."""
    reason, leaves, holders, _ = _walk_trees(git, commit, base)
    return reason or _leaf_kinds(git, [(leaves, holders)])[0]


def _walk_trees(git, commit, base):
    """(reason, the new files [(sha, kind its mode says, path)], the trees listing them, the
    paths changed that ``base`` held too) of :func:`_check_trees`, all but the check of each
    file's object type; RuntimeError when git cannot read ``commit`` or ``base``."""
    walk = _walk_many(git, [(commit, base)]).get(commit)
    if walk is None:
        raise RuntimeError(f"{commit[:12]} is not a commit here")
    return walk


def _walk_many(git, pairs):
    """{commit: :func:`_walk_trees` of it against its base} for [(commit, base or None)],
    walked level by level for all of them at once: one ``cat-file`` round trip per level of
    folders, not per commit and level. Each commit's trees are read in the order a walk of it
    alone reads them, so it gets the same first reason. A commit git cannot read (or whose
    base it cannot read) is left out."""
    heads = git.objects(sorted({c for pair in pairs for c in pair if c}))
    walks, pending = {}, []
    for commit, base in pairs:
        tree, old = _commit_tree(heads, commit), _commit_tree(heads, base) if base else None
        if tree is None or (base and old is None):
            continue
        walks[commit] = ("", [], set(), set())
        pending.append((commit, tree, old, ""))
    while pending:
        wanted = [t for _, t, _, _ in pending] + [b for _, _, b, _ in pending if b]
        objects = git.objects(wanted)
        later = []
        for commit, sha, old, where in pending:
            reason, leaves, holders, existed = walks[commit]
            if reason:
                continue  # refused at an earlier tree: the rest of it is never read
            kind, data = objects.get(sha, ("missing", b""))
            if kind != "tree":
                walks[commit] = (f"{_shown(where or '/')} is a {kind}, listed as a tree",)
                walks[commit] += ([], set(), set())
                continue
            entries, reason = _tree_entries(data)
            if reason:
                why = f"malformed tree {_shown(where or '/')}: {reason} (git fsck refuses it)"
                walks[commit] = (why, [], set(), set())
                continue
            before = _tree_entries(objects.get(old, ("", b""))[1])[0] if old else {}
            for name, (mode, sub) in entries.items():
                if before.get(name) == (mode, sub):
                    continue
                path = f"{where}{name.decode('utf-8', errors='surrogateescape')}"
                if name in before:
                    existed.add(path)
                if mode == b"40000":
                    old_mode, old_sub = before.get(name, (None, None))
                    sub_old = old_sub if old_mode == b"40000" else None
                    later.append((commit, sub, sub_old, path + "/"))
                elif mode != b"160000":
                    leaves.append((sub, ENTRY_TYPES[mode], path))
                    holders.add(sha)
        pending = [item for item in later if not walks[item[0]][0]]
    return walks


def _commit_tree(objects, commit):
    kind, data = objects.get(commit, ("missing", b""))
    if kind != "commit" or not data.startswith(b"tree "):
        return None
    return data[5:45].decode()


def _leaf_kinds(git, walks, held=None):
    """[reason] for each walk's new files ([(leaves, holders)] of :func:`_walk_trees`): a
    file whose object is here must be what its mode says; every walk's from one
    ``rev-list`` and one ``cat-file``, or from ``held`` (:func:`held_kinds`) when given."""
    if held is not None:
        # Every file's mode says blob (trees and gitlinks are not leaves): only an object
        # here of another type breaks the rule, and ``held`` lists every one of them.
        kinds = {sha: held[sha] for leaves, _ in walks for sha, _, _ in leaves if sha in held}
        return _leaf_reasons(walks, kinds)
    holders = sorted({tree for leaves, trees in walks if leaves for tree in trees})
    present = _present(git, holders) if holders and git.partial else None
    # A blob a partial copy has not fetched is checked when it is (git checks every
    # object it receives); one that is here must be what its mode says.
    kinds = git.kinds(
        sorted(
            {
                sha
                for leaves, _ in walks
                for sha, _, _ in leaves
                if present is None or sha in present
            }
        )
    )
    return _leaf_reasons(walks, kinds)


def _leaf_reasons(walks, kinds):
    reasons = []
    for leaves, _ in walks:
        wrong = [(sha, kind, path) for sha, kind, path in leaves if kinds.get(sha, kind) != kind]
        reasons.append(
            f"{_shown(wrong[0][2])} is listed as a {wrong[0][1]} but is a {kinds[wrong[0][0]]}"
            if wrong
            else ""
        )
    return reasons


#: Commits whose trees are walked before their objects' types are asked in one go.
TREES_AT_ONCE = 256
#: A partial copy holding at most this many objects per file the range adds has the types
#: of all its objects listed by one ``cat-file --batch-all-objects`` (0.7 us an object),
#: not the new files looked up (``rev-list --missing=print``: git 2.39 rescans its packs
#: for each blob the copy lacks, 13-16 us a file); both measured on 2026-11-28 on a first
#: pull of 400 runs (40,809 objects held, 208,800 files added).
ALL_OBJECTS_PER_FILE = 4


def held_kinds(git, changes):
    """{object: type} of every object a partial copy holds that is not a blob, when listing
    them all costs less than looking up the files ``changes`` add (a first pull: the copy
    holds the range's trees and index files, a fifth of an object per file added); None
    otherwise (a copy with years of history, or a full copy: each file is looked up)."""
    added = sum(1 for entries in changes.values() for change in entries if change[0] == "A")
    if not added or not git.partial:
        return None
    counts = {}
    for line in git.text("count-objects", "-v").splitlines():
        name, _, value = line.partition(": ")
        counts[name] = int(value) if value.isdigit() else 0
    if counts.get("count", 0) + counts.get("in-pack", 0) > ALL_OBJECTS_PER_FILE * added:
        return None
    listing = git.text(
        "cat-file", "--batch-all-objects", "--batch-check=%(objecttype) %(objectname)"
    )
    held = {}
    for line in listing.splitlines():
        kind, _, sha = line.partition(" ")
        if kind != "blob" and sha:
            held[sha] = kind
    return held


def tree_reasons(git, commits, held=None):
    """{commit: (:func:`_check_trees` of it against its parent, the paths it changes that
    its parent held)} for each [commit, parent] (or [root]), a few hundred commits' trees
    walked together (:func:`_walk_many`) and their files typed by one ``rev-list`` and one
    ``cat-file`` (or from ``held``, :func:`held_kinds`), the range's shares read at once,
    one per core (each by a ``cat-file`` of its own); a commit git cannot read is left out
    (judged alone)."""
    size = max(1, -(-len(commits) // _cores()))
    shares = [commits[at : at + size] for at in range(0, len(commits), size)]
    if len(shares) <= 1:
        return _tree_share(git, commits, held)
    found = {}
    readers = [git.twin() for _ in shares]
    try:
        with ThreadPoolExecutor(max_workers=_cores()) as pool:
            for part in pool.map(_tree_share, readers, shares, [held] * len(shares)):
                found.update(part)
    finally:
        for reader in readers:
            reader.close()
    return found


def _tree_share(git, commits, held=None):
    found = {}
    for at in range(0, len(commits), TREES_AT_ONCE):
        part = commits[at : at + TREES_AT_ONCE]
        walks = _walk_many(git, [(c[0], c[1] if len(c) > 1 else None) for c in part])
        walks = {c[0]: walks[c[0]] for c in part if c[0] in walks}
        clean = [c for c, walk in walks.items() if not walk[0]]
        found.update({c: (walk[0], set()) for c, walk in walks.items() if walk[0]})
        kinds = _leaf_kinds(git, [walks[c][1:3] for c in clean], held)
        found.update({c: (reason, walks[c][3]) for c, reason in zip(clean, kinds)})
    return found


def _present(git, trees):
    """The objects under ``trees`` (those listing the commit's new files) that a partial
    copy holds, asked without fetching (``cat-file`` would fetch, or die where fetching is
    off); the others are checked by git when they are fetched. Walking these trees, not the
    commit against the last accepted one, costs what the commit brings, not what the copy
    has accepted (the whole accepted tree was walked once per commit)."""
    listed = "".join(tree + "\n" for tree in trees).encode()
    out = git.text("rev-list", "--objects", "--missing=print", "--stdin", stdin=listed)
    return {ln.split()[0] for ln in out.splitlines() if ln and not ln.startswith("?")}


def _tree_entries(data):
    """({name: (mode, sha)}, reason) of a raw tree object, with fsck's reason if malformed."""
    entries, at, last = {}, 0, None
    while at < len(data):
        space, nul = data.find(b" ", at), data.find(b"\0", at)
        if space < 0 or nul < 0 or space > nul or nul + 21 > len(data):
            return entries, "a truncated entry"
        mode, name, sha = data[at:space], data[space + 1 : nul], data[nul + 1 : nul + 21].hex()
        at = nul + 21
        if mode not in ENTRY_TYPES:
            return entries, f"mode {mode.decode(errors='replace')!r} is not one git writes"
        if not name or b"/" in name:
            return entries, f"entry name {name!r} (empty or a path)"
        if name in entries:
            clash = (entries[name][0] == b"40000") != (mode == b"40000")
            what = "a file and a folder of one name" if clash else "duplicate entries"
            return entries, f"{name.decode(errors='replace')!r} twice ({what})"
        key = name + (b"/" if mode == b"40000" else b"")
        if last is not None and key <= last:
            return entries, f"{name.decode(errors='replace')!r} out of git's order (not sorted)"
        entries[name], last = (mode, sha), key
    return entries, ""


def _run_of(path, prefix):
    """(site, run) of a file path, or a string saying why it is not a run file."""
    return _run_parts(path, prefix)[0]


def _run_parts(path, prefix):
    """((site, run), (the path's components inside the run)) of a file path, or (a string
    saying why it is not a run file, ()); the same checks as :func:`_not_a_run` and
    :func:`_bad_component`, in the same order, the part inside the run checked once for
    every run that holds it."""
    head = path[len(prefix) :].split("/", 2) if path.startswith(prefix) else None
    if head is None or len(head) < 3:
        why = _not_a_run(path, prefix)
    else:
        inside, bad = _inside_run(head[2])
        if len(inside) + 2 > MAX_DEPTH or len(path) > MAX_PATH:
            why = "path too deep or too long"
        else:
            why = _bad_run_dir(head[0], head[1])
    if why:
        return f"not a run file ({why}; code and configuration never travel with runs)", ()
    if bad:
        return bad, ()
    return (head[0], head[1]), inside


@functools.lru_cache(maxsize=2**16)
def _inside_run(rest):
    """(the components of a path inside a run, why one is refused or "")."""
    inside = tuple(rest.split("/"))
    for part in inside:
        bad = _bad_component(part)
        if bad:
            return inside, bad
    return inside, ""


def _not_a_run(path, prefix):
    if not path.startswith(prefix):
        return f"outside {prefix}"
    parts = path[len(prefix) :].split("/")
    if len(parts) < 3:
        return "not inside a run directory <site>/<run>/"
    if len(parts) > MAX_DEPTH or len(path) > MAX_PATH:
        return "path too deep or too long"
    return _bad_run_dir(parts[0], parts[1])


@functools.lru_cache(maxsize=2**16)
def _bad_run_dir(site, run):
    """Why ``<site>/<run>/`` is not a run's folder ("" when it is); remembered, since a run
    adds hundreds of files."""
    if not SITE_NAME.fullmatch(site) or ".." in site:
        return f"invalid site name {site!r}"
    if not RUN_NAME.fullmatch(run):
        return f"invalid run name {run!r}: runs are named <UTC time>-<random>"
    return ""


@functools.lru_cache(maxsize=2**16)
def _bad_component(part):
    """Why a path component no file system or git takes is refused ("" when it is fine);
    remembered, since a run's names recur in every run of every night."""
    if part in ("", ".", ".."):
        return f"path component {part!r}"
    if part.lower().rstrip(". ") in (".git", "git~1") or part.lower() == ".gitmodules":
        return f"path component {part!r} (git's own)"
    if CONTROL_OR_BACKSLASH.search(part):
        return "a control character or backslash in a file name"
    if len(part.encode("utf-8", errors="surrogateescape")) > MAX_COMPONENT:
        return "a file name over 255 bytes"
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return "a file name that is not UTF-8"
    return ""


def _check_new_runs(git, parent, runs, rules, held=None):
    """Each run the commit touches must be absent from the last accepted commit ``parent``
    (never extended); ``held``: the paths it changes that ``parent`` held, when known."""
    if held is not None:
        for site, run in sorted(runs):
            if f"{rules.prefix}{site}/{run}" in held:
                return f"adds files to the published run {site}/{run}: runs are never changed"
        return ""
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


def blob_sizes(git, blobs, known=None):
    """``known`` ({blob: size, None when missing}) with the sizes of ``blobs`` it lacked,
    asked by one ``cat-file --batch-check``."""
    known = {} if known is None else known
    wanted = sorted({blob for blob in blobs if blob not in known})
    if wanted:
        out = git.text(
            "cat-file",
            "--batch-check=%(objectname) %(objectsize)",
            stdin="".join(f"{blob}\n" for blob in wanted).encode(),
        )
        answers = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        for blob in wanted:
            size = answers.get(blob, "")
            known[blob] = int(size) if size.isdigit() else None
    return known


def sized(path, prefix, sized_only):
    """Whether a file a commit adds is sized here (:attr:`Rules.sized_only`)."""
    if isinstance(sized_only, (set, frozenset)):
        return path in sized_only  # the paths a partial copy fetched (none: nothing sized)
    if not sized_only:
        return True
    return in_run(path, prefix).startswith(tuple(sized_only))


def sized_changes(changes, prefix, sized_only):
    """The changes (tuples whose last item is the path) of files sized here (:func:`sized`);
    the paths a partial copy fetched are looked up in their set directly (a first pull
    asks this of every file of every run, three times)."""
    if isinstance(sized_only, (set, frozenset)):
        return [c for c in changes if c[-1] in sized_only]
    return [c for c in changes if sized(c[-1], prefix, sized_only)]


def _sized(changes, rules):
    """The added files of ``changes`` whose size is checked here."""
    return sized_changes([c for c in changes if c[0] == "A"], rules.prefix, rules.sized_only)


def _check_sizes(git, changes, rules, sizes=None):
    changes = sized_changes(changes, rules.prefix, rules.sized_only)
    blobs = [blob for _, _, blob, _ in changes]
    if not blobs:
        return ""
    sizes = blob_sizes(git, blobs, sizes)
    per_run = {}
    for blob, (_, _, _, path) in zip(blobs, changes):
        size = sizes.get(blob)
        if size is None:
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


def _check_times(runs, committed, rules):
    """A run's time (its name's) is no later than its commit's, and the commit's no later
    than now: a run from the future is refused (a signing key's validity period is checked
    by git at the commit's time, so that time must be bounded too)."""
    now = rules.now if rules.now is not None else time.time()
    if committed > now + CLOCK_SKEW_S:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(committed))
        return f"committed in the future ({when}): commit times are bounded by now"
    for site, run in sorted(runs):
        try:
            started = calendar.timegm(time.strptime(run[:16], "%Y%m%dT%H%M%SZ"))
        except ValueError:
            return f"the run {site}/{run} has no valid time in its name"
        if started > committed + CLOCK_SKEW_S:
            return (
                f"the run {site}/{run} is dated after its commit: run times are bounded by "
                "their commit's"
            )
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
    if unsigned_ok and status != "G":
        return ""
    if len(rules.trusted.get(key, ())) > 1 and not unsigned_ok:
        # Which site's period git checked is unknown (a hand-written list, or a local key
        # merged with the registry's): never judged.
        return shared_key_reason(key, sorted(rules.trusted[key]))
    if status != "G":
        if key in rules.trusted:
            return (
                f"signed by {key}, trusted for {', '.join(sorted(rules.trusted[key]))} but not "
                "at the commit's time (outside its valid-after/valid-before: revoked or not "
                "yet valid)"
            )
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


def _check_with_registry(git, old, new, rules):
    """check_range with the keys of the federation's registry added to the host's list: the
    registry at the tip pushed on, then again at each registry change the push brings (a
    rotated key publishes in the push that announces it)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sitebench-hook-") as tmp:
        used, verdicts = None, []
        for round_ in range(5):
            ok = [v.commit for v in verdicts if v.ok]
            at = ok[-1] if ok else (old if old != ZERO else None)
            blob = git.run("rev-parse", "-q", "--verify", f"{at}:{REGISTRY_FILE}", check=False)
            blob = blob.stdout.decode().strip() if at else ""
            if round_ and blob == used:
                return verdicts
            used = blob
            verdicts = check_range(git, old, new, _registry_rules(git, at, rules, tmp, round_))
        return verdicts


def _registry_rules(git, commit, rules, tmp, n):
    """``rules`` whose trust list holds the registry's keys at ``commit`` too (a registry
    rooted in another host key than the one pinned is not read)."""
    text = (_blob_text(git, f"{commit}:{REGISTRY_FILE}") or "") if commit else ""
    entries, reason = registry_entries(text)
    if reason or not entries or entries[0][0] != HOST:
        return rules
    if rules.registry_host and entries[0][1] != rules.registry_host:
        return rules
    state = registry_state(entries)
    lines = []
    for line in open(rules.allowed_signers, encoding="utf-8").read().splitlines():
        # The principal ends at any blank, as OpenSSH reads it: a hand-written line with a
        # tab is replaced by the registry's line of its key too (never kept valid beside it).
        principal = line.split(None, 1)[0] if line.strip() else ""
        if line.strip() and (principal, fingerprint(line)) not in state:
            lines.append(line)
    for (principal, _), (options, key) in state.items():
        if principal != HOST:
            shown = ",".join(f'{k}="{v}"' for k, v in sorted(options.items()))
            lines.append(" ".join(part for part in (principal, shown, key) if part))
    path = os.path.join(tmp, f"allowed_signers-{n}")
    with open(path, "w", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in lines))
    return Rules(
        prefix=rules.prefix,
        max_file=rules.max_file,
        max_run=rules.max_run,
        trusted=read_allowed_signers(path),
        unsigned_sites=rules.unsigned_sites,
        allowed_signers=path,
        registry_host=rules.registry_host,
    )


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
        registry_host=settings.get("registry_host"),
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
        for verdict in _check_with_registry(git, old, new, rules):
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
