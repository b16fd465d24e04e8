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
import hashlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.results import limits, quarantine, trust, verify
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
QUARANTINE = "refs/sitebench/quarantine/"
QUARANTINE_LOG = "sitebench-quarantine.tsv"
LOCK_NAME = "sitebench-exchange.lock"
LOCK_TIMEOUT_S = 600
DEFAULT_BRANCH = "main"
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


@dataclass
class Pulled:
    """What one :func:`pull` brought: ``new`` [(site, [runs])], ``refused`` one line per
    refused commit (kept under ``refs/sitebench/quarantine/``), ``kept`` runs that arrived
    different from the copy already here (the copy here is kept)."""

    new: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    kept: list = field(default_factory=list)
    rewritten: bool = False
    #: [(site, commit, reason)] of the refused commits (``refused``'s lines, by site).
    refusals: list = field(default_factory=list)


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
        """Fetch the remote branch into FETCHED; its commit, or None when it has no branch."""
        remote, branch = self.setting("remote"), self.setting("branch", DEFAULT_BRANCH)
        proc = self.git("ls-remote", "--heads", remote, f"refs/heads/{branch}", check=False)
        if proc.returncode != 0:
            raise GitFailed(("ls-remote",), proc.stderr, proc.returncode)
        if not proc.stdout.strip():
            return None
        self.git("fetch", "--quiet", "--no-tags", remote, f"+refs/heads/{branch}:{FETCHED}")
        return self.rev(FETCHED)

    def accept(self, tip, rules):
        """Verify ``accepted..tip``, export the accepted commits' runs; a :class:`Pulled`."""
        pulled = Pulled()
        accepted = self.rev(ACCEPTED)
        if tip is None and accepted is not None:
            # The branch is gone: what was accepted is no longer there, as in any rewrite
            # (publishing would start a history without it; restore puts it back).
            pulled.rewritten = True
            pulled.refused.append(self._note_deleted_branch(accepted))
            return pulled
        if tip is None or tip == accepted:
            return pulled
        verdicts = verify.check_range(verify.Git(self.git_dir), accepted, tip, rules)
        # What one site may add (results.limits), then every refusal quarantined at once.
        settings = limits.configured(self.git_dir, self.setting("site"))
        verdicts, usage = limits.screen(self.git_dir, verdicts, rules.prefix, settings)
        pulled.refusals = quarantine.keep(
            self.git_dir,
            [v for v in verdicts if not v.ok],
            rules.prefix,
            settings.get("quarantine_refs", quarantine.DEFAULT_REFS),
        )
        pulled.refused += [f"commit {c[:12]} refused: {r}" for _, c, r in pulled.refusals]
        found = {}
        for verdict in verdicts:
            if not verdict.ok:
                continue
            for site, run in verdict.runs:
                status = self._export(verdict.commit, site, run, rules.prefix)
                if status == "new":
                    found.setdefault(site, []).append(run)
                elif status != "same":
                    pulled.kept.append(f"{site}/{run}: {status}")
        pulled.rewritten = len(verdicts) == 1 and verdicts[0].reason.startswith(verify.REWRITE)
        if not pulled.rewritten:
            self.git("update-ref", ACCEPTED, tip)
            usage.save()
        pulled.new = [(site, sorted(runs)) for site, runs in sorted(found.items())]
        return pulled

    def _log_refusal(self, what, reason):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(self.git_dir / QUARANTINE_LOG, "a", encoding="utf-8") as log:
            log.write(f"{stamp}\t{what}\t-\t{reason}\n")

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

    # -- exporting runs into the results directory ------------------------------------

    def _files(self, commit, site, run, prefix):
        """[(relative path, mode, blob)] of a run in a commit's tree."""
        out = self.git(
            "ls-tree", "-r", "-z", "--full-tree", commit, "--", f"{prefix}{site}/{run}/"
        )
        files = []
        for entry in out.stdout.split("\0"):
            if not entry:
                continue
            meta, _, path = entry.partition("\t")
            mode, _, blob = meta.split()
            files.append((path[len(f"{prefix}{site}/{run}/") :], mode, blob))
        return files

    def _export(self, commit, site, run, prefix):
        """Write a verified run into the results directory: "new", "same" (already here,
        identical) or why the copy here was kept."""
        site_dir = self.results_root / site
        if site_dir.is_symlink() or (site_dir.exists() and not site_dir.is_dir()):
            return f"{site_dir} is not a plain directory; nothing written"
        dest = site_dir / run
        files = self._files(commit, site, run, prefix)
        if dest.is_symlink() or dest.exists():
            return "same" if _same_files(dest, files) else "differs from the copy here, kept"
        site_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".incoming-pull-{run}-", dir=site_dir))
        try:
            self._write_files(tmp, files)
        except BaseException:
            # A full disk or a kill: no half run is left; the next pull writes it again.
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            tmp.rename(dest)
        except OSError:
            # Written meanwhile by another writer: never replaced.
            shutil.rmtree(tmp, ignore_errors=True)
            return "appeared here meanwhile, kept"
        return "new"

    def _write_files(self, tmp, files):
        """Each verified blob written as a new regular file (never through a link), all
        read from one ``git cat-file --batch``."""
        stdin = "".join(f"{blob}\n" for _, _, blob in files).encode()
        out = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), "cat-file", "--batch"],
            input=stdin,
            capture_output=True,
            check=True,
        ).stdout
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

    def make_commit(self, parent, site, runs, prefix, key):
        """One commit adding ``runs`` (directories) under ``<prefix><site>/`` on top of
        ``parent``, signed with ``key``. Only the trees on the way to the site's directory
        are made again (``mktree``); the rest of the parent's tree is reused as it is, so an
        entry git would refuse in an index or a checkout (another site's) stops nothing."""
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
        tree = self._graft(parent, where, added)
        names = [run.name for run in runs]
        message = (
            f"results: {site}: {len(names)} run{'s' if len(names) != 1 else ''} "
            f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})\n\n"
            + "\n".join(f"{site}/{n}" for n in names)
            + "\n\nPublished by ./sitebench publish.\n"
        )
        sign = []
        if key:
            sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={key}"]
        args = [*sign, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message]
        if key:
            args.insert(len(sign) + 1, "-S")
        return self.git(*args).stdout.strip()

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
        sha = self.git("mktree", "-z", stdin="".join(e + "\0" for e in entries)).stdout.strip()
        for depth in range(len(parts) - 1, -1, -1):
            where = "/".join(parts[:depth])
            above = self._entries(f"{parent}:{where}" if where else parent) if parent else []
            name = parts[depth]
            above = [e for e in above if e.split("\t", 1)[1] != name]
            above.append(f"040000 tree {sha}\t{name}")
            sha = self.git("mktree", "-z", stdin="".join(e + "\0" for e in above)).stdout.strip()
        return sha

    def push(self, commit):
        remote, branch = self.setting("remote"), self.setting("branch", DEFAULT_BRANCH)
        return self.git(
            "push", "--porcelain", remote, f"{commit}:refs/heads/{branch}", check=False
        )


