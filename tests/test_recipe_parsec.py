"""PARSEC 3.0 blackscholes and fluidanimate: the mirror holds the pinned sources, the recipe
builds them from it, and small real cases run and give right answers."""

import hashlib
import json
import math
import os
import re
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import ROOT, build_in_temp_env
from sitebench.discovery import local_site

RECIPE = ROOT / "spack-repo/spack_repo/sitebench/packages/parsec_benchmark/package.py"
COMMIT = "6e9fdffb9263c24c6af6b3501f9ae6f8e2d91c8c"  # connorimes/parsec-3.0, PARSEC 3.0
# Git object ids in that commit: what the mirror's archive must contain, and nothing else.
# (Spack cannot check a git source taken from a mirror: it has no tree hash.)
TREES = {
    "pkgs/apps/blackscholes": "da995de0f3036a7ddc1d42d5abd33f6f40755321",
    "pkgs/apps/fluidanimate": "0b02a16e0576bc23a5c8f8dd2e44040f66d6181e",
    "pkgs/libs/hooks": "37d8b5c38db7e35bcd4398474a95726cd1557ca1",
}
TOP_FILES = {  # git sparse checkout (cone mode) brings the top-level files along
    ".parsec_uniquefile": "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
    "CHANGELOG": "7bafa0023bb7e6e7d15b5ff160c52c44df9a876d",
    "CONTRIBUTORS": "7e7c2b46c1a98b66d0886ebadb0dda75b7e854bc",
    "FAQ": "5663e90478b4d13dbce870c9f04c56fb522bf4b6",
    "LICENSE": "fd10f10ae4dd38f51c6d8082d9b55ec24f21a571",
    "README": "c82bbbb4dbbf7b0f1da963d9d900ad6ff33d7348",
    "env.sh": "077f2dcc2b5e87b074d370ec5c0e96fc1c62feb9",
    "version": "091511e080c475c792f02fb2a96ccea9aa8f57a6",
}
GIT_ARCHIVE = (
    f"_source-cache/git/connorimes/parsec-3.0.git/{COMMIT}_"
    "243484b9afb1b7e8a925e4f5634c23c140e21612.tar.gz"
)
# fluidanimate inputs from Multi2Sim/m2s-bench-parsec-3.0 @ afc7d27d: sha256, particles.
M2S_INPUTS = {
    "in_35K.fluid": ("0a649e52c616ee52ef24038b1d4dae316520f517c122f45fa16755b761ada5a6", 36504),
    "in_100K.fluid": ("40bf640c419080111ee44a9946545489e695b4b8cf2ac5f7b280de365714294e", 102850),
}
CORE_INPUTS = {"in_5K.fluid": 4800, "in_15K.fluid": 15138}  # from the PARSEC sources
# sha256 of Multi2Sim's blackscholes/data-small/in_4K.txt (the PARSEC simsmall input).
IN_4K_SHA256 = "d918de616ed1956757f19b25e27c6b1a27fbab560a058c5de1e9d479fa331c64"
VERSION_LINE = "PARSEC Benchmark Suite Version 3.0-beta-20150206"
ROI = re.compile(r"^\[HOOKS\] Total time spent in ROI: (\d+\.\d+)s$", re.M)
# fluidanimate's simulation box (pthreads.cpp domainMin/domainMax).
DOMAIN = ((-0.065, 0.065), (-0.08, 0.1), (-0.065, 0.065))


def mirror_dir():
    mirror = os.environ.get("SITEBENCH_MIRROR")
    if not mirror:
        pytest.skip("SITEBENCH_MIRROR not set: no local source mirror to check")
    return Path(mirror.removeprefix("file://"))


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def git_hash(kind, body):
    return hashlib.sha1(b"%s %d\0" % (kind, len(body)) + body).hexdigest()


def git_tree(node):
    """Git tree id of a nested dict {name: (mode, bytes) | dict}, as `git write-tree` makes."""
    entries = []
    for name, item in node.items():
        if isinstance(item, dict):
            entries.append((name + "/", b"40000", name, git_tree(item)))
        else:
            mode, data = item
            entries.append((name, mode, name, git_hash(b"blob", data)))
    body = b"".join(
        mode + b" " + name.encode() + b"\0" + bytes.fromhex(oid)
        for _, mode, name, oid in sorted(entries, key=lambda e: e[0].encode())
    )
    return git_hash(b"tree", body)


