"""Runs travel between sites through git: :func:`publish` sends a site's new runs to the
shared results repository, :func:`pull` brings every site's runs. Code never travels with
them, and nothing another site pushed is trusted before it is verified.

The results repository is a git repository of its own (never the code's): runs sit at
``<prefix><site>/<run>/`` in it (``prefix`` "" for a results repository, "results/" for one
migrated from a checkout whose remote the sites shared). Each results directory keeps its own
bare copy of it, ``<results>/.exchange/`` (no work tree: nothing is ever checked out), with:

* ``refs/sitebench/accepted``: the remote history already verified here;
* ``refs/sitebench/quarantine/<commit>``: each refused commit, kept for inspection, its
  reason in ``.exchange/sitebench-quarantine.tsv``.

:func:`pull` fetches the branch, verifies every new commit (:mod:`sitebench.results.verify`:
only added regular files inside new runs, sizes, SSH signatures against this site's trust
list, :mod:`sitebench.results.trust`) and exports the runs of the accepted ones into
``<results>/<site>/<run>/`` (written aside, renamed into place, never over an existing run).
A refused commit takes nothing in; the accepted commits around it still arrive.

:func:`publish` pulls first, then makes one signed commit of this site's runs that the
remote lacks, on top of the remote's branch, with a private index (no work tree, no rebase:
a publish killed at any point leaves nothing to repair), and pushes it; when another site
pushed in between it starts again, and a remote's refusal (a hook's message) is shown and
not retried. A remote that cannot be reached leaves the runs where they are: the next
publish sends them. One publish or pull at a time per results directory (``flock``).
"""

import fcntl
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.results import figures_file, limits, quarantine, refused_figures, registry
from sitebench.results import trust, verify
from sitebench.results.figures_file import FIGURES_FILE
from sitebench.results.rundirs import run_dirs
from sitebench.sites import site_settings

EXCHANGE_DIR = ".exchange"
#: What pull, publish and the nightly alert say when they meet a rewritten history.
RESTORE_HINT = (
    "the remote's history was rewritten: once the admins have looked, "
    "./sitebench exchange restore puts back the history verified here"
)
ACCEPTED = "refs/sitebench/accepted"
FETCHED = "refs/sitebench/fetched"
#: The remote as git's partial clone knows it: commits and trees arrive, blobs only when
#: asked for (:meth:`Exchange.index_blobs`, :meth:`Exchange.materialise`).
PROMISOR = "sitebench"
#: What a local remote's upload-pack is told, so it serves the blob filter and blobs by id
#: (``exchange init-remote`` sets both in the repositories it makes).
LOCAL_UPLOAD_PACK = (
    "git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"
)
#: A lazy fetch is never made by accident: git's transports are off for every read of
#: the copy (a missing blob reads as missing, one fetch per object never happens).
NO_LAZY_FETCH = ("-c", "protocol.allow=never")
#: Every run accepted here, one file per site (``<site>.tsv``: run, the run's tree as
#: accepted, the commit that added it), appended when commits are accepted: the tip's tree
#: may hold a refused commit's change to an accepted run, the run's own tree never.
RUNS_LOG = "sitebench-runs"
#: How many sites' run logs a pull writes and syncs at once.
LOG_WRITERS = 16
#: The files of a run every site takes: what comparison reads of ReFrame's report
#: (``figures.json``, :mod:`.figures_file`) and the provenance. The rest (``report.json``,
#: ``perflogs/``, ``output/``) stays on the remote until ``./sitebench show`` asks for it,
#: which audits the figures taken against the report (:func:`audit_figures`).
INDEX_PATHS = ("figures.json", "provenance/")
#: What every site takes of a run published without ``figures.json`` (before 2026-11-28).
OLDER_INDEX_PATHS = ("report.json", "provenance/", "perflogs/")
#: The files of a run that may be taken, whichever of the two it is.
EVER_INDEXED = tuple(sorted(set(INDEX_PATHS + OLDER_INDEX_PATHS)))
QUARANTINE = "refs/sitebench/quarantine/"
QUARANTINE_LOG = "sitebench-quarantine.tsv"
#: Where a restore records on the remote the rewritten tip it replaced.
REFUSED_ON_REMOTE = "refs/sitebench/refused/"
LOCK_NAME = "sitebench-exchange.lock"
LOCK_TIMEOUT_S = 600
DEFAULT_BRANCH = "main"
#: How many registry changes one pull takes in before judging the runs again.
REGISTRY_ROUNDS = 4
#: ``./sitebench pull`` exits with this when it refused runs (the accepted ones arrived).
REFUSED_EXIT = 3


@dataclass
class Published:
    """What one :func:`publish` did: ``runs`` of this site pushed this time; ``reason`` is
    why not when ``published`` is false; ``commit`` the pushed commit; ``refused`` the
    incoming commits refused on the way (one line each); ``rewritten`` the remote's history
    no longer holds what was accepted here (nothing is published on top: see :func:`restore`)."""

    published: bool
    runs: list = field(default_factory=list)
    reason: str = ""
    commit: str = None
    refused: list = field(default_factory=list)
    rewritten: bool = False
    #: [(site, commit, reason)] of the refused commits (``refused``'s lines, by site).
    refusals: list = field(default_factory=list)


@dataclass
class Pulled:
    """What one :func:`pull` brought: ``new`` [(site, [runs])], ``refused`` one line per
    refused commit (kept under ``refs/sitebench/quarantine/``), ``kept`` runs that arrived
    different from the copy already here (the copy here is kept); ``left_out`` the commits
    after the last accepted one that were refused here (publish leaves them out, naming
    them); ``baseline_refused`` the history accepted here was refused as a rewrite by
    another site's restore (re-pin with ``pull --expect``, never restore)."""

    new: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    kept: list = field(default_factory=list)
    rewritten: bool = False
    left_out: list = field(default_factory=list)
    baseline_refused: bool = False
    #: [(site, commit, reason)] of the refused commits (``refused``'s lines, by site).
    refusals: list = field(default_factory=list)
    #: The remote ignored the blob filter: every object came whole (correct, larger).
    whole: bool = False
    #: One line per site the registry gives a key this site trusts for another site: those
    #: registry lines are set aside (:func:`sitebench.results.registry.aside_lines`).
    set_aside: list = field(default_factory=list)


class GitFailed(SitebenchError):
    """A git command failed; ``reason`` is git's own words, the remote's ones included."""

    def __init__(self, args, stderr, code):
        self.args_ = args
        self.stderr = stderr
        self.reason = _reason(stderr) or f"git {args[0]} exited with {code}"
        super().__init__(f"git {args[0]} failed: {self.reason}", "see git's reason above")


def _reason(stderr):
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    remote = [ln[len("remote:") :].strip() for ln in lines if ln.startswith("remote:")]
    remote = [ln for ln in remote if ln]
    for ln in lines:
        if ln.startswith(("fatal:", "error:")) or "rejected" in ln:
            return ln + (f" ({'; '.join(remote)})" if remote else "")
    return "; ".join(remote) or (lines[-1] if lines else "")


