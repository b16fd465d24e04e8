"""The machine's binary cache (src/sitebench/spack/buildcache.py): where it is, how a cache
that is missing, unwritable or full is used, its index kept current; and (marker `spack`)
binaries taken from it into another install tree (another checkout), relocated and run,
nothing taken for another hash (a changed variant, recipe or target), a corrupted binary
refused by Spack's checksum and rebuilt, two pushes of one spec at once."""

import hashlib
import os
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, small_tmpfs
from sitebench.spack import buildcache
from sitebench.spack import pinned as spack_mod

SPECS = ["memaccess", "mpi-ring"]


def test_the_cache_is_outside_the_checkout_and_configurable(tmp_path, monkeypatch):
    monkeypatch.delenv(buildcache.ENV_VAR, raising=False)
    monkeypatch.setenv("SITEBENCH_CACHE_DIR", str(tmp_path / "user"))
    assert buildcache.directory() == tmp_path / "user" / "buildcache"
    assert not buildcache.directory().is_relative_to(ROOT)
    monkeypatch.setenv(buildcache.ENV_VAR, str(tmp_path / "shared"))
    assert buildcache.directory() == tmp_path / "shared"
    monkeypatch.setenv(buildcache.ENV_VAR, "off")
    assert buildcache.directory() is None and buildcache.machine_cache() is None


def test_the_scope_registers_the_cache_and_pads_every_tree(tmp_path, monkeypatch):
    monkeypatch.setenv("SITEBENCH_STATE_DIR", str(tmp_path / "state"))
    spack = spack_mod.Spack(tmp_path / "bin" / "spack")
    cache = buildcache.Cache(tmp_path / "cache", True)
    spack.write_scope(tmp_path / "builtin", "file:///mirror", cache)
    mirrors = yaml.safe_load((spack.config_dir / "mirrors.yaml").read_text())["mirrors"]
    assert mirrors["sitebench"]["binary"] is False
    entry = mirrors[buildcache.MIRROR]
    assert entry["url"] == f"file://{tmp_path / 'cache'}"
    assert entry["binary"] and entry["autopush"] and entry["signed"] is False
    config = yaml.safe_load((spack.config_dir / "config.yaml").read_text())["config"]
    assert config["install_tree"]["padded_length"] == buildcache.PADDED_LENGTH
    # A read-only cache is still read, never pushed to.
    spack.write_scope(tmp_path / "builtin", None, buildcache.Cache(tmp_path / "c", False))
    mirrors = yaml.safe_load((spack.config_dir / "mirrors.yaml").read_text())["mirrors"]
    assert list(mirrors) == [buildcache.MIRROR] and mirrors[buildcache.MIRROR]["autopush"] is False


@pytest.mark.reliability_input
def test_a_missing_cache_is_created(tmp_path, monkeypatch):
    monkeypatch.setenv(buildcache.ENV_VAR, str(tmp_path / "not" / "yet"))
    cache = buildcache.machine_cache()
    assert cache.writable and (tmp_path / "not" / "yet").is_dir()


@pytest.mark.reliability_input
def test_a_cache_that_cannot_be_created_is_not_used(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("not a directory\n")
    monkeypatch.setenv(buildcache.ENV_VAR, str(tmp_path / "file" / "cache"))
    assert buildcache.machine_cache() is None
    assert "cannot be created" in capsys.readouterr().err


def _read_only_tmpfs(where):
    """A read-only tmpfs at ``where`` (root cannot be kept out of a directory by its mode)."""
    where.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"CANNOT MOUNT A READ-ONLY TMPFS (needs root): {proc.stderr.strip()}")
    return where


@pytest.mark.reliability_fault
def test_an_unwritable_cache_is_read_not_pushed_to(tmp_path, monkeypatch, capsys):
    where = _read_only_tmpfs(tmp_path / "ro")
    try:
        monkeypatch.setenv(buildcache.ENV_VAR, str(where))
        cache = buildcache.machine_cache()
        assert cache is not None and not cache.writable and cache.mirror()["autopush"] is False
        err = capsys.readouterr().err
        assert "not writable" in err and "built from source and not pushed" in err
        assert list(where.iterdir()) == []  # nothing half-written
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.reliability_fault
def test_a_nearly_full_cache_is_not_pushed_to(tmp_path, monkeypatch, capsys):
    with small_tmpfs(tmp_path / "small", "2m") as where:
        monkeypatch.setenv(buildcache.ENV_VAR, str(where))
        cache = buildcache.machine_cache()
        assert not cache.writable and "GiB free" in cache.why
        assert "not writable" in capsys.readouterr().err
        assert [p.name for p in where.iterdir()] == []  # the write probe left nothing