def read_fluid(path):
    """(rest particles per metre, particle count, 9 floats per particle) of a .fluid file."""
    data = Path(path).read_bytes()
    ppm, count = struct.unpack("<fi", data[:8])
    assert len(data) == 8 + 36 * count, f"{path}: {len(data)} bytes for {count} particles"
    return ppm, count, struct.unpack(f"<{9 * count}f", data[8:])


def test_mirror_archive_is_the_pinned_commit():
    """The source archive in the mirror holds exactly the pinned commit's trees (no Spack)."""
    archive = mirror_dir() / GIT_ARCHIVE
    if not archive.is_file():
        pytest.fail(f"{archive} missing: the PARSEC sources are not in the mirror")
    root = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            top, _, rest = member.name.partition("/")
            assert top == "parsec-3.0", member.name  # one top directory, as Spack makes it
            if not member.isfile():
                assert member.isdir(), f"{member.name}: not a file or directory"
                continue
            *dirs, name = rest.split("/")
            node = root
            for d in dirs:
                node = node.setdefault(d, {})
            mode = b"100755" if member.mode & 0o100 else b"100644"
            node[name] = (mode, tar.extractfile(member).read())
    assert {
        k: git_hash(b"blob", v[1]) for k, v in root.items() if isinstance(v, tuple)
    } == TOP_FILES
    assert set(root) == set(TOP_FILES) | {"pkgs"}
    assert set(root["pkgs"]) == {"apps", "libs"}
    assert set(root["pkgs"]["apps"]) == {"blackscholes", "fluidanimate"}
    assert set(root["pkgs"]["libs"]) == {"hooks"}
    for path, oid in TREES.items():
        node = root
        for part in path.split("/"):
            node = node[part]
        assert git_tree(node) == oid, path


def test_mirror_inputs_match_the_recipe():
    """Each fluidanimate input file is in the mirror at its digest path, pinned in the recipe."""
    recipe = RECIPE.read_text()
    for name, (digest, particles) in M2S_INPUTS.items():
        assert f'"{digest}"' in recipe and f'"{name}"' in recipe
        path = mirror_dir() / "_source-cache/archive" / digest[:2] / digest
        assert path.is_file(), f"{path} missing"
        assert sha256(path) == digest
        _, count, _ = read_fluid(path)
        assert count == particles
    assert f'_COMMIT = "{COMMIT}"' in recipe


@pytest.mark.spack
def test_spack_looks_for_the_sources_where_the_mirror_has_them(tmp_path, spack):
    """Spack's own mirror layout for this recipe names the files the mirror holds."""
    scope = tmp_path / "scope"
    scope.mkdir()
    (scope / "repos.yaml").write_text(
        f"repos:\n  sitebench: {ROOT / 'spack-repo/spack_repo/sitebench'}\n"
    )
    script = tmp_path / "paths.py"
    script.write_text(
        "import json\n"
        "import spack.fetch_strategy as fs, spack.mirrors.layout as layout, spack.repo\n"
        "from spack.version import Version\n"
        "cls = spack.repo.PATH.get_pkg_class('parsec-benchmark')\n"
        "git = fs.GitFetchStrategy(git=cls.git, **cls.versions[Version('3.0')])\n"
        "paths = {'source': layout.default_mirror_layout(git, 'x').path}\n"
        "for rs in cls.resources.values():\n"
        "    for r in rs:\n"
        "        paths[r.name] = layout.default_mirror_layout(r.fetcher, 'x').path\n"
        "print(json.dumps(paths))\n"
    )
    proc = spack.run("-C", scope, "python", script, capture=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    paths = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(paths.pop("source")) == Path(GIT_ARCHIVE)
    expected = {
        f"fluidanimate-{s}": Path("_source-cache/archive", d[:2], d)
        for s, (d, _) in zip(("simsmall", "simmedium"), M2S_INPUTS.values())
    }
    assert {k: Path(v) for k, v in paths.items()} == expected
    for path in expected.values():
        assert (mirror_dir() / path).is_file()


@pytest.mark.spack
def test_unavailable_inputs_are_refused_with_a_reason(tmp_path, spack):
    local_site.detect(spack)
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / "spack.yaml").write_text(
        "spack:\n"
        f"  include: [{local_site.spack_dir()}]\n"
        f"  repos:\n    sitebench: {ROOT / 'spack-repo/spack_repo/sitebench'}\n"
        "  specs: []\n  view: false\n"
    )
    proc = spack.run(
        "-e", env_dir, "spec", "parsec-benchmark inputs=test,simlarge", capture=True, check=False
    )
    assert proc.returncode != 0
    assert "simlarge (in_300K.fluid" in proc.stdout + proc.stderr
    assert "available input sets: test, simdev, simsmall, simmedium" in proc.stdout + proc.stderr