class Exchange:
    """The bare copy of the results repository kept beside a results directory."""

    def __init__(self, results_root):
        self.results_root = Path(results_root)
        self.git_dir = self.results_root / EXCHANGE_DIR
        self.whole = False  # set by fetch: the remote ignored the blob filter
        self.identity = [
            "-c",
            "user.name=sitebench",
            "-c",
            f"user.email=sitebench@{socket.gethostname()}",
        ]

    @property
    def exists(self):
        return (self.git_dir / "HEAD").is_file()

    def create(self, remote, branch, prefix):
        self.results_root.mkdir(parents=True, exist_ok=True)
        if not self.exists:
            tmp = Path(tempfile.mkdtemp(prefix=".exchange-", dir=self.results_root))
            _run(["git", "init", "--quiet", "--bare", str(tmp)])
            tmp.rename(self.git_dir)
        self.git("config", "sitebench.remote", remote)
        self.git("config", "sitebench.branch", branch)
        self.git("config", "sitebench.prefix", prefix)
        self.make_partial(remote)

    def make_partial(self, remote):
        """Make the copy a partial clone of ``remote`` with git's own machinery (a copy
        made before keeps what it holds; from now on blobs come only when asked for)."""
        self.git("config", "core.repositoryformatversion", "1")
        self.git("config", "extensions.partialClone", PROMISOR)
        self.git("config", f"remote.{PROMISOR}.url", remote)
        self.git("config", f"remote.{PROMISOR}.promisor", "true")
        self.git("config", f"remote.{PROMISOR}.partialclonefilter", "blob:none")
        if _is_local(remote):
            self.git("config", f"remote.{PROMISOR}.uploadpack", LOCAL_UPLOAD_PACK)
        else:
            self.git("config", "--unset-all", f"remote.{PROMISOR}.uploadpack", check=False)

    def setting(self, key, default=None):
        proc = self.git("config", "--get", f"sitebench.{key}", check=False)
        return proc.stdout.strip() if proc.returncode == 0 else default

    def git(self, *args, check=True, stdin=None, env=None):
        proc = subprocess.run(
            ["git", *self.identity, "--git-dir", str(self.git_dir), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})},
        )
        if check and proc.returncode != 0:
            raise GitFailed(args, proc.stderr, proc.returncode)
        return proc

    def rev(self, ref):
        proc = self.git("rev-parse", "-q", "--verify", ref + "^{commit}", check=False)
        return proc.stdout.strip() or None

    @contextmanager
    def locked(self, timeout=LOCK_TIMEOUT_S):
        """One publish or pull at a time per results directory (the kernel drops it)."""
        self.results_root.mkdir(parents=True, exist_ok=True)
        with open(self.results_root / f".{LOCK_NAME}", "a+") as handle:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise SitebenchError(
                            f"another publish or pull has held {handle.name} for {timeout} s",
                            "wait for it to finish, or find it with: fuser " + handle.name,
                        ) from None
                    time.sleep(0.1)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- fetching and verifying ------------------------------------------------------

    def fetch(self):
        """Fetch the remote branch's commits and trees into FETCHED (blobs stay there);
        its commit, or None when it has no branch."""
        branch = self.setting("branch", DEFAULT_BRANCH)
        if self.setting_of(f"remote.{PROMISOR}.url") != self.setting("remote"):
            self.make_partial(self.setting("remote"))  # a copy from before, or a new remote
        proc = self.git("ls-remote", "--heads", PROMISOR, f"refs/heads/{branch}", check=False)
        if proc.returncode != 0:
            raise GitFailed(("ls-remote",), proc.stderr, proc.returncode)
        if not proc.stdout.strip():
            return None
        proc = self.git(
            "fetch",
            "--no-tags",
            "--filter=blob:none",
            PROMISOR,
            f"+refs/heads/{branch}:{FETCHED}",
        )
        self.whole = "filtering not recognized" in proc.stderr
        return self.rev(FETCHED)

    def setting_of(self, key):
        proc = self.git("config", "--get", key, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else None

    def read(self, *args, stdin=None):
        """git reading the copy, bytes out, never fetching (:data:`NO_LAZY_FETCH`)."""
        return subprocess.run(
            ["git", *NO_LAZY_FETCH, "--git-dir", str(self.git_dir), *args],
            input=stdin,
            capture_output=True,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )

    def index_blobs(self, tip, accepted, prefix, changes=None):
        """{(path, blob)} of the files every run of ``accepted..tip`` adds under
        :func:`index_paths` (what verification sizes and the store reads) and of the
        registry: what a pull fetches. The rest of a run (its bulk) stays on the remote.
        ``changes``: the range's changes (:func:`verify.read_range`), read here when None."""
        if not changes:
            changes = self._logged_changes(tip, accepted)
        # Each commit's additions, run by run: what a run holds is judged in the commit
        # that adds it (a later commit adding to it is refused, and takes nothing along).
        added, wanted, skip = {}, set(), len(prefix)
        for commit, entries in changes.items():
            for _status, mode, blob, path in entries:
                if mode not in verify.REGULAR_MODES:
                    continue
                # verify.in_run, inline: a first pull asks it of every file of every run.
                parts = path[skip:].split("/", 2) if path.startswith(prefix) else ()
                inside = parts[2] if len(parts) == 3 else ""
                if inside.startswith(EVER_INDEXED):  # the rest is bulk whatever the run
                    run = (commit, path[: len(path) - len(inside)])
                    added.setdefault(run, []).append((inside, path, blob))
                elif path == verify.REGISTRY_FILE:
                    wanted.add((path, blob))  # verified against the registry before it
        for files in added.values():
            taken = index_paths(inside for inside, _, _ in files)
            wanted.update((path, blob) for inside, path, blob in files if inside.startswith(taken))
        return wanted

    def _logged_changes(self, tip, accepted):
        """{commit: [(status, new mode, new blob, path)]} of ``accepted..tip`` by ``git log``
        (where one ``diff-tree`` of the range failed on a commit it could not read)."""
        args = ["log", "--raw", "--no-abbrev", "-r", "-z", "--no-renames", "--format=%x01%H"]
        args += [tip, "--not", accepted] if accepted else [tip]
        raw = iter(self.read(*args).stdout.split(b"\0"))
        changes, commit = {}, ""
        for token in raw:
            if token.startswith(b"\x01"):
                commit = token[1:].decode()
                continue
            meta = token.decode(errors="replace").strip().lstrip(":").split()
            path = next(raw, b"").decode("utf-8", errors="surrogateescape")
            if len(meta) >= 5:
                changes.setdefault(commit, []).append((meta[4][:1], meta[1], meta[3], path))
        return changes

    def fetch_index_blobs(self, wanted):
        """Fetch in one go the blobs :meth:`index_blobs` names; git's client asks only for
        those it lacks."""
        if wanted:
            self.git(
                "-c",
                "fetch.negotiationAlgorithm=noop",
                "fetch",
                "--no-tags",
                "--no-write-fetch-head",
                "--filter=blob:none",
                PROMISOR,
                "--stdin",
                stdin="".join(f"{oid}\n" for oid in sorted({blob for _, blob in wanted})),
            )

    def accept(self, tip, rules):
        """Verify ``accepted..tip`` and take the accepted commits' runs in (their trees,
        recorded in :data:`RUNS_LOG`; nothing is written into the results directory: a run
        of another site is read from git, :meth:`materialise` writes it on demand); a
        :class:`Pulled` whose ``new`` lists the runs taken in per site. ``accepted`` is the
        last commit accepted here: each commit is judged against it, and a refused commit
        leaves it where it was, so its content never becomes part of what this site takes
        in or builds on (publish)."""
        pulled = Pulled(whole=self.whole)
        accepted = self.rev(ACCEPTED)
        if tip is None and accepted is not None:
            # The branch is gone: what was accepted is no longer there, as in any rewrite
            # (publishing would start a history without it; restore puts it back).
            pulled.rewritten = True
            pulled.refused.append(self._note_deleted_branch(accepted))
            return pulled
        if tip is None or tip == accepted:
            return pulled
        ancestor = accepted is None or (
            self.git("merge-base", "--is-ancestor", accepted, tip, check=False).returncode == 0
        )
        fetched = OLDER_INDEX_PATHS + INDEX_PATHS  # a rewrite: refused before any is sized
        git = verify.Git(self.git_dir, config=[NO_LAZY_FETCH[1]])
        # The range's commits and changes, read once for the blobs fetched, the rules and the
        # limits (a rewrite is refused by check_range before any is read).
        read = verify.read_range(git, accepted, tip) if ancestor else None
        # The signatures need the commits only: checked while the files are fetched.
        signing = verify.Signing(git, accepted, tip, rules, read) if ancestor else None
        try:
            if ancestor:
                wanted = self.index_blobs(tip, accepted, rules.prefix, read[1])
                fetched = frozenset(path for path, _ in wanted)
                try:
                    self.fetch_index_blobs(wanted)
                except GitFailed:
                    pass  # a blob not served: its commit is refused ("its content is missing")
            # A remote that ignored the filter sent every blob: all are sized, as before.
            rules.sized_only = () if pulled.whole else fetched
            refused_before = self._quarantined_commits()
            verdicts = verify.check_range(git, accepted, tip, rules, refused_before, read, signing)
        finally:
            if signing is not None:
                signing.close()
        for _ in range(REGISTRY_ROUNDS):
            # A registry change accepted on the way (a rotation, a new site) is taken in,
            # then the range is judged again with the keys it gave: runs a rotated key
            # signed after it are accepted in the same pull.
            last = [v.commit for v in verdicts if v.ok]
            if not last or not registry.sync(self, last[-1]):
                break
            sized_only, rules = rules.sized_only, trust.rules(prefix=rules.prefix)
            rules.sized_only = sized_only
            verdicts = verify.check_range(git, accepted, tip, rules, refused_before, read)
        # What one site may add (results.limits), then every new refusal quarantined at once
        # (a commit refused before, or a rewritten history, is not logged again here).
        settings = limits.configured(self.git_dir, self.setting("site"))
        verdicts, usage = limits.screen(
            self.git_dir,
            verdicts,
            rules.prefix,
            settings,
            sized_only=rules.sized_only,
            changes=read[1] if read else None,
        )
        fresh = [
            v
            for v in verdicts
            if not v.ok
            and v.reason != verify.REFUSED_BEFORE
            and not v.reason.startswith(verify.REWRITE)
        ]
        pulled.refusals = quarantine.keep(
            self.git_dir,
            fresh,
            rules.prefix,
            settings.get("quarantine_refs", quarantine.DEFAULT_REFS),
        )
        pulled.refused += [f"commit {c[:12]} refused: {r}" for _, c, r in pulled.refusals]
        found = self.take_runs(verdicts, rules.prefix)
        pulled.rewritten = len(verdicts) == 1 and verdicts[0].reason.startswith(verify.REWRITE)
        if pulled.rewritten:
            pulled.refused.append(self._quarantine(verdicts[0]))
        else:
            pulled.left_out = [v.commit for v in verdicts if not v.ok]
            last = [v.commit for v in verdicts if v.ok]
            if last:
                self.git("update-ref", ACCEPTED, last[-1])
            usage.save()
        pulled.new = [(site, sorted(runs)) for site, runs in sorted(found.items())]
        return pulled

    def take_runs(self, verdicts, prefix):
        """Log the runs of the accepted ``verdicts`` not accepted here before (a pull killed
        before its ref moved, a re-judged commit), each with its tree as the commit adds it
        (:data:`RUNS_LOG`, synced); {site: [runs]} taken."""
        found, taken = {}, []
        have = {}
        for verdict in verdicts:
            if verdict.reason == verify.REFUSED_BEFORE or verdict.reason.startswith(
                verify.REWRITE
            ):
                continue
            if not verdict.ok:
                continue
            for site, run in verdict.runs:
                if site not in have:
                    have[site] = self.accepted_runs(site).get(site, {})
                if run in have[site]:
                    continue  # accepted before (a pull killed before its ref moved)
                taken.append((site, run, None, verdict.commit))
                have[site][run] = verdict.commit
                found.setdefault(site, []).append(run)
        if taken:
            # Every run's tree from one git process (a first pull takes a year of runs).
            names = [f"{commit}:{prefix}{site}/{run}" for site, run, _, commit in taken]
            out = self.git(
                *NO_LAZY_FETCH,
                "cat-file",
                "--batch-check=%(objectname) %(objecttype)",
                stdin="".join(f"{name}\n" for name in names),
            ).stdout.splitlines()
            trees = [line.split()[0] if line.endswith(" tree") else None for line in out]
            if len(trees) != len(names) or None in trees:
                raise GitFailed(("cat-file",), f"fatal: no tree for {len(names)} runs", 128)
            taken = [
                (site, run, tree, commit) for (site, run, _, commit), tree in zip(taken, trees)
            ]
            self._log_runs(taken)
        return found

    def _quarantined_commits(self):
        """Every commit refused here: the log keeps them all, the refs only the newest."""
        out = self.git("for-each-ref", "--format=%(refname)", QUARANTINE).stdout
        held = {ref[len(QUARANTINE) :] for ref in out.split() if len(ref) == len(QUARANTINE) + 40}
        logged = {
            row[1]
            for row in quarantine.log_rows(self.git_dir)
            if len(row[1]) == 40 and not row[3].startswith(verify.REWRITE)
        }
        return held | logged

    def _log_runs(self, taken):
        (self.git_dir / RUNS_LOG).mkdir(exist_ok=True)
        by_site = {}
        for site, run, tree, commit in taken:
            by_site.setdefault(site, []).append(f"{run}\t{tree}\t{commit}\n")
        # One file per site, each synced before the accepted ref moves; synced side by side
        # (the file system commits them together: 100 sites' logs one after the other took
        # 0.5 s, at once 0.03 s, measured on this VM's ext4 on 2026-11-28).
        with ThreadPoolExecutor(max_workers=min(LOG_WRITERS, len(by_site) or 1)) as pool:
            list(pool.map(self._append_log, by_site.items()))

    def _append_log(self, item):
        site, lines = item
        with open(self.git_dir / RUNS_LOG / f"{site}.tsv", "a+b") as log:
            log.seek(0, os.SEEK_END)
            if log.tell():  # a line half written by a killed pull ends before these
                log.seek(log.tell() - 1)
                lines.insert(0, "" if log.read(1) == b"\n" else "\n")
            log.write("".join(lines).encode())
            log.flush()
            os.fsync(log.fileno())

    def runs_since(self, site, offset=0):
        """([(site, run, tree, commit)] of ``site`` accepted after byte ``offset`` of its
        log, the log's end): the store reads only what arrived since its last refresh."""
        try:
            with open(self.git_dir / RUNS_LOG / f"{check_name('site', site)}.tsv", "rb") as log:
                log.seek(0, os.SEEK_END)
                end = log.tell()
                log.seek(offset if 0 <= offset <= end else 0)
                data = log.read(end - log.tell())
        except FileNotFoundError:
            return [], 0
        whole = data[: data.rfind(b"\n") + 1]  # a line half written by a killed pull waits
        entries = []
        for line in whole.decode("utf-8", errors="replace").splitlines():
            fields = line.split("\t")
            if len(fields) == 3:
                entries.append((site, *fields))
        return entries, end - len(data) + len(whole)

    def accepted_sites(self):
        """The sites with a run accepted here (one file each: no git, whatever the history)."""
        folder = self.git_dir / RUNS_LOG
        names = [p.name[: -len(".tsv")] for p in folder.glob("*.tsv")] if folder.is_dir() else []
        return sorted(n for n in names if verify.SITE_NAME.fullmatch(n) and ".." not in n)

    def accepted_runs(self, site=None):
        """{site: {run: (tree, commit)}} of the runs of other sites accepted here (of
        ``site`` only, reading its log alone); the first record of a run wins."""
        found = {}
        for name in [site] if site else self.accepted_sites():
            for _, run, tree, commit in self.runs_since(name, 0)[0]:
                found.setdefault(name, {}).setdefault(run, (tree, commit))
        return found

    def _quarantine(self, verdict):
        line = f"commit {verdict.commit[:12]} refused: {verdict.reason}"
        # A rewritten tip is kept apart: it is refused as a history, not as a commit (a
        # site that re-pins its baseline may take that commit later).
        rewrite = "rewrite-" if verdict.reason.startswith(verify.REWRITE) else ""
        ref = f"{QUARANTINE}{rewrite}{verdict.commit}"
        if self.rev(ref):
            return line  # refused before (a rewrite is met again by every pull)
        self.git("update-ref", ref, verdict.commit)
        prefix = self.setting("prefix", "")
        site = quarantine.sites_of(self.git_dir, [verdict.commit], prefix)[verdict.commit]
        self._log_refusal(verdict.commit, verdict.reason, site)
        return line

    def _log_refusal(self, what, reason, site="-"):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(self.git_dir / QUARANTINE_LOG, "a", encoding="utf-8") as log:
            log.write(f"{stamp}\t{what}\t{site}\t{reason}\n")

    def _note_deleted_branch(self, accepted):
        reason = (
            f"{verify.REWRITE}: the remote's branch was deleted (it held {accepted[:12]}, "
            "accepted before)"
        )
        ref = f"{QUARANTINE}branch-deleted-{accepted}"
        if not self.rev(ref):  # logged once, as a refused commit is
            self.git("update-ref", ref, accepted)
            self._log_refusal("(no branch)", reason)
        return f"branch refused: {reason}"

    def quarantined(self):
        """[(time, commit, reason)] of every commit refused here, oldest first."""
        return [(when, commit, why) for when, commit, _, why in quarantine.log_rows(self.git_dir)]

    # -- another site's run, written on demand ------------------------------------------

    def tree_files(self, tree):
        """[(relative path, mode, blob)] of a run's tree (trees only are read: no blob)."""
        out = self.read("ls-tree", "-r", "-z", "--full-tree", tree)
        if out.returncode != 0:
            raise SitebenchError(
                f"the run's tree {tree[:12]} cannot be read here ({_reason(out.stderr.decode())})",
                "pull again; if it persists, the exchange copy is damaged",
            )
        files = []
        for entry in out.stdout.split(b"\0"):
            if entry:
                meta, _, path = entry.partition(b"\t")
                mode, _, blob = meta.decode().split()
                files.append((path.decode("utf-8", errors="surrogateescape"), mode, blob))
        return files

    def materialise(self, site, run, rules):
        """Write another site's accepted run whole into ``<results>/<site>/<run>/``: its
        tree as accepted, the blobs it lacks fetched by the tree's id (git checks every
        object's hash; blobs over ``rules.max_file`` are never sent), sizes checked before a
        byte is written, written aside then renamed, never over a run here. Its path."""
        runs = self.accepted_runs(site).get(site, {})
        if run not in runs:
            sites = self.accepted_sites()
            have = (
                f"{len(runs)} run(s) of {site} are accepted here, newest {max(runs)}"
                if runs
                else f"no run of {site} is accepted here (sites with runs accepted: "
                f"{', '.join(sites) or 'none'})"
            )
            raise SitebenchError(
                f"{site}/{run} was not accepted here: {have}",
                "./sitebench pull first; runs are listed by ./sitebench compare and report",
            )
        tree, _commit = runs[run]
        site_dir = self.results_root / site
        dest = site_dir / run
        if site_dir.is_symlink() or (site_dir.exists() and not site_dir.is_dir()):
            raise SitebenchError(
                f"{site_dir} is not a plain directory: nothing written",
                f"move {site_dir} aside, then show the run again",
            )
        if dest.is_symlink() or dest.exists():
            raise SitebenchError(
                f"{dest} already exists: runs are never written over",
                "read it there, or move it aside to write the accepted run again",
            )
        files = self.tree_files(tree)
        self._judge_total(tree, files, rules, f"{site}/{run}")
        self._fetch_run(tree, rules, f"{site}/{run}")
        self._check_run_sizes(tree, files, rules, f"{site}/{run}")
        self._audit_figures(files, site, run, tree)
        site_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".incoming-show-{run}-", dir=site_dir))
        try:
            self._write_files(tmp, [(rel, mode, blob) for rel, mode, blob in files])
            # mkdtemp makes it 0700: the run gets the mode of any directory made here.
            tmp.chmod(0o777 & ~_umask())
            tmp.rename(dest)
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as err:
            # A tree no file system holds (verification refuses them; this is the last line).
            shutil.rmtree(tmp, ignore_errors=True)
            raise SitebenchError(
                f"{site}/{run} cannot be written as files ({type(err).__name__}: "
                f"{Path(err.filename or '').name}); nothing written",
                "its site published what the exchange refuses: tell its admins",
            ) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return dest

    def _audit_figures(self, files, site, run, tree):
        """Refuse a run whose ``figures.json`` (what every site took of it, and compares
        with) is not what its own ``report.json`` holds (:func:`figures_file.audit`): its
        site signed figures its report does not back. The run is set aside here
        (:mod:`.refused_figures`): its figures leave the store. A run without one: nothing
        to audit."""
        blobs = {rel: blob for rel, _, blob in files}
        if FIGURES_FILE not in blobs:
            return
        why = figures_file.audit_bytes(
            self._blob(blobs.get(figures_file.REPORT_FILE)), self._blob(blobs[FIGURES_FILE])
        )
        if why:
            refused_figures.record(self, site, run, tree, why)
            raise SitebenchError(
                f"{site}/{run}: the figures every site took of it are not what its report "
                f"holds: {why}; nothing written, and the run is set aside here (its figures "
                "are out of compare, regressions and report)",
                f"its site signed a {FIGURES_FILE} its {figures_file.REPORT_FILE} does not "
                "back: do not trust its figures, and tell its admins",
            )

    def _blob(self, blob):
        """A blob's bytes (fetched by :meth:`_fetch_run`), None where there is none."""
        if blob is None:
            return None
        out = self.read("cat-file", "blob", blob)
        return out.stdout if out.returncode == 0 else None

    def _missing(self, tree):
        """The blobs of a tree this copy does not hold (asked without fetching them)."""
        out = self.read("rev-list", "--objects", "--missing=print", tree).stdout.decode()
        return {line[1:].strip() for line in out.splitlines() if line.startswith("?")}

    def _judge_total(self, tree, files, rules, shown):
        """Refuse a run over the per-run cap before a byte of its bulk is fetched: the sizes
        of the blobs held here from this copy, those of the others asked of the remote
        (protocol v2 ``object-info``, :func:`_remote_sizes`), each blob once. A remote that
        cannot say (not a path here) leaves the judgement to after the fetch, where every
        file is under the per-file cap (:meth:`_check_run_sizes`)."""
        blobs = sorted({blob for _, mode, blob in files if mode in verify.REGULAR_MODES})
        missing = self._missing(tree)
        held = [b for b in blobs if b not in missing]
        sizes = {}
        if held:
            out = self.read("cat-file", "--batch-check", stdin=_lines(held)).stdout.decode()
            for line in out.splitlines():
                fields = line.split()
                if len(fields) == 3 and fields[2].isdigit():
                    sizes[fields[0]] = int(fields[2])
        asked = [b for b in blobs if b in missing]
        if asked:
            remote = _remote_sizes(self.setting_of(f"remote.{PROMISOR}.url"), asked)
            if remote is None:
                return
            sizes.update(remote)
        count = {}
        for _, _, blob in files:
            count[blob] = count.get(blob, 0) + 1
        total = sum(sizes.get(blob, 0) * n for blob, n in count.items())
        if total > rules.max_run:
            raise SitebenchError(
                f"{shown} is {total} bytes in {len(files)} files, over the cap of "
                f"{rules.max_run} per run (sizes asked before fetching); nothing fetched, "
                "nothing written",
                "its site published what the exchange refuses: tell its admins",
            )

    def _fetch_run(self, tree, rules, shown):
        """Bring the blobs of a run's tree this copy lacks, in one fetch of the tree with a
        size filter (a blob over the per-file cap never arrives)."""
        if not self._missing(tree):
            return
        proc = self.git(
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
            "-c",
            "fetch.negotiationAlgorithm=noop",
            "fetch",
            "--no-tags",
            "--no-write-fetch-head",
            "--refetch",
            f"--filter=blob:limit={rules.max_file + 1}",
            PROMISOR,
            "--stdin",
            stdin=tree + "\n",
            check=False,
        )
        if proc.returncode != 0:
            raise SitebenchError(
                f"the results remote no longer serves the run {shown} as accepted here (tree "
                f"{tree[:12]}): {_reason(proc.stderr)}; nothing written",
                "the remote's history was changed after this run was accepted: tell its "
                "admins (./sitebench pull names a rewrite); its figures here are unchanged",
            )

    def _check_run_sizes(self, tree, files, rules, shown):
        missing = self._missing(tree)
        for rel, _, blob in files:
            if blob in missing:
                raise SitebenchError(
                    f"{shown}/{rel} was not served (over the cap of {rules.max_file} bytes per "
                    "file, or the remote lost it); nothing written",
                    "its site published what the exchange refuses: tell its admins",
                )
        out = self.read("cat-file", "--batch-check", stdin=_lines(b for _, _, b in files))
        total = 0
        for (rel, mode, blob), line in zip(files, out.stdout.decode().splitlines()):
            fields = line.split()
            if mode not in verify.REGULAR_MODES or len(fields) != 3 or fields[1] != "blob":
                raise SitebenchError(
                    f"{shown}/{rel} is not a regular file ({mode}: {line}); nothing written",
                    "its site published what the exchange refuses: tell its admins",
                )
            total += int(fields[2])
        if total > rules.max_run:
            raise SitebenchError(
                f"{shown} is {total} bytes, over the cap of {rules.max_run} per run; "
                "nothing written",
                "its site published what the exchange refuses: tell its admins",
            )

    def _write_files(self, tmp, files):
        """Each verified blob written as a new regular file (never through a link), all
        read from one ``git cat-file --batch``."""
        proc = self.read("cat-file", "--batch", stdin=_lines(blob for _, _, blob in files))
        if proc.returncode != 0:
            raise SitebenchError(f"git cat-file failed: {proc.stderr.decode()}", "show it again")
        out = proc.stdout
        at = 0
        for rel, _, blob in files:
            header_end = out.index(b"\n", at)
            sha, kind, size = out[at:header_end].decode().split()
            if sha != blob or kind != "blob":
                raise SitebenchError(f"git returned {kind} {sha} for {blob}", "pull again")
            data = out[header_end + 1 : header_end + 1 + int(size)]
            at = header_end + 2 + int(size)
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)

    # -- publishing -----------------------------------------------------------------------

    def tree_runs(self, commit, site, prefix):
        if commit is None:
            return set()
        out = self.git("ls-tree", "--name-only", "-z", commit, "--", f"{prefix}{site}/")
        return {p.rsplit("/", 1)[-1] for p in out.stdout.split("\0") if p}

    def make_commit(self, parent, site, runs, prefix, key, base=None, left_out=()):
        """One commit adding ``runs`` (directories) under ``<prefix><site>/`` on top of
        ``parent`` (the remote's tip, so the push is a fast-forward), signed with ``key``.
        Its tree is the one of ``base``, the last commit accepted here (default: the
        parent), plus these runs: what this site refused after it (``left_out``, named in
        the message's trailers) is never signed. Only the trees on the way to the site's
        directory are made again (``mktree``); the rest of the base's tree is reused as it
        is."""
        base = parent if base is None else base
        index = self.git_dir / f"sitebench-index-{os.getpid()}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            self.git("read-tree", "--empty", env=env)
            entries = []
            for run in runs:
                files = _run_files(run)
                shas = self.git(
                    "hash-object",
                    "-w",
                    "--no-filters",
                    "--stdin-paths",
                    stdin="".join(f"{path}\n" for path, _ in files),
                ).stdout.split()
                for (path, mode), sha in zip(files, shas):
                    entries.append(f"{mode} {sha}\t{path.relative_to(run.parent).as_posix()}\n")
            self.git("update-index", "--add", "--index-info", stdin="".join(entries), env=env)
            added = self.git("write-tree", env=env).stdout.strip()
        finally:
            index.unlink(missing_ok=True)
        where = [*prefix.rstrip("/").split("/"), site] if prefix else [site]
        tree = self._graft(base, where, added)
        tree, aside = self.without_runs(tree, prefix, registry.retracted(self), keep=site)
        left_out = [*left_out, *(c for c in aside if c not in left_out)]
        names = [run.name for run in runs]
        message = (
            f"results: {site}: {len(names)} run{'s' if len(names) != 1 else ''} "
            f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})\n\n"
            + "\n".join(f"{site}/{n}" for n in names)
            + "\n\nPublished by ./sitebench publish.\n"
        )
        if left_out:
            message += "\n" + "".join(f"{verify.LEFT_OUT}: {c}\n" for c in left_out)
        sign = []
        if key:
            sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={key}"]
        args = [*sign, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message]
        if key:
            args.insert(len(sign) + 1, "-S")
        return self.git(*args).stdout.strip()

    def without_runs(self, tree, prefix, retracted, keep=None):
        """(``tree`` less the runs ``retracted`` ({site: {run: (commit, ...)}}) it holds, the
        commits that added them): what a revoked key signed after its time is never signed
        again here, and the commits are named (``Sitebench-Left-Out``) so that the sites
        that took the runs accept the commit leaving them out."""
        paths, commits = [], []
        for site, runs in sorted(retracted.items()):
            if site == keep:
                continue
            for run, (commit, *_) in sorted(runs.items()):
                listed = self.read(
                    "ls-tree", "-r", "-z", "--name-only", tree, "--", f"{prefix}{site}/{run}/"
                )
                found = [
                    p for p in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if p
                ]
                if found:
                    paths += found
                    commits.append(commit)
        if not paths:
            return tree, []
        index = self.git_dir / f"sitebench-index-aside-{os.getpid()}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            self.git("read-tree", tree, env=env)
            removal = "".join(f"0 {verify.ZERO}\t{path}\n" for path in paths)
            self.git("update-index", "--index-info", stdin=removal, env=env)
            tree = self.git("write-tree", "--missing-ok", env=env).stdout.strip()
        finally:
            index.unlink(missing_ok=True)
        return tree, sorted(set(commits))

    def _entries(self, treeish):
        """The raw ``ls-tree -z`` entries of a tree (none when it does not exist)."""
        proc = self.git("ls-tree", "-z", treeish, check=False)
        return [e for e in proc.stdout.split("\0") if e] if proc.returncode == 0 else []

    def _graft(self, parent, parts, added):
        """The tree of ``parent`` with the entries of tree ``added`` merged into the
        directory ``parts`` (the site's), remade bottom-up with ``mktree``."""
        base = f"{parent}:{'/'.join(parts)}" if parent else None
        entries = self._entries(base) if base else []
        entries += self._entries(added)
        sha = self.git(
            "mktree", "-z", "--missing", stdin="".join(e + "\0" for e in entries)
        ).stdout.strip()
        for depth in range(len(parts) - 1, -1, -1):
            where = "/".join(parts[:depth])
            above = self._entries(f"{parent}:{where}" if where else parent) if parent else []
            name = parts[depth]
            above = [e for e in above if e.split("\t", 1)[1] != name]
            above.append(f"040000 tree {sha}\t{name}")
            sha = self.git(
                "mktree", "-z", "--missing", stdin="".join(e + "\0" for e in above)
            ).stdout.strip()
        return sha

    def push(self, commit):
        remote, branch = self.setting("remote"), self.setting("branch", DEFAULT_BRANCH)
        return self.git(
            "push", "--porcelain", remote, f"{commit}:refs/heads/{branch}", check=False
        )


