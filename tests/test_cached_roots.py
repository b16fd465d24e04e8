"""A new checkout of the whole suite installs the roots the binary cache holds whole in
one Spack call before ReFrame starts (spack/cached_roots.py)."""

import hashlib
import json
import subprocess
from types import SimpleNamespace

import pytest

from sitebench.spack import buildcache, cached_roots

# hpl -> openblas (external), compiler-wrapper (cached); stream (cached, no dependencies);
# osu -> mpich (external), libfabric (not cached); java -> hpl (a root that is a dependency).
SPECS = {
    "hpl1": {"name": "hpl", "dependencies": [{"hash": "blas"}, {"hash": "cw"}]},
    "blas": {"name": "openblas", "external": {"path": "/usr"}},
    "cw": {"name": "compiler-wrapper"},
    "strm": {"name": "stream"},
    "osu1": {"name": "osu-micro-benchmarks", "dependencies": [{"hash": "mpi"}, {"hash": "fab"}]},
    "mpi": {"name": "mpich", "external": {"path": "/usr"}},
    "fab": {"name": "libfabric"},
    "java": {"name": "java-pingpong", "dependencies": [{"hash": "hpl1"}]},
    "db": {"name": "mariadb", "external": {"path": "/usr"}},
}


@pytest.fixture
def env_dir(tmp_path):
    lock = {
        "roots": [
            {"hash": h, "spec": SPECS[h]["name"]} for h in ("hpl1", "strm", "osu1", "java", "db")
        ],
        "concrete_specs": SPECS,
    }
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "spack.lock").write_text(json.dumps(lock))
    return tmp_path / "env"


def push(cache, name, version, digest, tarball=None):
    """A spec in ``cache`` as Spack's v3 layout holds it: a manifest naming its tarball's
    sha256 and length, the tarball a blob named by its digest. Returns the blob."""
    tarball = tarball if tarball is not None else f"{name} {digest}".encode()
    checksum = hashlib.sha256(tarball).hexdigest()
    blob = cache / "blobs" / "sha256" / checksum[:2] / checksum
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(tarball)
    folder = cache / buildcache.SPECS / name
    folder.mkdir(parents=True, exist_ok=True)
    entry = {
        "contentLength": len(tarball),
        "mediaType": "application/vnd.spack.install.v2.tar+gzip",
        "checksumAlgorithm": "sha256",
        "checksum": checksum,
    }
    manifest = folder / f"{name}-{version}-{digest}.spec.manifest.json"
    manifest.write_text(json.dumps({"version": 3, "data": [entry]}))
    return blob


@pytest.mark.parametrize(
    "args, whole",
    [
        ([], True),
        (["-S", "HplCheck.n=2048", "--setvar", "NpbCheck.npb_class=S"], True),
        (["-SHplCheck.n=2048", "--setvar=StreamCheck.stream_array_size=1"], True),
        (["-n", "StreamCheck"], False),
        (["-S", "HplCheck.n=2048", "-x", "OsuLatencyCheck"], False),
        (["--tag", "full"], False),
        (["-p", "gcc-mpich"], False),
    ],
)
def test_only_options_that_set_variables_keep_the_whole_suite(args, whole):
    assert cached_roots.whole_suite(args) is whole


def test_the_roots_whose_every_spec_is_cached_or_external(tmp_path, env_dir):
    cache = tmp_path / "cache"
    for name, version, digest in [
        ("hpl", "2.3", "hpl1"),
        ("compiler-wrapper", "1.1.0", "cw"),
        ("stream", "5.10", "strm"),
        ("osu-micro-benchmarks", "git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0_7.2", "osu1"),
        ("java-pingpong", "1.0", "java"),
    ]:
        push(cache, name, version, digest)
    cached = cached_roots.cached_hashes(cache)
    assert cached == {"hpl1", "cw", "strm", "osu1", "java"}
    # OSU's libfabric is not cached: OSU is left to its fixture, as is the external MariaDB
    # (nothing to install: a Spack call for it alone took 4 s). Installed ones are skipped.
    assert cached_roots.whole_in_cache(env_dir, set(), cached) == ["hpl1", "strm", "java"]
    assert cached_roots.whole_in_cache(env_dir, {"strm"}, cached) == ["hpl1", "java"]
    # A dependency missing from the cache keeps out every root above it.
    assert cached_roots.whole_in_cache(env_dir, set(), cached - {"cw"}) == ["strm"]
    assert cached_roots.cached_hashes(tmp_path / "empty") == set()


class FakeSpack:
    def __init__(self, cache, code=0):
        self.buildcache = buildcache.Cache(cache, True) if cache else None
        self.calls, self.code = [], code

    def run(self, *args, check=True, **_):
        self.calls.append(args)
        return subprocess.CompletedProcess(args, self.code)


