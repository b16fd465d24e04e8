"""Runs travel between sites through git: :func:`publish` sends a site's new runs to the
results repository, :func:`pull` brings every site's runs.

The results repository is the git repository that holds the results directory
(``results/``, or ``$SITEBENCH_RESULTS_DIR``):

* this checkout, whose remote (``results.remote: origin``, the default) is shared by the
  sites: runs live at ``results/<site>/<run>/`` beside the code;
* or a separate repository: the results directory is itself a clone of it (``git clone URL
  /srv/sitebench-results`` with ``SITEBENCH_RESULTS_DIR=/srv/sitebench-results``, or just
  ``./sitebench pull``, which clones it into an empty or missing results directory); runs
  live at ``<site>/<run>/`` at its top. ``results.remote`` is then the URL or path.

Publishing commits only the site's new run directories (``git add -f -- <run dirs>``, then
``git commit --only -- <run dirs>``: a user's staged code changes stay staged and
uncommitted; a ``.incoming-*`` run is never a run), then fetches the branch, replays the
local run commits on it (rebase; runs are new directories, so this never conflicts) and
pushes, again up to ``retries`` times when another site pushed in between. A push never
carries anything but this site's runs: local commits that change any other path stop it
(:class:`SitebenchError`, naming the commit and the file). A remote that cannot be reached
leaves the runs committed locally; the next publish pushes them. One publish or pull at a
time per clone: an ``flock`` on ``<git dir>/sitebench-exchange.lock``, released by the
kernel when the process dies.
"""

import fcntl
import os
import random
import re
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.results.rundirs import run_dirs
from sitebench.sites import site_settings

DEFAULT_REMOTE = "origin"
LOCK_NAME = "sitebench-exchange.lock"
LOCK_TIMEOUT_S = 600
#: Where the fetched branch is kept when the remote is a URL or path, not a named remote.
URL_TRACKING = "refs/sitebench/results/"
_RUN_NAME = re.compile(r"\d{8}T\d{6}Z-[0-9a-zA-Z._-]+")


@dataclass
class Published:
    """What one :func:`publish` did: ``runs`` committed or pushed this time; ``reason`` is
    git's reason (one line) when ``published`` is false; ``commit`` the local HEAD."""

    published: bool
    runs: list = field(default_factory=list)
    reason: str = ""
    commit: str = None


class GitFailed(Exception):
    """A git command failed; ``reason`` is the line of its stderr that says why."""

    def __init__(self, args, proc):
        self.args_ = args
        self.stderr = proc.stderr or ""
        self.reason = _reason(self.stderr) or f"git {args[0]} exited with {proc.returncode}"
        super().__init__(self.reason)


def _reason(stderr):
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(("fatal:", "error:")) or "rejected" in ln:
            return ln
    return lines[-1] if lines else ""