#: How a remote words a push that lost a race with another site's: tried again after a
#: fetch (a plain "[rejected]" non-fast-forward is tried again too).
_RACES = ("cannot lock ref", "failed to update ref", "incorrect old value")


def index_paths(files):
    """What every site takes of a run holding ``files`` (its paths inside the run):
    :data:`INDEX_PATHS`, or :data:`OLDER_INDEX_PATHS` for a run without ``figures.json``."""
    return INDEX_PATHS if FIGURES_FILE in set(files) else OLDER_INDEX_PATHS


def _refused_for_good(text):
    return "[remote rejected]" in text and not any(race in text for race in _RACES)


def _run(args):
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise GitFailed(args[1:], proc.stderr, proc.returncode)
    return proc.stdout


def _run_files(run):
    """[(path, git mode)] of the regular files of one of this site's runs; anything else
    (a symlink, a special file) stops the publish: it would be refused everywhere."""
    found = []
    for dirpath, dirnames, filenames in os.walk(run):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = path.lstat()
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                raise SitebenchError(
                    f"{path} is a symlink or a special file: runs are published with regular "
                    "files only",
                    "replace it with the file it stands for, or remove it, then publish again",
                )
            if path.is_file():
                found.append((path, "100755" if st.st_mode & 0o111 else "100644"))
    return sorted(found)


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- where the exchange points -----------------------------------------------------------