def test_one_spack_call_for_all_of_them_and_none_when_there_is_nothing(tmp_path, env_dir, capfd):
    cache = tmp_path / "cache"
    push(cache, "stream", "5.10", "strm")
    spack = FakeSpack(cache)
    assert cached_roots.install(spack, env_dir, set()) == 1
    assert spack.calls == [
        ("-e", env_dir, "install", "--use-buildcache", "only", "/strm"),
    ]
    assert "installing 1 roots from the binary cache" in capfd.readouterr().err
    assert cached_roots.install(spack, env_dir, {"strm"}) == 0  # installed: Spack not started
    assert cached_roots.install(FakeSpack(None), env_dir, set()) == 0  # cache off
    assert len(spack.calls) == 1


@pytest.mark.reliability_fault
def test_a_failed_install_from_the_cache_leaves_the_rest_to_the_fixtures(tmp_path, env_dir, capfd):
    cache = tmp_path / "cache"
    push(cache, "stream", "5.10", "strm")
    assert cached_roots.install(FakeSpack(cache, code=1), env_dir, set()) == 1
    assert "the build fixtures install what is missing" in capfd.readouterr().err


def test_the_run_installs_from_the_cache_only_for_the_whole_suite(tmp_path, monkeypatch):
    """runner.run_suite: one install before ReFrame for a plain run, none with -n or a
    named toolchain, and the table of installed roots written again after it."""
    from sitebench.run import runner

    asked, written = [], []
    monkeypatch.setattr(
        runner.cached_roots, "install", lambda spack, env, installed: asked.append(env) or 1
    )

    def write(spack, env_dir, dest):
        written.append(dest)
        dest.write_text(f"# {env_dir}\n")
        return dest

    monkeypatch.setattr(runner.installed_roots, "write", write)
    monkeypatch.setattr(runner, "run_reframe", lambda cmd, env: (0, None))
    spack = SimpleNamespace(environ=lambda: {})
    prepared = SimpleNamespace(spack=spack, env_dir=tmp_path / "env")
    site = SimpleNamespace(
        name="local", reframe_config=tmp_path / "reframe.py", detected_here=False
    )
    for args, toolchain, expected in [
        ((), "", 1),
        (("-S", "HplCheck.n=2048"), "", 1),
        (("-n", "StreamCheck"), "", 0),
        ((), "gcc-mpich", 0),
    ]:
        monkeypatch.setenv(runner.toolchains.SELECTED, toolchain)
        asked.clear(), written.clear()
        runner.run_suite(site, prepared, "quick", tmp_path, tmp_path / "r.json", args)
        assert len(asked) == expected and len(written) == 1 + expected, (args, toolchain)


@pytest.mark.reliability_fault
@pytest.mark.parametrize("damage", ["truncated", "corrupted", "missing"])
def test_a_damaged_binary_is_named_set_aside_and_left_to_a_build(tmp_path, env_dir, capfd, damage):
    """The tarball of a cached root truncated, changed or gone: named on the console with
    why and what was done (moved aside, kept), not offered to Spack; the sound ones are."""
    cache = tmp_path / "cache"
    push(cache, "stream", "5.10", "strm")
    push(cache, "compiler-wrapper", "1.1.0", "cw")
    blob = push(cache, "hpl", "2.3", "hpl1", tarball=b"x" * 4096)
    if damage == "missing":
        blob.unlink()
    else:
        blob.write_bytes(b"x" * 2048 if damage == "truncated" else b"y" * 4096)
    spack = FakeSpack(cache)
    assert cached_roots.install(spack, env_dir, set()) == 1
    assert spack.calls == [("-e", env_dir, "install", "--use-buildcache", "only", "/strm")]
    err = capfd.readouterr().err
    why = {
        "truncated": "its tarball has 2048 bytes where its manifest says 4096",
        "corrupted": "its tarball's sha256 is not the one its manifest names",
        "missing": "its tarball is missing",
    }[damage]
    assert f"damaged binary of hpl/hpl1: {why} ({blob})" in err, err
    assert "Spack builds it from source and pushes a whole one" in err
    assert "moved aside (" in err and "left in place" not in err
    manifests = cache / buildcache.SPECS / "hpl"
    assert [p.name.split(".damaged-")[0] for p in manifests.iterdir()] == [
        "hpl-2.3-hpl1.spec.manifest.json"
    ]  # kept for inspection, no longer a binary of the cache
    if damage != "missing":
        (aside,) = blob.parent.glob(f"{blob.name}.damaged-*")
        assert not blob.exists() and aside.read_bytes() != b"x" * 4096
    # Set aside once: the next run finds nothing damaged and does not say it again.
    assert cached_roots.install(FakeSpack(cache), env_dir, set()) == 1
    assert "damaged binary" not in capfd.readouterr().err


@pytest.mark.reliability_fault
def test_a_damaged_binary_in_a_read_only_cache_is_named_and_left(tmp_path, env_dir, capfd):
    cache = tmp_path / "cache"
    blob = push(cache, "stream", "5.10", "strm")
    blob.write_bytes(b"changed")
    spack = FakeSpack(cache)
    spack.buildcache = buildcache.Cache(cache, False, "read-only")
    assert cached_roots.install(spack, env_dir, set()) == 0 and spack.calls == []
    err = capfd.readouterr().err
    assert (
        "damaged binary of stream/strm" in err and "left in place (the cache is read-only)" in err
    )
    assert blob.read_bytes() == b"changed"