class Repo:
    """The git repository holding a results directory, and where runs sit in it."""

    def __init__(self, results_root):
        self.results_root = Path(results_root).resolve()
        if not self.results_root.is_dir():
            raise SitebenchError(
                f"the results directory {self.results_root} does not exist",
                "run ./sitebench pull --remote URL to clone the results repository into it",
            )
        proc = subprocess.run(
            ["git", "-C", str(self.results_root), "rev-parse", "--show-toplevel", "--git-dir"],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise SitebenchError(
                f"{self.results_root} is not in a git repository ({_reason(proc.stderr)})",
                "publish and pull need the results in git: clone the results repository "
                "there (git clone URL DIR; SITEBENCH_RESULTS_DIR=DIR), see results/README.md",
            )
        top, git_dir = proc.stdout.splitlines()[:2]
        self.top = Path(top).resolve()
        self.git_dir = (self.results_root / git_dir).resolve()
        rel = self.results_root.relative_to(self.top)
        #: The results directory inside the repository, "" or "results/".
        self.prefix = "" if str(rel) == "." else rel.as_posix() + "/"
        self.identity = self._identity()

    def _identity(self):
        """``-c user.name=... -c user.email=...`` where git has no identity configured."""
        extra = []
        for key, default in (
            ("user.name", "sitebench"),
            ("user.email", f"sitebench@{socket.gethostname()}"),
        ):
            got = subprocess.run(
                ["git", "-C", str(self.top), "config", key], capture_output=True, text=True
            )
            if not got.stdout.strip():
                extra += ["-c", f"{key}={default}"]
        return extra

    def git(self, *args, check=True, env=None):
        cmd = [
            "git",
            "--no-optional-locks",
            "-c",
            "advice.detachedHead=false",
            *self.identity,
            "-C",
            str(self.top),
        ]
        proc = subprocess.run(
            [*cmd, *args],
            capture_output=True,
            text=True,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})},
        )
        if check and proc.returncode != 0:
            raise GitFailed(args, proc)
        return proc

    def out(self, *args):
        return self.git(*args).stdout

    @contextmanager
    def locked(self, timeout=LOCK_TIMEOUT_S):
        """One publish or pull at a time in this clone (the kernel drops it on death)."""
        with open(self.git_dir / LOCK_NAME, "a+") as handle:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise SitebenchError(
                            f"another publish or pull has held {handle.name} for " f"{timeout} s",
                            "wait for it to finish, or find it with: fuser " + handle.name,
                        ) from None
                    time.sleep(0.1)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def site_path(self, site):
        return f"{self.prefix}{site}/"

    # -- the remote --------------------------------------------------------------------

    def resolve_remote(self, remote):
        """(what git is given, the local ref the fetched branch goes to: prefix)."""
        remote = remote or DEFAULT_REMOTE
        names = self.out("remote").split()
        if remote in names:
            return remote, f"refs/remotes/{remote}/"
        if "/" in remote or ":" in remote:
            if "://" not in remote and ":" not in remote and not Path(remote).exists():
                raise SitebenchError(
                    f"the results remote {remote} does not exist",
                    "name an existing repository (URL or path) in results.remote of "
                    "site.yaml, or a remote of the results repository (git remote -v)",
                )
            local = Path(remote) if "://" not in remote and ":" not in remote else None
            if local is not None and not ((local / "HEAD").is_file() or (local / ".git").exists()):
                raise SitebenchError(
                    f"the results remote {remote} is not a git repository",
                    "name a git repository (e.g. one made with git init --bare) in "
                    "results.remote of site.yaml",
                )
            return remote, URL_TRACKING
        raise SitebenchError(
            f"the results repository {self.top} has no remote {remote!r}"
            + (f" (it has: {', '.join(names)})" if names else " (it has none)"),
            f"add it (git -C {self.top} remote add {remote} URL) or name a URL, a path or "
            "another remote in results.remote of site-configs/<site>/site.yaml",
        )

    def resolve_branch(self, remote, branch):
        if branch:
            return branch
        proc = self.git("ls-remote", "--symref", remote, "HEAD", check=False)
        if proc.returncode != 0:
            raise GitFailed(("ls-remote",), proc)
        found = re.search(r"^ref: refs/heads/(\S+)\s+HEAD$", proc.stdout, re.M)
        if found:
            return found.group(1)
        current = self.git("symbolic-ref", "--short", "-q", "HEAD", check=False).stdout.strip()
        if current:
            return current
        raise SitebenchError(
            f"cannot tell which branch of {remote} holds the results",
            "name it: results.branch in site.yaml or --branch",
        )

    def fetch(self, remote, tracking, branch):
        """Fetch ``branch`` into the tracking ref; return its commit."""
        ref = tracking + branch
        try:
            self.git("fetch", "--no-tags", "--quiet", remote, f"+refs/heads/{branch}:{ref}")
        except GitFailed as err:
            if "couldn't find remote ref" in err.stderr:
                raise SitebenchError(
                    f"the results remote {remote} has no branch {branch!r}",
                    f"create it once: git -C {self.top} push {remote} HEAD:refs/heads/{branch} "
                    "(or name another: results.branch in site.yaml, --branch)",
                ) from None
            raise
        return self.out("rev-parse", ref).strip()

    # -- history -------------------------------------------------------------------------

    def head(self):
        proc = self.git("rev-parse", "-q", "--verify", "HEAD", check=False)
        return proc.stdout.strip() or None

    def is_ancestor(self, a, b):
        return self.git("merge-base", "--is-ancestor", a, b, check=False).returncode == 0

    def local_commits(self, upstream):
        """[(commit, [paths])] of the commits of HEAD not in ``upstream``."""
        text = self.out(
            "log", "--no-renames", "--format=%x00%H", "--name-only", f"{upstream}..HEAD"
        )
        commits = []
        for chunk in text.split("\0")[1:]:
            lines = [ln for ln in chunk.splitlines() if ln.strip()]
            commits.append((lines[0], lines[1:]))
        return commits

    def is_run_file(self, path, site=None):
        """Whether ``path`` (from the top) is in a run of ``site`` (None: of any site)."""
        if not path.startswith(self.prefix):
            return False
        parts = path[len(self.prefix) :].split("/")
        if len(parts) < 3 or parts[1].startswith(".") or parts[0].startswith("."):
            return False
        return site is None or parts[0] == site

    def only_site_commits(self, upstream, site, remote, branch):
        """Refuse when a local commit not on the remote changes anything but the site's runs
        (code, configs, another site: pushing would publish it, rebasing would move it);
        ``site`` None: any site's runs."""
        for commit, files in self.local_commits(upstream):
            other = [f for f in files if not self.is_run_file(f, site)]
            if other or not files:
                what = other[0] if other else "(no file: a merge or an empty commit)"
                raise SitebenchError(
                    f"the history of {self.top} has diverged from {remote} {branch}: local "
                    f"commit {commit[:12]} changes {what}, which is not a run of "
                    + (site or "any site"),
                    "publish pushes only this site's new runs: push that commit yourself, "
                    f"or move it off {branch} (git branch; git reset), then publish again",
                )

    def rebase_onto(self, upstream):
        """Replay the local run commits on ``upstream``; a dirty work tree (the user's code
        changes) is stashed and given back with its index as it was."""
        dirty = self.out("status", "--porcelain", "--untracked-files=no").strip()
        if dirty:
            self.git("stash", "push", "--quiet", "-m", "sitebench: around a results rebase")
        try:
            proc = self.git("rebase", "--quiet", upstream, check=False)
            if proc.returncode != 0:
                self.git("rebase", "--abort", check=False)
                raise SitebenchError(
                    f"the history of {self.top} cannot be rebased on the results remote "
                    f"({_reason(proc.stderr + proc.stdout)})",
                    "the remote's history diverged from this clone's: look with git log "
                    f"--graph HEAD {upstream}, fix by hand, then publish again",
                )
        finally:
            if dirty:
                pop = self.git("stash", "pop", "--index", "--quiet", check=False)
                if pop.returncode != 0:
                    raise SitebenchError(
                        f"your uncommitted changes in {self.top} could not be given back "
                        f"after the rebase ({_reason(pop.stderr)}); they are kept in git stash",
                        f"git -C {self.top} stash list; git stash pop --index",
                    )

    def runs_between(self, old, new):
        """{site: [run names]} added between commits ``old`` (None: nothing) and ``new``."""
        if old == new:
            return {}
        args = ["diff", "--no-renames", "--name-only", "--diff-filter=A"]
        if old is None:
            args = ["ls-tree", "-r", "--name-only"]
            text = self.out(*args, new, *([self.prefix] if self.prefix else []))
        else:
            text = self.out(*args, old, new, "--", self.prefix or ".")
        found = {}
        for line in text.splitlines():
            parts = line[len(self.prefix) :].split("/")
            if len(parts) >= 3 and not parts[1].startswith("."):
                found.setdefault(parts[0], set()).add(parts[1])
        return {site: sorted(runs) for site, runs in sorted(found.items())}