def results_settings(site):
    check_name("site", site)
    if not paths.site_config_dir(site).is_dir():
        raise SitebenchError(
            f"unknown site {site!r}: no {paths.shown(paths.site_config_dir(site))}",
            "name a site under site-configs/ (./sitebench onboard makes one)",
        )
    return site_settings.load(site).get("results") or {}


def _lines(items):
    return "".join(f"{item}\n" for item in items).encode()


def _pkt(text):
    data = text.encode()
    return b"%04x" % (len(data) + 4) + data


def _remote_sizes(remote, blobs):
    """{blob: size} of ``blobs`` as the remote holds them, without fetching one: git's
    protocol v2 ``object-info`` command, asked of the remote's ``upload-pack`` run here
    (a path; told to answer it as ``exchange init-remote`` sets up its repositories). None
    when it cannot be asked (a remote elsewhere: git 2.39's client has no command for it)
    or does not answer."""
    if not remote or not _is_local(remote):
        return None
    path = remote[len("file://") :] if remote.startswith("file://") else remote
    request = _pkt("command=object-info\n") + b"0001" + _pkt("size\n")
    request += b"".join(_pkt(f"oid {blob}\n") for blob in blobs) + b"0000"
    proc = subprocess.run(
        [
            "git",
            "-c",
            "transfer.advertiseObjectInfo=true",
            "upload-pack",
            "--stateless-rpc",
            path,
        ],
        input=request,
        capture_output=True,
        env={**os.environ, "GIT_PROTOCOL": "version=2"},
    )
    if proc.returncode != 0:
        return None
    sizes, out, at = {}, proc.stdout, 0
    while at + 4 <= len(out):
        length = int(out[at : at + 4], 16)
        if length < 4:
            at += 4
            continue
        line = out[at + 4 : at + length].decode(errors="replace").split()
        at += length
        if len(line) == 2 and line[1].isdigit():
            sizes[line[0]] = int(line[1])
    return sizes if set(sizes) >= set(blobs) else None