def test_the_index_is_stale_after_a_push_only(tmp_path):
    cache = tmp_path / "cache"
    assert not buildcache.index_is_stale(cache)  # nothing pushed yet
    folder = cache / buildcache.SPECS / "stream"
    folder.mkdir(parents=True)
    (folder / "stream-5.10-abc.spec.manifest.json").write_text("{}")
    assert buildcache.index_is_stale(cache)
    (cache / buildcache.INDEX).parent.mkdir(parents=True)
    (cache / buildcache.INDEX).write_text("{}")
    (cache / buildcache.STAMP).write_text(f"{buildcache._newest_push(cache)}\n")
    assert not buildcache.index_is_stale(cache)
    os.utime(folder, (folder.stat().st_atime, folder.stat().st_mtime + 5))  # a later push
    assert buildcache.index_is_stale(cache)
    (cache / buildcache.STAMP).write_text("garbled")
    assert buildcache.index_is_stale(cache)


# -- with Spack: real binaries -------------------------------------------------------------


def _scope(tmp_path, cache, name="scope"):
    """A command-line scope (-C) whose mirrors are exactly the source mirror and ``cache``."""
    scope = tmp_path / name
    scope.mkdir()
    source = os.environ.get("SITEBENCH_MIRROR", "").removeprefix("file://")
    mirrors = {"private": buildcache.Cache(cache, True).mirror()}
    if source:
        mirrors["source"] = {"url": f"file://{source}", "source": True, "binary": False}
    # `mirrors::` replaces every other scope's mirrors (the machine cache among them).
    body = yaml.safe_dump(mirrors, sort_keys=False)
    (scope / "mirrors.yaml").write_text(
        "mirrors::\n" + "".join(f"  {line}\n" for line in body.splitlines())
    )
    return scope


def _env(spack, where, specs):
    from sitebench.discovery import local_site

    local_site.detect(spack)
    env_dir = local_site.write_environment(where, specs, concretizer={"unify": True})
    spack.run("-e", env_dir, "concretize", "--fresh", capture=True)
    return env_dir


