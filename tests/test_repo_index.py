"""Spack's repository indexes are shared by a user's checkouts (spack/repo_index.py)."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from sitebench.spack import pinned, repo_index

INDEX = "providers/builtin-specfile_v5-index.json"


def git_checkout(path, files):
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    run = dict(cwd=path, check=True, capture_output=True)
    subprocess.run(["git", "init", "-q"], **run)
    subprocess.run(["git", "add", "."], **run)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"], **run
    )
    return path


class FakeSpack:
    """What repo_index uses of a Spack: its commit and its cache folder."""

    def __init__(self, root, cache_dir):
        self.root, self.cache_dir = root, cache_dir

    def commit(self):
        return pinned.git_commit(self.root)


@pytest.fixture
def checkouts(tmp_path, monkeypatch):
    monkeypatch.setenv("SITEBENCH_CACHE_DIR", str(tmp_path / "user-cache"))
    spack_root = git_checkout(tmp_path / "spack", {"bin/spack": "#!/bin/sh\n"})
    packages = git_checkout(
        tmp_path / "spack-packages",
        {"repos/spack_repo/builtin/packages/zlib/package.py": "# zlib\n"},
    )
    return spack_root, packages / "repos" / "spack_repo" / "builtin"


def test_a_fresh_checkout_gets_the_indexes_another_one_built(tmp_path, checkouts):
    spack_root, builtin = checkouts
    first = FakeSpack(spack_root, tmp_path / "first-cache")
    (first.cache_dir / "cache" / INDEX).parent.mkdir(parents=True)
    (first.cache_dir / "cache" / INDEX).write_text('{"built": "by the first"}')
    assert repo_index.keep(first, builtin) == 1
    assert repo_index.keep(first, builtin) == 0  # once: a marker, no git calls again

    recipe = builtin / "packages" / "zlib" / "package.py"
    time.sleep(0.01)
    second = FakeSpack(spack_root, tmp_path / "second-cache")
    assert repo_index.seed(second, builtin) == 1
    copied = second.cache_dir / "cache" / INDEX
    assert copied.read_text() == '{"built": "by the first"}'
    # Spack rebuilds an index older than a recipe: the copy must be newer than the checkout.
    assert copied.stat().st_mtime > recipe.stat().st_mtime
    assert repo_index.seed(second, builtin) == 0  # it has its own now


def test_a_changed_or_foreign_checkout_shares_nothing(tmp_path, checkouts):
    spack_root, builtin = checkouts
    spack = FakeSpack(spack_root, tmp_path / "cache")
    assert repo_index.shared_dir(spack, builtin).parent.name == "spack-indexes"
    recipe = builtin / "packages" / "zlib" / "package.py"
    recipe.write_text("# zlib, changed here\n")
    assert repo_index.shared_dir(spack, builtin) is None  # its indexes are its own
    recipe.write_text("# zlib\n")
    # A builtin repository that is a folder inside some other checkout is not pinned by it.
    inner = git_checkout(tmp_path / "other", {"x/repos/spack_repo/builtin/repo.yaml": ""})
    assert repo_index.shared_dir(spack, inner / "x/repos/spack_repo/builtin") is None
    assert repo_index.shared_dir(FakeSpack(tmp_path, tmp_path / "c"), builtin) is None


def test_an_unwritable_user_cache_leaves_spack_to_index(tmp_path, checkouts, monkeypatch):
    spack_root, builtin = checkouts
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("SITEBENCH_CACHE_DIR", str(blocked))
    spack = FakeSpack(spack_root, tmp_path / "cache")
    (spack.cache_dir / "cache" / INDEX).parent.mkdir(parents=True)
    (spack.cache_dir / "cache" / INDEX).write_text("{}")
    assert repo_index.keep(spack, builtin) == 0
    assert repo_index.seed(FakeSpack(spack_root, tmp_path / "other"), builtin) == 0


@pytest.mark.spack
@pytest.mark.slow
def test_spack_uses_a_seeded_index_without_rebuilding_it(spack, tmp_path, monkeypatch):
    """The pinned Spack, with an empty cache seeded from the user's: the index it reads
    for ``spack providers`` is the copy (a rebuild would rewrite the file)."""

    builtin = pinned.builtin_repo()
    if repo_index.shared_dir(spack, builtin) is None:
        pytest.skip("the builtin repository is not sitebench's clean checkout")
    repo_index.keep(spack, builtin)
    shared = repo_index.shared_dir(spack, builtin)
    assert any(repo_index._index_files(shared)), "no shared indexes after keep"
    fresh = tmp_path / "fresh-cache"
    monkeypatch.setattr(spack, "cache_dir", fresh)
    assert repo_index.seed(spack, builtin) == len(repo_index.INDEXES)
    before = {p: p.stat().st_mtime_ns for p in repo_index._index_files(fresh / "cache")}
    proc = spack.run("providers", "mpi", capture=True)
    assert "openmpi" in proc.stdout
    after = {p: p.stat().st_mtime_ns for p in repo_index._index_files(fresh / "cache")}
    assert after == before
    assert os.path.getsize(Path(fresh / "cache" / INDEX)) > 1000