def _is_local(remote):
    """A path or file:// URL: its upload-pack runs here, told what to serve."""
    return remote.startswith("file://") or (
        "://" not in remote and not remote.startswith("git@") and ":" not in remote.split("/")[0]
    )


def _is_url_or_path(remote):
    return "/" in remote or ":" in remote


def open_exchange(results_root, remote=None, branch=None):
    """The results directory's exchange, made on first use from ``remote`` (a URL or path
    of the results repository). A remote that names a remote of the code's checkout is the
    old layout: refused, with the migration step."""
    ex = Exchange(results_root or paths.results_dir())
    if ex.exists:
        if remote and _is_url_or_path(remote) and remote != ex.setting("remote"):
            ex.git("config", "sitebench.remote", remote)
        if branch:
            ex.git("config", "sitebench.branch", branch)
        return ex
    if not remote:
        raise SitebenchError(
            f"{ex.results_root} is not connected to a results repository",
            "name it once: ./sitebench pull --remote URL (or results.remote in "
            "site-configs/<site>/site.yaml); results/README.md shows how to make one",
        )
    if not _is_url_or_path(remote):
        raise SitebenchError(
            f"results.remote {remote!r} names a git remote of the code's checkout: runs no "
            "longer travel in the code's repository (a push there could change the code "
            "every site runs)",
            "move once to the exchange: ./sitebench exchange migrate --site SITE "
            "(results/README.md)",
        )
    local = (
        Path(remote) if "://" not in remote and not remote.startswith(("git@", "ssh:")) else None
    )
    if local is not None and not local.exists() and ":" not in remote:
        raise SitebenchError(
            f"the results remote {remote} does not exist",
            "name an existing repository (URL or path) in results.remote of site.yaml or "
            "--remote (./sitebench exchange init-remote PATH makes one)",
        )
    ex.create(remote, branch or DEFAULT_BRANCH, prefix="")
    return ex