def _install(spack, env_dir, tree, *args, scope=None):
    scoped = ("-C", scope) if scope else ()
    return spack.run(
        *scoped, "-c", f"config:install_tree:root:{tree}", "-e", env_dir, "install", *args,
        capture=True, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def seeded(spack, tmp_path_factory):
    """memaccess and mpi-ring installed into a short tree (from the machine cache, or built
    once per machine and pushed there), then pushed to a private cache of their own."""
    top = tmp_path_factory.mktemp("bc")
    env_dir = _env(spack, top / "env", SPECS)
    buildcache.refresh_index(spack, spack.buildcache)
    first = _install(spack, env_dir, top / "a")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    cache = top / "private"
    pushed = spack.run(
        "-c", f"config:install_tree:root:{top / 'a'}", "-e", env_dir,
        "buildcache", "push", "--unsigned", "--update-index", f"file://{cache}",
        capture=True, check=False,
    )  # fmt: skip
    assert pushed.returncode == 0, pushed.stdout[-3000:] + pushed.stderr[-3000:]
    return top, env_dir, cache


def _prefix(tree, name):
    return next(p for p in Path(tree).rglob(f"{name}-*") if (p / ".spack").is_dir())


@pytest.mark.spack
def test_another_install_root_takes_the_binaries_and_runs_them(seeded, spack):
    """Another checkout's tree, much longer than the first: every spec from the cache
    (`--use-buildcache only`: a build would fail), relocated, and the programs run."""
    top, env_dir, cache = seeded
    # Longer by 60 characters; Spack's own limit is the root's (sbang's shebang, 127).
    other = top / ("another-checkout-" + "x" * 20) / ".sitebench" / "spack-store"
    proc = _install(spack, env_dir, other, "--use-buildcache", "only", scope=_scope(top, cache))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "Extracting mpi-ring" in out and "Extracting memaccess" in out
    assert "from source" not in out and "Executing phase" not in out  # nothing built
    ring = _prefix(other, "mpi-ring") / "bin" / "mpi_ring"
    elf = subprocess.run(["readelf", "-d", str(ring)], capture_output=True, text=True).stdout
    assert str(other) in elf and f"{top / 'a'}/" not in elf  # its RPATH now points here
    ldd = subprocess.run(["ldd", str(ring)], capture_output=True, text=True).stdout
    assert "not found" not in ldd, ldd
    memaccess = _prefix(other, "memaccess") / "bin" / "memaccess"
    run = subprocess.run([str(memaccess), "-m", "2", "-n", "1"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.spack
@pytest.mark.reliability_input
@pytest.mark.parametrize("change", ["variant", "target", "recipe"])
def test_another_hash_takes_nothing_from_the_cache(seeded, spack, tmp_path, change):
    """A changed variant, target or recipe is another hash: the cache offers no binary for
    it (with `--use-buildcache only` the install fails; by default it builds from source)."""
    top, env_dir, cache = seeded
    if change == "recipe":
        repo = tmp_path / "spack_repo" / "sitebench"  # Spack wants a path with spack_repo/
        repo.parent.mkdir()
        subprocess.run(["cp", "-r", str(ROOT / "spack-repo/spack_repo/sitebench"), str(repo)])
        recipe = repo / "packages" / "memaccess" / "package.py"
        text = recipe.read_text()
        recipe.write_text(text.replace("\n    version(", "\n    _changed = 1\n\n    version(", 1))
        assert "_changed = 1" in recipe.read_text()
        spec = "memaccess"
    else:
        repo = None
        spec = {"variant": "mpi-ring cflags=-O1", "target": "memaccess target=x86_64_v2"}[change]
    from sitebench.discovery import local_site

    local_site.detect(spack)
    changed = local_site.write_environment(
        tmp_path / "env", [spec], our_repo=repo is None, concretizer={"unify": True}
    )
    if repo is not None:
        data = yaml.safe_load((changed / "spack.yaml").read_text())
        data["spack"]["repos"] = {"sitebench": str(repo)}
        (changed / "spack.yaml").write_text(yaml.safe_dump(data))
    spack.run("-e", changed, "concretize", "--fresh", capture=True)
    name = spec.split()[0]
    cached = set(_lock_hashes(env_dir, name))
    assert cached and not cached & set(_lock_hashes(changed, name))  # another hash
    proc = _install(spack, changed, tmp_path / "t", "--use-buildcache", "only", scope=_scope(
        tmp_path, cache))  # fmt: skip
    assert proc.returncode != 0
    assert "No binary found when cache-only was specified" in proc.stderr
    held = {p.name for p in (cache / buildcache.SPECS / name).glob("*.spec.manifest.json")}
    assert held and not any(h in m for h in _lock_hashes(changed, name) for m in held)


def _lock_hashes(env_dir, name):
    import json

    lock = json.loads((Path(env_dir) / "spack.lock").read_text())
    return [h for h, s in lock["concrete_specs"].items() if s["name"] == name]


def _blob_of(cache, name):
    """The tarball blob of ``name`` in ``cache`` (from its spec manifest)."""
    import json

    manifest = next((cache / buildcache.SPECS / name).glob("*.spec.manifest.json"))
    data = json.loads(manifest.read_text())  # unsigned: plain JSON
    digest = next(d["checksum"] for d in data["data"] if ".install." in d["mediaType"])
    return cache / "blobs" / "sha256" / digest[:2] / digest


@pytest.mark.spack
@pytest.mark.reliability_fault
@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_a_damaged_binary_is_refused_and_rebuilt(seeded, spack, tmp_path, damage):
    top, env_dir, cache = seeded
    copy = tmp_path / "cache"
    subprocess.run(["cp", "-a", str(cache), str(copy)], check=True)
    blob = _blob_of(copy, "memaccess")
    data = blob.read_bytes()
    blob.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[::-1])
    tree = tmp_path / "tree"
    proc = _install(spack, env_dir, tree, scope=_scope(tmp_path, copy))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    # Spack's sha256 of the blob does not match its manifest: it says so only with --debug,
    # and builds from source instead.
    assert "No binary for memaccess" in out and "installing from source" in out, out[-3000:]
    assert "Extracting mpi-ring" in out  # the sound binaries still came from the cache
    memaccess = _prefix(tree, "memaccess") / "bin" / "memaccess"
    assert subprocess.run([str(memaccess), "-m", "2", "-n", "1"]).returncode == 0
    # The rebuild was pushed: the manifest names a new, whole blob.
    fresh = _blob_of(copy, "memaccess")
    assert hashlib.sha256(fresh.read_bytes()).hexdigest() == fresh.name


@pytest.mark.spack
@pytest.mark.reliability_fault
def test_a_damaged_binary_of_a_real_cache_is_found_and_only_it(seeded, tmp_path):
    """Spack's own manifests and tarballs (the seeded cache): the one damaged tarball is
    found before Spack is asked for it, every whole one passes."""
    from sitebench.spack import damaged_binaries

    _top, env_dir, cache = seeded
    copy = tmp_path / "cache"
    subprocess.run(["cp", "-a", str(cache), str(copy)], check=True)
    hashes = set(_lock_hashes(env_dir, "memaccess")) | set(_lock_hashes(env_dir, "mpi-ring"))
    assert damaged_binaries.find(copy, hashes) == []
    blob = _blob_of(copy, "memaccess")
    blob.write_bytes(blob.read_bytes()[::-1])
    (found,) = damaged_binaries.find(copy, hashes)
    assert (found.name, found.blob) == ("memaccess", blob)
    assert found.why == "its tarball's sha256 is not the one its manifest names"


@pytest.mark.spack
@pytest.mark.reliability_fault
def test_two_pushes_of_one_spec_at_once(seeded, spack, tmp_path):
    """Two checkouts pushing the same specs into one cache at the same moment: every file
    whole (each blob's sha256 is its name), and the cache serves an install."""
    top, env_dir, _ = seeded
    cache = tmp_path / "cache"
    results = []

    def push():
        results.append(
            spack.run(
                "-c", f"config:install_tree:root:{top / 'a'}", "-e", env_dir,
                "buildcache", "push", "--unsigned", "--force", f"file://{cache}",
                capture=True, check=False,
            )  # fmt: skip
        )

    threads = [threading.Thread(target=push) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]
    blobs = [p for p in (cache / "blobs").rglob("*") if p.is_file()]
    assert blobs
    for blob in blobs:
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    assert not [p for p in cache.rglob("*") if p.name.startswith((".tmp", "tmp"))]
    assert buildcache.refresh_index(spack, buildcache.Cache(cache, True))
    proc = _install(spack, env_dir, tmp_path / "t", "--use-buildcache", "only", scope=_scope(
        tmp_path, cache))  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


# -- a centre's signed cache (./sitebench buildcache push / pull) ---------------------------


class _InTree:
    """The session's Spack installing into ``tree`` (a checkout or cluster of its own)."""

    def __init__(self, spack, tree):
        self._spack, self._tree = spack, tree

    def run(self, *args, **kwargs):
        return self._spack.run("-c", f"config:install_tree:root:{self._tree}", *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._spack, name)


@pytest.fixture
def keyrings():
    """Private GnuPG homes for Spack (short paths: gpg-agent's socket path is limited); their
    agents stopped and the homes removed at the end."""
    import shutil
    import tempfile

    homes = []

    def make():
        homes.append(tempfile.mkdtemp(prefix="sbgpg-", dir="/tmp"))
        return {**os.environ, "SPACK_GNUPGHOME": homes[-1]}

    yield make
    for home in homes:
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "all"], check=False)
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.spack
@pytest.mark.reliability_input
def test_a_centre_cache_is_signed_and_checked(seeded, spack, tmp_path, keyrings):
    """Pushed signed from the machine that built; another machine (its own keyring, its own
    tree) refuses it until it trusts the centre's key, refuses an unsigned cache unless
    told, and installs what it trusts without building."""
    from sitebench.common.errors import SitebenchError
    from sitebench.spack import signed_cache

    top, env_dir, unsigned = seeded
    centre, cluster = keyrings(), keyrings()
    spack.run("gpg", "create", "sitebench test", "test@example.org", capture=True, env=centre)
    spack.run("gpg", "export", tmp_path / "centre.pub", capture=True, env=centre)
    shared = tmp_path / "centre-cache"
    signed_cache.export(_InTree(spack, top / "a"), env_dir, shared, env=centre)
    assert not signed_cache.unsigned_specs(shared)
    elsewhere = _InTree(spack, tmp_path / "cluster")
    with pytest.raises(SitebenchError) as untrusted:
        signed_cache.import_(elsewhere, env_dir, shared, env=cluster)
    assert "--trust" in str(untrusted.value)
    assert not (tmp_path / "cluster").exists() or not list((tmp_path / "cluster").rglob("bin"))
    with pytest.raises(SitebenchError) as refused:
        signed_cache.import_(elsewhere, env_dir, unsigned, env=cluster)
    assert "unsigned binaries" in str(refused.value) and "--allow-unsigned" in str(refused.value)
    proc = signed_cache.import_(
        elsewhere, env_dir, shared, trust=tmp_path / "centre.pub", env=cluster
    )
    assert "Extracting mpi-ring" in proc.stdout + proc.stderr
    memaccess = _prefix(tmp_path / "cluster", "memaccess") / "bin" / "memaccess"
    assert subprocess.run([str(memaccess), "-m", "2", "-n", "1"]).returncode == 0
    signed_cache.import_(
        _InTree(spack, tmp_path / "unchecked"), env_dir, unsigned, allow_unsigned=True, env=cluster
    )
    assert _prefix(tmp_path / "unchecked", "mpi-ring")


def test_buildcache_pull_refuses_what_is_no_cache(tmp_path):
    from conftest import sitebench

    proc = sitebench("buildcache", "pull", str(tmp_path))
    assert proc.returncode != 0 and "is not a Spack binary cache" in proc.stderr