#: How a remote words a push that lost a race with another site's: tried again after a
#: fetch (a plain "[rejected]" non-fast-forward is tried again too).
_RACES = ("cannot lock ref", "failed to update ref", "incorrect old value")


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


def _same_files(dest, files):
    """Whether the run at ``dest`` holds exactly these blobs (git's hash of each file)."""
    if dest.is_symlink() or not dest.is_dir():
        return False
    here = {}
    for path in dest.rglob("*"):
        if path.is_symlink():
            return False
        if path.is_file():
            here[path.relative_to(dest).as_posix()] = path
    if set(here) != {rel for rel, _, _ in files}:
        return False
    for rel, _, blob in files:
        data = here[rel].read_bytes()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != blob:
            return False
    return True


# -- where the exchange points -----------------------------------------------------------


def results_settings(site):
    check_name("site", site)
    if not paths.site_config_dir(site).is_dir():
        raise SitebenchError(
            f"unknown site {site!r}: no {paths.shown(paths.site_config_dir(site))}",
            "name a site under site-configs/ (./sitebench onboard makes one)",
        )
    return site_settings.load(site).get("results") or {}


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


def pull(results_root=None, remote=None, branch=None, site=None):
    """Bring every site's verified runs from the results remote; a :class:`Pulled`.
    ``site``: this results directory's own site (its site.yaml's limits apply)."""
    ex = open_exchange(results_root, remote, branch)
    if site:
        ex.git("config", "sitebench.site", check_name("site", site))
    with ex.locked():
        return _pull(ex)


def _pull(ex):
    return ex.accept(_fetched(ex), _rules(ex))


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


def _own_new_runs(ex, site, tip, prefix):
    """This site's runs in the results directory that the remote's branch lacks (the code's
    committed example runs never: they are examples, not this site's)."""
    published = ex.tree_runs(tip, site, prefix)
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
    with ex.locked():
        return _publish(ex, site_name, key, retries)


def _publish(ex, site, key, retries):
    prefix = ex.setting("prefix", "")
    refused, reason = [], ""
    for attempt in range(retries + 1):
        try:
            tip = ex.fetch()
        except GitFailed as err:
            return Published(False, [], err.reason, None, refused)
        pulled = ex.accept(tip, _rules(ex))
        refused += [line for line in pulled.refused if line not in refused]
        if pulled.rewritten:
            # Publishing on top would bless the rewritten history: the admin looks first.
            return Published(False, [], pulled.refused[0], None, refused, rewritten=True)
        runs = _own_new_runs(ex, site, tip, prefix)
        if not runs:
            return Published(True, [], "", tip, refused)
        commit = ex.make_commit(tip, site, runs, prefix, key)
        proc = ex.push(commit)
        if proc.returncode == 0:
            if tip is None or ex.rev(ACCEPTED) == tip:
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
        remote, branch = ex.setting("remote"), ex.setting("branch", DEFAULT_BRANCH)
        lease = f"--force-with-lease=refs/heads/{branch}:{tip or ''}"
        proc = ex.git(
            "push", "--porcelain", lease, remote, f"{accepted}:refs/heads/{branch}", check=False
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
