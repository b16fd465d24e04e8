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


def _clean_commit(repository):
    """The commit of the spack-packages checkout holding ``repository`` (its top level is
    ``repos/spack_repo/<namespace>``'s grandparent's parent); None if it is no such checkout
    or its tracked files were changed."""

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(repository), *args], capture_output=True, text=True, check=False
        )

    found = git("rev-parse", "--show-toplevel", "HEAD").stdout.splitlines()
    if len(found) != 2 or Path(found[0]).resolve() != Path(repository).parents[2].resolve():
        return None
    if git("status", "--porcelain", "--untracked-files=no").stdout.strip():
        return None
    return found[1]


def pinned_id(spack, builtin_repo):
    """The key of what a user's checkouts may share of Spack's work, "<Spack's
    commit>-<spack-packages' commit>", or None where either is not a git checkout of its
    own or the repository has local changes."""
    spack_commit = spack.commit()  # as provenance records it
    packages_commit = _clean_commit(builtin_repo)
    if not (spack_commit and packages_commit):
        return None
    return f"{spack_commit}-{packages_commit}"


def shared_dir(spack, builtin_repo):
    """The user's folder of indexes for this Spack and this builtin repository, or None
    (see :func:`pinned_id`)."""
    found = pinned_id(spack, builtin_repo)
    return paths.user_cache_dir() / "spack-indexes" / found if found else None


def _copy(source, target):
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, source.read_text())  # not copy2: the copy's mtime is now


def _index_files(folder):
    for index in INDEXES:
        yield from Path(folder, index).glob(f"{NAMESPACE}-*-index.json")


def _copy_indexes(source, target):
    """Copy ``source``'s index files into ``target``; return how many (a failure stops)."""
    copied = 0
    for index in _index_files(source):
        try:
            _copy(index, target / index.relative_to(source))
        except OSError:
            break
        copied += 1
    return copied


def seed(spack, builtin_repo):
    """Copy the user's indexes into ``spack``'s cache if it has none; return how many."""
    own = spack.cache_dir / "cache"
    if any(_index_files(own)):
        return 0
    shared = shared_dir(spack, builtin_repo)
    copied = _copy_indexes(shared, own) if shared else 0
    if copied:
        _kept_marker(own).touch()  # they came from the user's cache: nothing to keep
    return copied


def keep(spack, builtin_repo):
    """Copy ``spack``'s indexes to the user's cache, once, if it has none for this pair."""
    own = spack.cache_dir / "cache"
    if _kept_marker(own).exists() or not any(_index_files(own)):
        return 0
    shared = shared_dir(spack, builtin_repo)
    if shared is None:
        kept = 0
    elif any(_index_files(shared)):
        kept = 0  # another checkout kept them
    else:
        kept = _copy_indexes(own, shared)
        if kept < len(list(_index_files(own))):
            return kept  # tried again next time
    _kept_marker(own).touch()
    return kept


def _kept_marker(own):
    """The marker that ``own``'s indexes are in the user's cache (or came from it)."""
    return own / ".sitebench-indexes-shared"