def run(cmd, cwd):
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    return proc


class _FreshSourceCache:
    """The session's Spack, with a private source cache: sources come from the mirror."""

    def __init__(self, spack, cache):
        self._spack, self._cache = spack, cache

    def run(self, *args, **kwargs):
        return self._spack.run("-c", f"config:source_cache:{self._cache}", *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._spack, name)


@pytest.mark.spack
@pytest.mark.slow
def test_build_from_the_mirror_and_run_small_cases(tmp_path, spack):
    tree = build_in_temp_env(
        _FreshSourceCache(spack, tmp_path / "cache"), tmp_path, ["parsec-benchmark"]
    )
    prefix = next(tree.rglob("bin/blackscholes")).parent.parent
    bin_ = prefix / "bin"
    assert {p.name for p in bin_.iterdir()} == {
        "blackscholes",
        "inputgen",
        "fluidanimate",
        "fluidcmp",
    }
    log = subprocess.run(
        ["gzip", "-dc", str(prefix / ".spack/spack-build-out.txt.gz")],
        capture_output=True,
        text=True,
    ).stdout
    for flags in (
        "-O3 -g -funroll-loops -fprefetch-loop-arrays -fpermissive -fno-exceptions",
        "-DPARSEC_VERSION=3.0-beta-20150206 -DENABLE_PARSEC_HOOKS",
        "-pthread -DENABLE_THREADS -DNCO=4",
        "-lhooks -o fluidanimate",
    ):
        assert flags in log, flags

    inputs = prefix / "share/parsec-benchmark/inputs/fluidanimate"
    assert {p.name for p in inputs.iterdir()} == set(M2S_INPUTS) | set(CORE_INPUTS)
    for name, (digest, _) in M2S_INPUTS.items():
        assert sha256(inputs / name) == digest
    for name, particles in CORE_INPUTS.items():
        assert read_fluid(inputs / name)[1] == particles

    # blackscholes: PARSEC's simsmall input, generated, at 1 and 2 threads.
    work = tmp_path / "run"
    work.mkdir()
    proc = run([bin_ / "inputgen", 4096, "in_4K.txt"], work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sha256(work / "in_4K.txt") == IN_4K_SHA256  # byte-identical to PARSEC's in_4K.txt
    options = (work / "in_4K.txt").read_text().splitlines()
    reference = [float(line.split()[8]) for line in options[1:]]  # DerivaGem values
    prices = {}
    for threads in (1, 2):
        proc = run([bin_ / "blackscholes", threads, "in_4K.txt", f"prices_{threads}.txt"], work)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert VERSION_LINE in proc.stdout and "Num of Options: 4096" in proc.stdout
        roi = ROI.search(proc.stdout)
        assert roi and float(roi.group(1)) > 0, proc.stdout
        lines = (work / f"prices_{threads}.txt").read_text().split()
        assert lines[0] == "4096" and len(lines) == 4097
        prices[threads] = [float(x) for x in lines[1:]]
    assert prices[1] == prices[2]  # each option is priced by one thread: same numbers
    # blackscholes' own check (-DERR_CHK) flags a price 1e-4 or more off the reference.
    assert max(abs(p - r) for p, r in zip(prices[1], reference)) < 1e-4

    # fluidanimate: simsmall (PARSEC runs it for 5 frames) at 1 and 2 threads.
    for threads in (1, 2):
        out = work / f"out_{threads}.fluid"
        proc = run([bin_ / "fluidanimate", threads, 5, inputs / "in_35K.fluid", out], work)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert VERSION_LINE in proc.stdout and "Number of particles: 36504" in proc.stdout
        assert f'Saving file "{out}"...' in proc.stdout
        roi = ROI.search(proc.stdout)
        assert roi and float(roi.group(1)) > 0, proc.stdout
        ppm, count, values = read_fluid(out)
        assert (ppm, count) == (392.0, 36504)
        assert all(math.isfinite(v) for v in values)
        for axis, (low, high) in enumerate(DOMAIN):  # the particles stayed in the box
            coords = values[axis::9]
            assert low - 1e-6 <= min(coords) and max(coords) <= high + 1e-6, (axis, threads)
    assert read_fluid(out)[2] != read_fluid(inputs / "in_35K.fluid")[2]  # it moved them

    proc = run([bin_ / "fluidanimate", 3, 1, inputs / "in_5K.fluid", "three.fluid"], work)
    assert proc.returncode != 0 and "Number of threads must be a power of 2" in proc.stderr
