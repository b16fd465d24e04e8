"""A user's checkouts share the lock of a concretization from the same inputs
(spack/environment.py): a second clone copies it instead of concretizing again."""

import json

import pytest
from test_repo_index import git_checkout

from sitebench.spack import environment, pinned

LOCK = {
    "_meta": {"lockfile-version": 6},
    "roots": [{"hash": "abc", "spec": "stream"}],
    "concrete_specs": {"abc": {"name": "stream"}},
}


class FakeSpack:
    """What environment.py uses of a Spack: its commit, and ``concretize`` writing a lock."""

    def __init__(self, root):
        self.root, self.concretized = root, []

    def commit(self):
        return pinned.git_commit(self.root)

    def run(self, *args, **_):
        assert args[0] == "-e" and args[2] == "concretize", args
        self.concretized.append(args[1])
        (args[1] / "spack.lock").write_text(json.dumps({**LOCK, "by": str(args[1])}))


def checkout(path, packages="packages: {}\n"):
    """The two folders of a site in a checkout at ``path``: (environment, site config)."""
    env_dir, site_dir = path / "environments" / "x", path / "site-configs" / "x"
    (site_dir / "spack").mkdir(parents=True)
    env_dir.mkdir(parents=True)
    (env_dir / "spack.yaml").write_text("spack:\n  specs: [stream]\n")
    (site_dir / "spack" / "packages.yaml").write_text(packages)
    return env_dir, site_dir


@pytest.fixture
def pinned_pair(tmp_path, monkeypatch):
    """A Spack and a builtin repository, each a clean git checkout; the user's cache."""
    monkeypatch.setenv("SITEBENCH_CACHE_DIR", str(tmp_path / "user-cache"))
    spack = FakeSpack(git_checkout(tmp_path / "spack", {"bin/spack": "#!/bin/sh\n"}))
    packages = git_checkout(
        tmp_path / "spack-packages", {"repos/spack_repo/builtin/packages/z/package.py": "#\n"}
    )
    return spack, packages / "repos" / "spack_repo" / "builtin"


def concretize(spack, builtin, env_dir, site_dir):
    return environment.ensure_concretized(spack, env_dir, site_dir, "1.1.0", builtin)


def test_a_second_checkout_copies_the_lock_the_first_concretized(tmp_path, pinned_pair, capfd):
    spack, builtin = pinned_pair
    first = checkout(tmp_path / "a")
    concretize(spack, builtin, *first)
    assert spack.concretized == [first[0]]
    second = checkout(tmp_path / "b")
    concretize(spack, builtin, *second)
    assert spack.concretized == [first[0]]  # not again
    lock = json.loads((second[0] / "spack.lock").read_text())
    assert lock["by"] == str(first[0])
    assert "concretized from the same inputs by another checkout" in capfd.readouterr().err
    # Its own stamp now: the next run of the second checkout reuses its lock in place.
    concretize(spack, builtin, *second)
    assert spack.concretized == [first[0]]


def test_detected_packages_listed_in_another_order_are_the_same_inputs(tmp_path, pinned_pair):
    """Two clones' detection wrote the same packages.yaml with its keys in another order."""
    spack, builtin = pinned_pair
    concretize(spack, builtin, *checkout(tmp_path / "a", "packages:\n  awk: {}\n  zlib: {}\n"))
    concretize(spack, builtin, *checkout(tmp_path / "b", "packages:\n  zlib: {}\n  awk: {}\n"))
    assert spack.concretized == [tmp_path / "a/environments/x"]


def test_the_config_the_environment_includes_is_an_input(tmp_path, pinned_pair):
    """A spack.yaml that includes config from elsewhere: that config decides the specs too,
    and the checkout's own stamp also sees it (a reordered packages.yaml is no change)."""
    spack, builtin = pinned_pair
    shared = tmp_path / "shared-config"
    shared.mkdir()
    (shared / "packages.yaml").write_text("packages:\n  awk: {}\n  zlib: {}\n")
    env_dir, site_dir = checkout(tmp_path / "a")
    (env_dir / "spack.yaml").write_text(f"spack:\n  include: [{shared}]\n  specs: [stream]\n")
    concretize(spack, builtin, env_dir, site_dir)
    (shared / "packages.yaml").write_text("packages:\n  zlib: {}\n  awk: {}\n")
    concretize(spack, builtin, env_dir, site_dir)
    assert spack.concretized == [env_dir]  # the same data
    (shared / "packages.yaml").write_text("packages:\n  mpi: {require: [mpich]}\n")
    concretize(spack, builtin, env_dir, site_dir)
    assert spack.concretized == [env_dir, env_dir]


def test_other_inputs_or_a_changed_builtin_repository_concretize_again(tmp_path, pinned_pair):
    spack, builtin = pinned_pair
    concretize(spack, builtin, *checkout(tmp_path / "a"))
    other = checkout(tmp_path / "b", packages="packages:\n  mpi: {require: [mpich]}\n")
    concretize(spack, builtin, *other)
    assert spack.concretized[-1] == other[0]
    # A builtin repository with local changes is not the pinned commit: nothing shared.
    (builtin / "packages" / "z" / "package.py").write_text("# changed\n")
    third = checkout(tmp_path / "c")
    assert environment.lock_key(spack, *third, "1.1.0", builtin)[1] is None
    concretize(spack, builtin, *third)
    assert spack.concretized[-1] == third[0]


@pytest.mark.reliability_input
@pytest.mark.parametrize("damage", ["truncated", "roots not in it", "not JSON", "a folder"])
def test_a_damaged_shared_lock_is_ignored_and_replaced(tmp_path, pinned_pair, capfd, damage):
    spack, builtin = pinned_pair
    first = checkout(tmp_path / "a")
    concretize(spack, builtin, *first)
    shared = environment.lock_key(spack, *first, "1.1.0", builtin)[1]
    text = shared.read_text()
    if damage == "a folder":
        shared.unlink()
        shared.mkdir()
    else:
        shared.write_text(
            {
                "truncated": text[: len(text) // 2],
                "roots not in it": json.dumps({**LOCK, "concrete_specs": {}}),
                "not JSON": "\x00\x01",
            }[damage]
        )
    second = checkout(tmp_path / "b")
    concretize(spack, builtin, *second)
    assert spack.concretized == [first[0], second[0]]
    assert json.loads((second[0] / "spack.lock").read_text())["by"] == str(second[0])
    if damage != "a folder":  # replaced by the good one
        assert json.loads(shared.read_text())["by"] == str(second[0])
        assert f"ignoring {shared}: not a whole Spack lock" in capfd.readouterr().err


@pytest.mark.reliability_fault
def test_a_cache_that_cannot_be_written_costs_only_the_sharing(tmp_path, pinned_pair, monkeypatch):
    """The user's cache is a file, not a folder (as root, the one way a write can fail)."""
    spack, builtin = pinned_pair
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("SITEBENCH_CACHE_DIR", str(tmp_path / "not-a-folder"))
    concretize(spack, builtin, *checkout(tmp_path / "a"))
    second = checkout(tmp_path / "b")
    concretize(spack, builtin, *second)
    assert spack.concretized == [tmp_path / "a/environments/x", second[0]]
    assert json.loads((second[0] / "spack.lock").read_text())["by"] == str(second[0])