# -- the two operations ----------------------------------------------------------------


def pull(results_root=None, remote=None, branch=None, expect=None, site=None):
    """Bring every site's verified runs from the results remote; a :class:`Pulled`.
    ``expect``: a commit the remote's branch must hold (:func:`_pin`); ``site``: this results
    directory's own site (its site.yaml's limits apply)."""
    ex = open_exchange(results_root, remote, branch)
    if site:
        ex.git("config", "sitebench.site", check_name("site", site))
    with ex.locked():
        tip = _fetched(ex)
        if expect:
            _pin(ex, tip, expect)
        pulled = ex.accept(tip, _rules(ex))
        if pulled.rewritten and tip is not None:
            pulled.baseline_refused = bool(_refused_elsewhere(ex, tip))
        pulled.set_aside = registry.retry_aside(ex)
        return pulled


def _pull(ex):
    return ex.accept(_fetched(ex), _rules(ex))


def _pin(ex, tip, expect):
    """A site joins the history it was told to expect (``pull --expect COMMIT``, a commit a
    site it knows has accepted: ``exchange accepted`` prints it), not whatever the branch
    holds while someone rewrites it. A baseline taken here before that the expected
    history does not hold (joined during a rewrite) is let go: verified again from the
    root, the expected history is accepted instead (the runs already here stay)."""
    commit = ex.rev(expect) if re.fullmatch(r"[0-9a-fA-F]{7,40}", expect) else None
    holds = (
        tip is not None
        and commit is not None
        and ex.git("merge-base", "--is-ancestor", commit, tip, check=False).returncode == 0
    )
    if not holds:
        raise SitebenchError(
            f"the remote's branch does not hold {expect}, the commit you expect: the remote "
            "is being rewritten, or the commit is not of this results repository; nothing "
            "was taken",
            "ask the site that gave you the commit; pull with --expect again once the "
            "remote's history holds it (its admins run ./sitebench exchange restore)",
        )
    accepted = ex.rev(ACCEPTED)
    if accepted and ex.git("merge-base", "--is-ancestor", accepted, tip, check=False).returncode:
        ex.git("update-ref", "-d", ACCEPTED)
        ex._log_refusal(
            accepted, f"baseline let go: the expected history {commit[:12]} does not hold it"
        )