def results_settings(site):
    check_name("site", site)
    if not paths.site_config_dir(site).is_dir():
        raise SitebenchError(
            f"unknown site {site!r}: no {paths.shown(paths.site_config_dir(site))}",
            "name a site under site-configs/ (./sitebench onboard makes one)",
        )
    return site_settings.load(site).get("results") or {}


def _check_committed_runs_untouched(repo):
    """Refuse when a committed run (any site) was changed or removed locally: runs are never
    modified, and a publish must not carry, nor hide, such a change."""
    text = repo.out(
        "status", "--porcelain", "-z", "--untracked-files=no", "--", repo.prefix or "."
    )
    for entry in text.split("\0"):
        if len(entry) < 4:
            continue
        path = entry[3:]
        parts = path[len(repo.prefix) :].split("/")
        if len(parts) >= 3:
            raise SitebenchError(
                f"the committed run {parts[0]}/{parts[1]} was modified in this clone: {path} "
                f"({'deleted' if 'D' in entry[:2] else 'changed'}); runs are never modified",
                f"restore it (git -C {repo.top} checkout HEAD -- {path}; git restore --staged) "
                "and publish again",
            )


def _new_runs(repo, site):
    """This site's run directories not yet in git (hidden ``.incoming-*`` never)."""
    tracked = repo.out("ls-files", "-z", "--", repo.site_path(site)).split("\0")
    known = {p[len(repo.site_path(site)) :].split("/", 1)[0] for p in tracked if p}
    return [p for p in run_dirs(site, repo.results_root) if p.name not in known]


def _commit_runs(repo, site, runs):
    rels = [repo.site_path(site) + run.name for run in runs]
    names = [run.name for run in runs]
    message = (
        f"results: {site}: {len(names)} run{'s' if len(names) != 1 else ''} "
        f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})\n\n"
        + "\n".join(f"{site}/{n}" for n in names)
        + "\n\nPublished by ./sitebench publish.\n"
    )
    repo.git("add", "-f", "--", *rels)
    repo.git("commit", "--quiet", "--no-verify", "-m", message, "--only", "--", *rels)


def publish(site_name, results_root=None, remote=None, branch=None, retries=5):
    """Commit ``site_name``'s new runs and push them; see the module's doc."""
    try:
        return _publish(site_name, results_root, remote, branch, retries)
    except GitFailed as err:
        raise _failed(err, results_root) from None


