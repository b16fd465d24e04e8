"""Spack: found or cloned at the pinned release, isolated, recipes audited, env concretized."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, sitebench
from sitebench.spack import environment
from sitebench.sites import toolchains
from sitebench.discovery import local_site
from sitebench.spack import toolchain_roots
from sitebench.spack import pinned as spack_mod
from sitebench.sites.site import Site
from sitebench.sites.topology import last_level_cache_bytes

LOCAL = Site.resolve("local")

RECIPES = sorted((ROOT / "spack-repo/spack_repo/sitebench/packages").glob("*/package.py"))


def only_mirror_scope(tmp_path, mirror):
    """A command-line config scope (-C) whose mirrors are exactly ``mirror``."""
    scope = tmp_path / "scope"
    scope.mkdir()
    (scope / "mirrors.yaml").write_text(f"mirrors::\n  only:\n    url: file://{mirror}\n")
    return scope


def fake_spack(tmp_path, version):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "spack"
    exe.write_text(f"#!/bin/sh\necho '{version} (0000000)'\n")
    exe.chmod(0o755)
    return bindir


def without_spack_path():
    dirs = os.environ["PATH"].split(os.pathsep)
    return os.pathsep.join(d for d in dirs if not os.path.exists(os.path.join(d, "spack")))


@pytest.mark.reliability_input
def test_wrong_spack_version_is_refused(tmp_path):
    bindir = fake_spack(tmp_path, "0.23.1")
    proc = sitebench(
        "spack", "--version", env={"PATH": f"{bindir}:{os.environ['PATH']}", "SPACK_ROOT": ""}
    )
    assert proc.returncode == 2
    assert "pinned to Spack 1.1.0" in proc.stderr and "Spack 0.23.1" in proc.stderr
    assert "fix:" in proc.stderr


def test_spack_root_of_a_linked_executable_without_starting_spack(tmp_path):
    # As bin/spack does: its real path's grandparent. The script here would fail if run.
    (tmp_path / "spack-1.1.0/lib/spack/spack").mkdir(parents=True)
    (tmp_path / "spack-1.1.0/bin").mkdir()
    (tmp_path / "spack-1.1.0/bin/spack").write_text("#!/bin/sh\nexit 3\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/spack").symlink_to(tmp_path / "spack-1.1.0/bin/spack")
    found = spack_mod.Spack(tmp_path / "bin/spack")
    assert found.resolve_root() == str(tmp_path / "spack-1.1.0")


@pytest.mark.reliability_input
def test_spack_root_without_spack(tmp_path):
    proc = sitebench("spack", "--version", env={"SPACK_ROOT": str(tmp_path)})
    assert proc.returncode == 2 and "has no bin/spack" in proc.stderr


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "variable, message",
    [
        ("SITEBENCH_MIRROR", "does not exist"),
        ("SITEBENCH_SPACK_PACKAGES", "not a spack-packages checkout"),
    ],
)
def test_bad_overrides_are_refused(tmp_path, variable, message):
    bindir = fake_spack(tmp_path, "1.1.0")
    env = {
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "SPACK_ROOT": "",
        variable: str(tmp_path / "not-there"),
    }
    proc = sitebench("spack", "--version", env=env)
    assert proc.returncode == 2
    assert variable in proc.stderr and message in proc.stderr


@pytest.mark.reliability_input
def test_clone_failure_names_the_override(tmp_path):
    proc = sitebench(
        "spack",
        "--version",
        env={
            "PATH": without_spack_path(),
            "SPACK_ROOT": "",
            "SITEBENCH_STATE_DIR": str(tmp_path / "state"),
            "SITEBENCH_SPACK_GIT": str(tmp_path / "no-such-repo"),
        },
    )
    assert proc.returncode == 2
    assert "could not clone Spack v1.1.0" in proc.stderr and "SITEBENCH_SPACK_GIT" in proc.stderr
    assert not (tmp_path / "state/spack").exists()  # no half clone left as if good


@pytest.mark.reliability_fault
@pytest.mark.spack
def test_cloned_at_the_pinned_release_once_by_two_first_commands_at_once(tmp_path, spack):
    """Two first commands of a checkout at once (two terminals, the suite's workers) clone
    and configure Spack one after the other (a lock in pinned.setup): without it both
    cloned into the same `.partial` directory and one failed, "File exists"."""
    source = os.environ.get("SITEBENCH_SPACK_GIT")
    if not source:
        pytest.skip("SITEBENCH_SPACK_GIT not set: cloning from GitHub is not tested offline")
    state = tmp_path / "state"
    env = {"PATH": without_spack_path(), "SPACK_ROOT": "", "SITEBENCH_STATE_DIR": str(state)}
    both = [
        subprocess.Popen(
            [sys.executable, "-m", "sitebench", "spack", "--version"],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=600) for proc in both]
    for proc, (out, err) in zip(both, outputs):
        assert proc.returncode == 0, err
        assert out.startswith("1.1.0")
    clones = [err.count("==> cloning Spack") for _, err in outputs]
    assert sorted(clones) == [0, 1], outputs

    def commit(repo, ref):
        return subprocess.run(
            ["git", "-C", str(repo), "rev-parse", f"{ref}^{{commit}}"],
            capture_output=True,
            text=True,
        ).stdout.strip()

    assert commit(state / "spack", "HEAD") == commit(source, "v1.1.0") != ""


@pytest.mark.spack
def test_isolated_from_the_users_spack_config(tmp_path, spack):
    home = tmp_path / "home"
    (home / ".spack").mkdir(parents=True)
    (home / ".spack/config.yaml").write_text("config:\n  build_jobs: 4321\n")
    env = spack.environ({**os.environ, "HOME": str(home)})
    out = subprocess.run(
        [spack.executable, "config", "blame", "config"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "4321" not in out and str(home) not in out
    assert str(spack.config_dir) in out  # our scope is the one in use
    # A plain spack (no isolation) does see it: the test can tell the difference.
    plain_env = {k: v for k, v in env.items() if k != "SPACK_USER_CONFIG_PATH"}
    plain = subprocess.run(
        [spack.executable, "-C", str(spack.config_dir), "config", "get", "config"],
        env=plain_env,
        capture_output=True,
        text=True,
    )
    assert "build_jobs: 4321" in plain.stdout


@pytest.mark.spack
def test_recipes_pass_spack_audit_and_style(spack):
    env_dir = ROOT / "environments/local"
    names = [p.parent.name.replace("_", "-") for p in RECIPES]
    assert {
        "stream",
        "hpl",
        "npb",
        "parsec-benchmark",
        "osu-micro-benchmarks",
        "sitebench-suite",
    } <= set(names)
    audit = spack.run("-e", env_dir, "audit", "packages", *names, capture=True, check=False)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "PKG-DIRECTIVES: passed" in audit.stdout
    # mypy is skipped: `spack style` runs it over Spack's own core, not over these files.
    style = spack.run(
        "style", "--root", spack.resolve_root(), "-s", "mypy", *RECIPES, capture=True, check=False
    )
    assert style.returncode == 0, style.stdout + style.stderr
    assert "spack style checks were clean" in style.stdout + style.stderr


@pytest.mark.spack
def test_local_environment_concretizes_once(spack, monkeypatch):
    local_site.detect(spack)
    # As a plain run leaves them (its validation): a run that named a `default: false`
    # toolchain earlier in this checkout had added it to the matrix.
    monkeypatch.setenv(toolchains.SELECTED, "")
    toolchains.write_spack_files(toolchains.load(LOCAL), local_site.spack_dir())
    version = spack.version()
    builtin = spack_mod.builtin_repo()
    env_dir = environment.ensure_concretized(
        spack, LOCAL.environment_dir, LOCAL.config_dir, version, builtin
    )
    lock = json.loads((env_dir / "spack.lock").read_text())
    specs = {s["name"]: s for s in lock["concrete_specs"].values()}
    benchmarks = {
        "stream+openmp",
        "hpl",
        "npb implementation=mpi",
        "parsec-benchmark",
        "sysbench+mysql",
        "mariadb",
        "osu-micro-benchmarks@git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0=7.2",
        "jacobi3d",
        "mpi-ring",
        "memaccess",
        "gadget2",
    }
    # Every benchmark crossed with every toolchain a plain run takes (the spec matrix), as
    # Spack expands it: a `default: false` one (Clang, where installed) is not built.
    declared = toolchains.selected(toolchains.load(LOCAL), [])
    roots = [
        (r["spec"].split(" %[")[0], toolchain_roots.parts_of(r["spec"])) for r in lock["roots"]
    ]
    # Outside the matrix, one build: the Java ping-pong (MPJ uses no toolchain's MPI).
    roots.remove(("java-pingpong+ompi", {}))
    assert sorted(roots, key=str) == sorted(
        ((b, {**t.compilers, "mpi": t.mpi}) for b in benchmarks for t in declared),
        key=str,
    )
    # A benchmark that uses MPI is built once per MPI, one that does not is shared.
    hashes = {}
    for root in lock["roots"]:
        hashes.setdefault(root["spec"].split(" %[")[0], set()).add(root["hash"])
    assert len(hashes["hpl"]) == len({t.mpi for t in declared})
    assert len(hashes["stream+openmp"]) == 1
    # The database server and the MPI are the machine's own, never built.
    assert specs["mariadb"].get("external")
    stream = specs["stream"]
    topology = json.loads(local_site.topology_file().read_text())
    llc = last_level_cache_bytes(topology)
    assert int(stream["parameters"]["stream_array_size"]) * 8 >= 4 * llc
    assert stream["parameters"]["openmp"] is True
    assert specs["openblas"].get("external") and specs["openmpi"].get("external")
    # Reused, not redone, while nothing changed.
    mtime = (env_dir / "spack.lock").stat().st_mtime_ns
    environment.ensure_concretized(
        spack, LOCAL.environment_dir, LOCAL.config_dir, version, builtin
    )
    assert (env_dir / "spack.lock").stat().st_mtime_ns == mtime


@pytest.mark.spack
@pytest.mark.slow
def test_real_build_from_the_mirror(tmp_path, spack):
    """Build HPL and STREAM into a fresh install tree: sources from the mirror, checksummed.
    The one test that builds from source on purpose (`--use-buildcache package:never`):
    every other takes what the machine's binary cache holds; their dependencies may too."""
    local_site.detect(spack)
    env_dir = environment.ensure_concretized(
        spack, LOCAL.environment_dir, LOCAL.config_dir, spack.version(), spack_mod.builtin_repo()
    )
    roots = toolchain_roots.roots(env_dir)
    wanted = [f"/{h}" for name, _, h in roots if name == "hpl"][:1]
    wanted += [f"/{h}" for name, _, h in roots if name == "stream"][:1]
    assert len(wanted) == 2, roots
    tree = tmp_path / "store"
    proc = spack.run(
        "-c",
        f"config:install_tree:root:{tree}",
        "-e",
        env_dir,
        "install",
        "--use-buildcache",
        "package:never,dependencies:auto",
        *wanted,
        capture=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    built = proc.stdout + proc.stderr
    assert "Extracting hpl" not in built and "Extracting stream" not in built
    xhpl = next(tree.rglob("bin/xhpl"))
    stream_exe = next(tree.rglob("bin/stream_c.exe"))
    needed = subprocess.run(["readelf", "-d", str(xhpl)], capture_output=True, text=True).stdout
    assert "libopenblas" in needed and "libmpi" in needed  # the BLAS the spec asked for
    args = (xhpl.parent.parent / ".spack/spack-configure-args.txt").read_text()
    assert "CC=" in args and "mpicc" in args
    flags = spack.run("-e", env_dir, "spec", "--format", "{target}", "hpl", capture=True).stdout
    if "x86_64_v4" in flags or "avx512" in flags:
        assert "-mavx512f" in args
    assert os.access(stream_exe, os.X_OK)


@pytest.mark.reliability_input
@pytest.mark.spack
def test_checksum_is_enforced(tmp_path, spack):
    mirror = os.environ.get("SITEBENCH_MIRROR")
    if not mirror:
        pytest.skip("SITEBENCH_MIRROR not set: no local mirror to corrupt")
    mirror = mirror.removeprefix("file://")
    bad = tmp_path / "mirror"
    shutil.copytree(mirror, bad, symlinks=True)
    tarball = next((bad / "_source-cache/archive").rglob("977651ff*.tar.gz"))  # stream 5.10
    tarball.unlink()
    tarball.write_bytes(b"not the STREAM sources")
    proc = spack.run(
        "-c",
        f"config:install_tree:root:{tmp_path / 'store'}",
        "-c",
        f"config:source_cache:{tmp_path / 'cache'}",
        "-C",
        only_mirror_scope(tmp_path, bad),
        "-e",
        ROOT / "environments/local",
        "install",
        "stream",
        capture=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "sha256 checksum failed" in proc.stdout + proc.stderr


@pytest.mark.spack
def test_mirror_of_a_site_serves_an_offline_install(tmp_path, spack):
    """`sitebench mirror` copies every source of the environment; a fetch needs nothing else."""
    from sitebench.run import runner
    from sitebench.spack import mirror

    site = Site.resolve("local")
    saved = site.spack_config_dir / "mirrors.yaml"
    before = saved.read_text() if saved.is_file() else None
    try:
        prepared = runner.prepare(site)
        url = mirror.create(
            prepared.spack, prepared.env_dir, tmp_path / "mirror", saved, "sitebench-local", False
        )
        written = yaml.safe_load(saved.read_text())
        assert written["mirrors"]["sitebench-local"]["url"] == url
    finally:
        if before is None:
            saved.unlink(missing_ok=True)
        else:
            saved.write_text(before)
    archives = {
        p.name.split(".")[0]
        for p in (tmp_path / "mirror/_source-cache/archive").rglob("*")
        if p.is_file()
    }
    lock = json.loads((ROOT / "environments/local/spack.lock").read_text())
    wanted = {s["name"] for s in lock["concrete_specs"].values() if not s.get("external")}
    assert {"stream", "hpl", "compiler-wrapper"} <= wanted
    for path in (tmp_path / "mirror/_source-cache/archive").rglob("*.tar.gz"):
        assert (
            subprocess.run(
                ["sha256sum", str(path)], capture_output=True, text=True
            ).stdout.split()[0]
            == path.name.split(".")[0]
        )
    assert len(archives) >= 3  # stream, hpl, compiler-wrapper
    # Only this mirror and an empty source cache: every source STREAM's install needs is
    # fetched from it, checksums verified. (Building from sources is one test's job,
    # test_real_build_from_the_mirror; the others take binaries from the machine cache.)
    proc = spack.run(
        "-c",
        f"config:source_cache:{tmp_path / 'cache'}",
        "-C",
        only_mirror_scope(tmp_path, tmp_path / "mirror"),
        "-e",
        ROOT / "environments/local",
        "fetch",
        "--dependencies",
        "stream",
        capture=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    fetched = {p.name for p in (tmp_path / "cache").rglob("*.tar.gz")}
    assert any(name.startswith("977651ff") for name in fetched), fetched  # stream 5.10


@pytest.mark.spack
def test_suite_bundle_concretizes_with_every_benchmark(tmp_path, spack):
    """`sitebench-suite` pulls the whole suite against the local site's externals."""
    from sitebench.discovery import local_site

    local_site.detect(spack)
    env_dir = local_site.write_environment(tmp_path / "env", ["sitebench-suite"])
    spack.run("-e", env_dir, "concretize", "--fresh", capture=True)
    lock = json.loads((env_dir / "spack.lock").read_text())
    specs = {s["name"]: s for s in lock["concrete_specs"].values()}
    for name in (
        "stream",
        "hpl",
        "npb",
        "parsec-benchmark",
        "sysbench",
        "mariadb",
        "osu-micro-benchmarks",
        "jacobi3d",
        "mpi-ring",
        "memaccess",
    ):
        assert name in specs, f"{name} missing from sitebench-suite"
    assert specs["mariadb"].get("external") and specs["openmpi"].get("external")
    assert specs["stream"]["namespace"] == specs["hpl"]["namespace"] == "sitebench"
    assert specs["npb"]["parameters"]["classes"] == ["A", "B", "C", "S", "W"]
    # The environment's OSU commit, which the site's mirror holds, not an upstream tarball.
    osu = specs["osu-micro-benchmarks"]
    assert osu["version"] == "7.2-b7fc8c5", osu["version"]
    assert osu["parameters"]["commit"] == "b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0"
    bundle_sources_are_in_the_mirror(spack, tmp_path, env_dir)


def bundle_sources_are_in_the_mirror(spack, tmp_path, env_dir):
    """Every source of the concretized bundle is in $SITEBENCH_MIRROR, or is a file of
    spack-repo/ (sitebench's own kernels, fetched from the checkout)."""
    mirror = os.environ.get("SITEBENCH_MIRROR", "").removeprefix("file://")
    if not mirror:
        pytest.skip("NO SOURCE MIRROR: set SITEBENCH_MIRROR to check the bundle's sources")
    copy = tmp_path / "copy"
    # Spack copies every source from the only mirror it is given, as an install would fetch.
    spack.run(
        "-C", only_mirror_scope(tmp_path, mirror), "-e", env_dir,
        "mirror", "create", "--all", "-d", copy, capture=True,
    )  # fmt: skip
    ours = {
        hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (ROOT / "spack-repo").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    copied = [p for p in (copy / "_source-cache").rglob("*") if p.is_file()]
    assert copied
    for path in copied:
        rel = path.relative_to(copy)
        held = Path(mirror) / rel
        if held.is_file():
            assert held.read_bytes() == path.read_bytes(), rel
        else:
            assert (
                hashlib.sha256(path.read_bytes()).hexdigest() in ours
            ), f"{rel} is neither in the mirror {mirror} nor a file of spack-repo/"


@pytest.mark.spack
@pytest.mark.slow
def test_hpl_links_the_blas_its_spec_names(tmp_path, spack):
    """level=1 runs on the reference BLAS, not on whatever BLAS the system has first."""
    from conftest import build_in_temp_env

    tree = build_in_temp_env(spack, tmp_path, ["hpl level=1"])
    xhpl = next(tree.rglob("bin/xhpl"))
    ldd = subprocess.run(["ldd", str(xhpl)], capture_output=True, text=True).stdout
    assert "libopenblas" not in ldd, ldd
    blas = next(line for line in ldd.splitlines() if "libblas.so.3" in line)
    # Resolved through the RPATH to the reference library, not the system alternative.
    assert "netlib-lapack" in blas or "/blas/" in blas, blas
    configure = (xhpl.parent.parent / ".spack/spack-configure-args.txt").read_text()
    assert "-O0" in configure and "-mno-avx" in configure