def _refused_elsewhere(ex, tip):
    """The commits accepted here that another site's restore recorded as a rewrite it
    refused (``refs/sitebench/refused/<commit>`` on the remote), and the remote's branch
    no longer holds."""
    out = ex.git("ls-remote", ex.setting("remote"), f"{REFUSED_ON_REMOTE}*", check=False)
    refused = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    accepted = ex.rev(ACCEPTED)
    if not refused or not accepted:
        return []
    ours = ex.git("rev-list", accepted, "--not", tip, check=False).stdout.split()
    return [c for c in ours if c in refused]


def _rules(ex):
    return trust.rules(prefix=ex.setting("prefix", ""))


def _fetched(ex):
    """The remote branch's tip, fetched; a clear error when the remote cannot be reached."""
    try:
        return ex.fetch()
    except GitFailed as err:
        raise SitebenchError(
            f"could not reach the results remote {ex.setting('remote')}: {err.reason}",
            "check the network and the remote (results.remote, --remote), then try again",
        ) from None


def _own_new_runs(ex, site, accepted, prefix):
    """This site's runs in the results directory that the accepted history lacks (the code's
    committed example runs never: they are examples, not this site's)."""
    published = ex.tree_runs(accepted, site, prefix)
    examples = _code_tracked_runs(ex.results_root, site)
    runs = []
    for run in run_dirs(site, ex.results_root):
        if run.is_symlink() or run.name in published or run.name in examples:
            continue
        if not verify.RUN_NAME.fullmatch(run.name):
            continue
        runs.append(run)
    return runs


def _code_tracked_runs(results_root, site):
    proc = subprocess.run(
        ["git", "-C", str(results_root), "ls-files", "--", f"{site}/"],
        capture_output=True,
        text=True,
    )
    return {p.split("/")[1] for p in proc.stdout.splitlines() if p.count("/") >= 2}


def publish(site_name, results_root=None, remote=None, branch=None, retries=5):
    """Send ``site_name``'s new runs to the results remote, signed; see the module's doc."""
    settings = results_settings(site_name)
    ex = open_exchange(
        results_root, remote or settings.get("remote"), branch or settings.get("branch")
    )
    key, _, _ = trust.ensure_site_key(site_name)
    ex.git("config", "sitebench.site", site_name)
    refusals = []
    with ex.locked():
        result = _publish(ex, site_name, key, retries, refusals)
    result.refusals = refusals
    return result


