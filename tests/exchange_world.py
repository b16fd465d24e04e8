"""Sites exchanging runs through a real bare git repository on this machine, each with its
own results directory, trust list and SSH signing key, for test_exchange.py and
test_hostile_sites.py. A "site" acts in-process (:meth:`Site.act`) or through the CLI
(:meth:`Site.cli`), with its own environment either way."""

import contextlib
import os
import shutil
import subprocess
import sys

from conftest import ROOT
from sitebench.results import exchange, trust
from sitebench.results.rundirs import new_run_name

TEMPLATE = ROOT / "results/local/20261122T111440Z-ebb65a"


def git(cwd, *args, env=None, check=True):
    proc = subprocess.run(
        ["git", "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: exit {proc.returncode}: {proc.stderr}")
    return proc


def tree_bytes(root):
    """{relative path: bytes} of every file under ``root``: two runs compared byte for byte."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


class Site:
    def __init__(self, world, name):
        self.world = world
        self.name = name
        self.home = world.tmp / f"site-{name}"
        self.results = self.home / "results"
        self.results.mkdir(parents=True)
        (world.sites_root / "site-configs" / name).mkdir(parents=True, exist_ok=True)
        self.env = {
            "SITEBENCH_RESULTS_DIR": str(self.results),
            "SITEBENCH_TRUST_DIR": str(self.home / "trust"),
            "SITEBENCH_KEYS_DIR": str(self.home / "keys"),
            "SITEBENCH_STORE_DIR": str(self.home / "store"),
            "SITEBENCH_SITES_ROOT": str(world.sites_root),
        }
        with self.act():
            self.key, self.public, _ = trust.ensure_site_key(name)

    @contextlib.contextmanager
    def act(self):
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def trusts(self, *sites):
        with self.act():
            for site in sites:
                trust.add(site.name, f"{site.key}.pub")

    def new_run(self, site=None):
        dest = self.results / (site or self.name) / new_run_name()
        shutil.copytree(TEMPLATE, dest)
        return dest.name

    def publish(self, **kw):
        with self.act():
            return exchange.publish(self.name, remote=str(self.world.bare), **kw)

    def pull(self):
        with self.act():
            return exchange.pull(remote=str(self.world.bare))

    def runs(self, site):
        """The runs of ``site`` here: folders in results/ and runs accepted from the
        exchange (kept in git, written out by :meth:`show`)."""
        d = self.results / site
        here = {p.name for p in d.iterdir() if not p.name.startswith(".")} if d.is_dir() else set()
        return sorted(
            here | set(exchange.Exchange(self.results).accepted_runs(site).get(site, {}))
        )

    def show(self, site, run):
        """Write an accepted run of ``site`` out whole (./sitebench show); its folder."""
        with self.act():
            return exchange.show(site, run)

    def cli(self, *args, cwd=ROOT):
        return subprocess.run(
            [sys.executable, "-m", "sitebench", *args],
            cwd=cwd,
            env={**os.environ, **self.env, "PYTHONPATH": str(ROOT / "src")},
            capture_output=True,
            text=True,
        )


class World:
    """The shared bare repository (made by ``git init --bare`` with one empty root commit,
    or by ``exchange init-remote`` when ``protected``) and its sites."""

    def __init__(self, tmp, protected=False):
        self.tmp = tmp
        self.sites_root = tmp / "sites"
        self.bare = tmp / "shared.git"
        self.protected = protected
        self.sites = {}

    def site(self, name):
        if name not in self.sites:
            self.sites[name] = Site(self, name)
        return self.sites[name]

    def make_remote(self, signers=None, unsigned=()):
        if self.protected:
            from sitebench.results import shared_remote

            shared_remote.init_remote(self.bare, signers, unsigned_sites=unsigned)
            return
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.bare)], check=True)
        seed = self.tmp / "seed"
        subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
        (seed / "README.md").write_text("runs\n")
        git(seed, "add", "-A")
        git(seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed")
        git(seed, "push", "-q", str(self.bare), "main")

    def trust_file(self, *names):
        """An allowed_signers file trusting these sites' keys (a protected remote's list)."""
        path = self.tmp / f"signers-{'-'.join(names)}"
        path.write_text("".join(f"{n} {self.site(n).public}\n" for n in names))
        return path

    def hostile_clone(self, name="mallory"):
        """A plain git clone of the shared repository, as a hostile site works with it."""
        path = self.tmp / f"hostile-{name}-{len(list(self.tmp.glob('hostile-*')))}"
        git(self.tmp, "clone", "-q", str(self.bare), str(path))
        return path

    def push_as(self, clone, message, key=None, amend=False, force=False):
        """Commit everything in ``clone`` (signed with ``key`` if given) and push it."""
        commit_as(clone, message, key=key, amend=amend)
        push = ["push", "-q", *(["--force"] if force else []), "origin", "HEAD:main"]
        return git(clone, *push, check=False)


def commit_as(clone, message, key=None, amend=False):
    """Commit everything in ``clone`` with plain git, signed with ``key`` if given."""
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={key}"] if key else []
    git(clone, "add", "-A", "-f")
    args = [*sign, "-c", "user.name=m", "-c", "user.email=m@m", "commit", "-q", "--allow-empty"]
    args += ["-S"] if key else ["--no-gpg-sign"]
    args += ["--amend"] if amend else []
    git(clone, *args, "-m", message)


def write_commit(repository, text):
    """The id of a commit object written by hand (``text``: its raw headers and message)
    into ``repository`` (a clone or a bare one), as a site with plain git can."""
    return subprocess.run(
        ["git", "-C", str(repository), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def plumb_commit(clone, additions, key=None, removals=(), message="results: runs"):
    """A commit on ``clone``'s HEAD built with git's plumbing (``mktree``), which takes tree
    entries ``git add`` refuses (``.git``, ``..``, gitlinks): ``additions`` maps a path to
    (mode, bytes, or an object's id as text: a gitlink's, or any object's listed under
    another mode). Signed with ``key`` if given; not pushed."""
    tree = {}
    listing = git(clone, "ls-tree", "-r", "-z", "--full-tree", "HEAD").stdout
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, _, sha = meta.split()
        _put(tree, path.split("/"), (mode, sha))
    for path in removals:
        _drop(tree, path.split("/"))
    for path, (mode, data) in additions.items():
        if mode == "160000" or isinstance(data, str):
            sha = data
        else:
            sha = (
                subprocess.run(
                    ["git", "-C", str(clone), "hash-object", "-w", "--stdin"],
                    input=data,
                    capture_output=True,
                    check=True,
                )
                .stdout.decode()
                .strip()
            )
        _put(tree, path.split("/"), (mode, sha))
    top = _mktree(clone, tree)
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={key}"] if key else []
    head = git(clone, "rev-parse", "HEAD").stdout.strip()
    args = [*sign, "-c", "user.name=m", "-c", "user.email=m@m", "commit-tree", top, "-p", head]
    args += ["-S"] if key else []
    commit = git(clone, *args, "-m", message).stdout.strip()
    git(clone, "update-ref", "HEAD", commit)
    return commit


def _put(tree, parts, leaf):
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = leaf


def _drop(tree, parts):
    for part in parts[:-1]:
        tree = tree[part]
    del tree[parts[-1]]


def _mktree(clone, tree):
    lines = []
    for name, leaf in sorted(tree.items()):
        if isinstance(leaf, dict):
            lines.append(f"040000 tree {_mktree(clone, leaf)}\t{name}")
        else:
            kind = "commit" if leaf[0] == "160000" else "blob"
            lines.append(f"{leaf[0]} {kind} {leaf[1]}\t{name}")
    proc = subprocess.run(
        ["git", "-C", str(clone), "mktree", "-z", "--missing"],
        input="".join(line + "\0" for line in lines),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def raw_tree(clone, entries):
    """A tree object written byte for byte, in the order given, with
    ``hash-object --literally``: entries git's own commands would sort, merge or refuse
    (duplicates, a file and a folder of one name, unsorted). ``entries``: (mode, name, sha)."""
    data = b"".join(
        mode.lstrip("0").encode() + b" " + name.encode() + b"\0" + bytes.fromhex(sha)
        for mode, name, sha in entries
    )
    return (
        subprocess.run(
            ["git", "-C", str(clone), "hash-object", "--literally", "-t", "tree", "-w", "--stdin"],
            input=data,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )


def tree_entries(clone, treeish):
    """[(mode, name, sha)] of one tree, in git's order."""
    out = git(clone, "ls-tree", "-z", treeish).stdout
    entries = []
    for entry in filter(None, out.split("\0")):
        meta, _, name = entry.partition("\t")
        mode, _, sha = meta.split()
        entries.append((mode, name, sha))
    return entries


def signed_trees(bare, site):
    """{commit: {path: blob}} of every commit on the branch whose signature git verifies as
    ``site``'s (plain git: ``log %G?`` against an allowed_signers of that site alone)."""
    signers = bare.parent / f"only-{site.name}"
    signers.write_text(f"{site.name} {site.public}\n")
    log = git(
        bare,
        "-c",
        "gpg.format=ssh",
        "-c",
        f"gpg.ssh.allowedSignersFile={signers}",
        "log",
        "--format=%H %G?",
        "main",
    ).stdout.split("\n")
    found = {}
    for line in filter(None, log):
        commit, status = line.split()
        if status == "G":
            listing = git(bare, "ls-tree", "-r", "-z", commit).stdout
            found[commit] = {
                e.partition("\t")[2]: e.split()[2] for e in filter(None, listing.split("\0"))
            }
    return found