def _failed(err, results_root):
    return SitebenchError(
        f"git {err.args_[0]} failed in the results repository of "
        f"{results_root or paths.results_dir()}: {err.reason}",
        "repair what git names (a full disk, permissions), then run it again: runs are "
        "never lost, those not pushed are pushed by the next publish",
    )


def _publish(site_name, results_root, remote, branch, retries):
    settings = results_settings(site_name)
    repo = Repo(results_root or paths.results_dir())
    remote_given = remote or settings.get("remote") or DEFAULT_REMOTE
    with repo.locked():
        target, tracking = repo.resolve_remote(remote_given)
        _check_committed_runs_untouched(repo)
        new = _new_runs(repo, site_name)
        committed = [run.name for run in new]
        if new:
            try:
                _commit_runs(repo, site_name, new)
            except GitFailed as err:
                repo.git("reset", "--quiet", "--", *[repo.site_path(site_name)], check=False)
                raise SitebenchError(
                    f"could not commit the runs of {site_name} ({err.reason}); nothing was "
                    "committed, the runs are untouched",
                    f"make room on (or repair) the file system of {repo.git_dir} and publish "
                    "again",
                ) from None
        try:
            branch = branch or settings.get("branch") or repo.resolve_branch(target, None)
        except GitFailed as err:
            return Published(False, committed, err.reason, repo.head())
        pushed = set()
        reason = ""
        for attempt in range(retries + 1):
            try:
                upstream = repo.fetch(target, tracking, branch)
            except GitFailed as err:
                return Published(False, committed, err.reason, repo.head())
            repo.only_site_commits(upstream, site_name, target, branch)
            if not repo.is_ancestor(upstream, "HEAD"):
                repo.rebase_onto(upstream)
            outgoing = repo.runs_between(upstream, repo.head()).get(site_name, [])
            if not outgoing:
                return Published(True, committed, "", repo.head())
            try:
                repo.git("push", "--quiet", target, f"HEAD:refs/heads/{branch}")
            except GitFailed as err:
                reason = err.reason
                time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
                continue
            pushed.update(outgoing)
            repo.git("update-ref", tracking + branch, "HEAD", check=False)
            return Published(True, sorted(pushed | set(committed)), "", repo.head())
        return Published(
            False, committed, f"{reason} (gave up after {retries + 1} tries)", repo.head()
        )


def _clone(remote, branch, root):
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        return False
    args = ["git", "clone", "--quiet", "--no-tags"]
    if branch:
        args += ["--branch", branch]
    proc = subprocess.run(
        [*args, remote, str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    if proc.returncode != 0:
        raise SitebenchError(
            f"could not clone the results repository {remote} into {root} "
            f"({_reason(proc.stderr)})",
            "check the URL or path (results.remote in site.yaml, --remote) and the network",
        )
    return True


def pull(results_root=None, remote=None, branch=None):
    """Bring every site's runs from the results remote; return [(site, [new run names])].

    An empty or missing results directory with a URL or path as ``remote`` becomes a clone
    of it. Local run commits not yet pushed are replayed on top (as :func:`publish` does)."""
    try:
        return _pull(results_root, remote, branch)
    except GitFailed as err:
        raise _failed(err, results_root) from None


def _pull(results_root, remote, branch):
    root = Path(results_root or paths.results_dir())
    if remote and ("/" in remote or ":" in remote) and not (root / ".git").exists():
        if not root.exists() or not any(root.iterdir()):
            _clone(remote, branch, root)
            repo = Repo(root)
            return list(repo.runs_between(None, repo.head()).items())
    repo = Repo(root)
    with repo.locked():
        target, tracking = repo.resolve_remote(remote)
        try:
            branch = repo.resolve_branch(target, branch)
            upstream = repo.fetch(target, tracking, branch)
        except GitFailed as err:
            raise SitebenchError(
                f"could not reach the results remote {target}: {err.reason}",
                "check the network and the remote (git remote -v), then pull again",
            ) from None
        before = repo.head()
        if before is None or repo.is_ancestor(before, upstream):
            try:
                repo.git("merge", "--ff-only", "--quiet", upstream)
            except GitFailed as err:
                raise SitebenchError(
                    f"could not bring {repo.top} up to {target} {branch} ({err.reason})",
                    "a local file is in the way: look with git status, then pull again",
                ) from None
        elif not repo.is_ancestor(upstream, before):
            # Local, unpublished runs: they go on top of the remote's history.
            repo.only_site_commits(upstream, None, target, branch)
            repo.rebase_onto(upstream)
        # The tree's new runs: those the remote brought (local ones are in both trees).
        found = repo.runs_between(before, repo.head())
        return [(site, runs) for site, runs in found.items() if runs]