def _publish(ex, site, key, retries, refusals):
    prefix = ex.setting("prefix", "")
    refused, reason = [], ""
    for attempt in range(retries + 1):
        try:
            tip = ex.fetch()
        except GitFailed as err:
            return Published(False, [], err.reason, None, refused)
        pulled = ex.accept(tip, _rules(ex))
        refused += [line for line in pulled.refused if line not in refused]
        refusals += [r for r in pulled.refusals if r not in refusals]
        if pulled.rewritten:
            # Publishing on top would bless the rewritten history: the admin looks first.
            return Published(False, [], pulled.refused[0], None, refused, rewritten=True)
        accepted = ex.rev(ACCEPTED)
        runs = _own_new_runs(ex, site, accepted, prefix)
        if not runs:
            return Published(True, [], "", tip, refused)
        commit = ex.make_commit(tip, site, runs, prefix, key, accepted, pulled.left_out)
        proc = ex.push(commit)
        if proc.returncode == 0:
            # Everything up to the tip was judged; this commit adds only this site's runs
            # to the accepted tree.
            ex.git("update-ref", ACCEPTED, commit)
            return Published(True, [run.name for run in runs], "", commit, refused)
        reason = _reason(proc.stderr + proc.stdout)
        if _refused_for_good(proc.stdout + proc.stderr):
            # The remote's own refusal (a hook, a denied update): trying again cannot help.
            return Published(False, [], reason, None, refused)
        time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
    return Published(False, [], f"{reason} (gave up after {retries + 1} tries)", None, refused)


@dataclass
class Restored:
    """What :func:`restore` did: ``pushed`` the accepted history back (False: nothing to do),
    ``accepted`` the commit now at the remote's branch, ``dropped`` the rewritten tip it
    replaced (kept here under ``refs/sitebench/quarantine/``)."""

    pushed: bool
    accepted: str
    dropped: str = None


def restore(results_root=None):
    """After a history rewrite on an unprotected remote (every pull and publish refuse it):
    put the history this site verified back on the remote's branch, on top of nothing but
    what was accepted here. The rewrite is verified and quarantined as a pull does it; runs
    pushed on top of it come back with their sites' next publish (their own copies are
    untouched). ``--force-with-lease`` against the tip just verified: a push that lands in
    between is never overwritten unseen."""
    ex = open_exchange(results_root)
    with ex.locked():
        tip = _fetched(ex)
        accepted = ex.rev(ACCEPTED)
        if accepted is None:
            raise SitebenchError(
                "nothing was ever accepted here, so there is no history to restore",
                "restore from a site that pulled before the rewrite",
            )
        if tip is not None and not ex.accept(tip, _rules(ex)).rewritten:
            # A pull, then: the remote holds everything accepted here.
            return Restored(False, ex.rev(ACCEPTED))
        refused = _refused_elsewhere(ex, tip) if tip else []
        if refused:
            raise SitebenchError(
                f"the history accepted here ({refused[0][:12]}) was refused as a rewrite by "
                "another site's restore: this site joined or pulled while the branch was "
                "rewritten, and restoring would push that rewrite back; nothing was pushed",
                "join the history the other sites hold: ./sitebench pull --expect COMMIT "
                "(a site you know prints its commit with ./sitebench exchange accepted)",
            )
        remote, branch = ex.setting("remote"), ex.setting("branch", DEFAULT_BRANCH)
        lease = f"--force-with-lease=refs/heads/{branch}:{tip or ''}"
        # The rewritten tip is recorded on the remote as refused, for the sites that took it
        # meanwhile (their restore would push it back: see above).
        record = [f"{tip}:{REFUSED_ON_REMOTE}{tip}"] if tip else []
        proc = ex.git(
            "push",
            "--porcelain",
            lease,
            remote,
            f"{accepted}:refs/heads/{branch}",
            *record,
            check=False,
        )
        if proc.returncode != 0:
            raise SitebenchError(
                f"the remote refused the restore: {_reason(proc.stderr + proc.stdout)}",
                "a protected remote (exchange init-remote) refuses every rewrite, this one "
                "too: its host restores the branch there (git update-ref); otherwise pull "
                "and try again if another site pushed meanwhile",
            )
        return Restored(True, accepted, tip)


# -- moving from the old layout ----------------------------------------------------------

# -- moving from the old layout ----------------------------------------------------------


def migrate(site, results_root=None):
    """Connect the results directory to its exchange from the old layout, once: runs shared
    through the code checkout's remote (``results.remote: origin``; prefix ``results/``), or
    a results directory that is itself a clone (prefix ""). What this checkout already has
    (its HEAD) is the accepted baseline: only later commits are verified. Returns the
    exchange; the code's repository is only read."""
    settings = results_settings(site)
    root = Path(results_root or paths.results_dir()).resolve()
    ex = Exchange(root)
    if ex.exists:
        raise SitebenchError(
            f"{root} is already connected to {ex.setting('remote')} ({root / EXCHANGE_DIR})",
            "nothing to migrate: ./sitebench pull and publish use it",
        )
    top = _git_top(root)
    if top is None:
        raise SitebenchError(
            f"{root} is in no git repository: there is nothing to migrate",
            "connect it to a results repository: ./sitebench pull --remote URL",
        )
    name = settings.get("remote") or "origin"
    url = _remote_url(top, name)
    prefix = "" if top == root else root.relative_to(top).as_posix() + "/"
    branch = settings.get("branch") or _current_branch(top) or DEFAULT_BRANCH
    ex.create(url, branch, prefix)
    ex.git("fetch", "--quiet", "--no-tags", str(top), "+HEAD:refs/sitebench/migrated-from")
    tip = ex.fetch()
    here = ex.rev("refs/sitebench/migrated-from")
    base = ex.git("merge-base", here, tip, check=False).stdout.strip() if tip else ""
    if base:
        ex.git("update-ref", ACCEPTED, base)
    return ex


def _git_top(root):
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else None


def _remote_url(top, name):
    if _is_url_or_path(name):
        return name
    proc = subprocess.run(
        ["git", "-C", str(top), "remote", "get-url", name], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SitebenchError(
            f"the repository {top} has no remote {name!r} to migrate from",
            "name the shared results repository: ./sitebench pull --remote URL",
        )
    return proc.stdout.strip()


def _current_branch(top):
    proc = subprocess.run(
        ["git", "-C", str(top), "symbolic-ref", "--short", "-q", "HEAD"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() or None


# -- another site's run on demand ----------------------------------------------------------


def accepted_sites(results_root=None):
    """The sites with a run accepted from the exchange (none without one)."""
    ex = Exchange(results_root or paths.results_dir())
    return ex.accepted_sites() if ex.exists else []


def accepted_run_names(site, results_root=None):
    """The names of ``site``'s runs accepted from the exchange (none without one)."""
    ex = Exchange(results_root or paths.results_dir())
    return set(ex.accepted_runs(site).get(site, {})) if ex.exists else set()


def show(site, run, results_root=None):
    """Write another site's accepted run whole into ``results/<site>/<run>/`` from the
    exchange (:meth:`Exchange.materialise`); its path."""
    check_name("site", site)
    if not verify.RUN_NAME.fullmatch(run):
        raise SitebenchError(
            f"{run!r} is not a run name (<UTC time>-<random>, e.g. 20261122T111440Z-ebb65a)",
            "name a run as compare and report show it: SITE/RUN",
        )
    ex = Exchange(results_root or paths.results_dir())
    if not ex.exists:
        raise SitebenchError(
            f"{ex.results_root} is not connected to a results repository: no run of another "
            "site is accepted here",
            "./sitebench pull --remote URL first (results/README.md)",
        )
    with ex.locked():
        return ex.materialise(site, run, _rules(ex))
