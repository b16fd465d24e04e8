"""Spack's indexes of the pinned package repository, shared by a user's checkouts.

Before it can detect or concretize anything, Spack indexes the builtin repository (its
providers, tags and patches) by importing every one of its recipes: 63 s on a 2-core VM,
the longest step of a fresh clone's first run. The indexes depend only on Spack's commit
and the repository's, so a fresh checkout copies them from the user's cache
(``~/.cache/sitebench/spack-indexes/<spack>-<spack-packages>/``) and the first checkout to
build them keeps a copy there. Only a clean git checkout is shared: a repository with
local changes keeps its own indexes.

Spack still judges them: an index older than any recipe in the checkout is rebuilt, and
a copied index is as new as the copy, newer than the checkout it is copied into.
A cache is only a shortcut: any failure to read or write it leaves Spack to index.
"""

import subprocess
from pathlib import Path

from sitebench.common import paths
from sitebench.common.files import write_atomic

#: Spack's repository indexes (folders of its misc cache), each one JSON file per namespace.
INDEXES = ("providers", "tags", "patches")
NAMESPACE = "builtin"


def _commit(checkout, top, clean=False):
    """The commit of the git checkout whose top level is ``top``, holding ``checkout``;
    None if there is none, or (with ``clean``) if its tracked files were changed."""

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False
        )

    found = git("rev-parse", "--show-toplevel", "HEAD").stdout.splitlines()
    if len(found) != 2 or Path(found[0]).resolve() != Path(top).resolve():
        return None
    if clean and git("status", "--porcelain", "--untracked-files=no").stdout.strip():
        return None
    return found[1]


def shared_dir(spack, builtin_repo):
    """The user's folder of indexes for this Spack and this builtin repository, or None
    (either is not a git checkout of its own, or the repository has local changes)."""
    root = spack.resolve_root()
    spack_commit = _commit(root, root)
    packages_commit = _commit(builtin_repo, Path(builtin_repo).parents[2], clean=True)
    if not (spack_commit and packages_commit):
        return None
    return paths.user_cache_dir() / "spack-indexes" / f"{spack_commit}-{packages_commit}"


def _copy(source, target):
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, source.read_text())  # not copy2: the copy's mtime is now


def _index_files(folder):
    for index in INDEXES:
        yield from Path(folder, index).glob(f"{NAMESPACE}-*-index.json")


def seed(spack, builtin_repo):
    """Copy the user's indexes into ``spack``'s cache if it has none; return how many."""
    own = spack.cache_dir / "cache"
    if any(_index_files(own)):
        return 0
    shared = shared_dir(spack, builtin_repo)
    copied = 0
    for source in _index_files(shared) if shared else ():
        try:
            _copy(source, own / source.relative_to(shared))
        except OSError:
            break
        copied += 1
    if copied:
        _kept_marker(own).touch()  # they came from the user's cache: nothing to keep
    return copied


def keep(spack, builtin_repo):
    """Copy ``spack``'s indexes to the user's cache, once, if it has none for this pair."""
    own = spack.cache_dir / "cache"
    if _kept_marker(own).exists() or not any(_index_files(own)):
        return 0
    shared = shared_dir(spack, builtin_repo)
    kept = 0
    if shared and not any(_index_files(shared)):
        for source in _index_files(own):
            try:
                _copy(source, shared / source.relative_to(own))
            except OSError:
                return kept  # tried again next time
            kept += 1
    _kept_marker(own).touch()
    return kept


def _kept_marker(own):
    """The marker that ``own``'s indexes are in the user's cache (or came from it)."""
    return own / ".sitebench-indexes-shared"
