"""Toolchains: declared, made Spack toolchains and ReFrame environments, each MPI in a
prefix of its own, and a benchmark's root found per toolchain in spack.lock."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sitebench.common.errors import SitebenchError
from sitebench.sites import toolchains
from sitebench.discovery import local_site, mpi_prefix
from sitebench.spack import toolchain_roots

GCC = {"c": "gcc", "cxx": "gcc", "fortran": "gcc"}
TWO = [
    {"name": "gcc-openmpi", **GCC, "mpi": "openmpi"},
    {"name": "gcc-mpich", **GCC, "mpi": "mpich"},
]


def test_two_toolchains_parsed_in_order_with_defaults():
    found, problems = toolchains.parse(
        TWO + [{"name": "clang-openmpi", "c": "llvm", "fortran": "gcc", "mpi": "openmpi"}], "f"
    )
    assert problems == []
    assert [t.name for t in found] == ["gcc-openmpi", "gcc-mpich", "clang-openmpi"]
    # cxx defaults to c; Debian's clang has no Fortran, so it is named
    assert found[2].compilers == {"c": "llvm", "cxx": "llvm", "fortran": "gcc"}


@pytest.mark.parametrize(
    "item, key, words",
    [
        ({"name": "x", "c": "gcc", "mpi": "openmpi", "cc": "gcc"}, "toolchains[0].cc", "unknown"),
        ({"name": "x", "c": "gcc"}, "toolchains[0].mpi", "mpi is missing"),
        ({"c": "gcc", "mpi": "openmpi"}, "toolchains[0].name", "name is missing"),
        ({"name": "a/b", "c": "gcc", "mpi": "openmpi"}, "toolchains[0].name", "invalid"),
        ({"name": "x", "c": "", "mpi": "openmpi"}, "toolchains[0].c", "Spack package name"),
        (
            {"name": "x", "c": "gcc", "mpi": "openmpi", "launcher": "aprun"},
            "toolchains[0].launcher",
            "not one sitebench runs",
        ),
        ({"name": "x", "c": "gcc", "mpi": "cray-mpich"}, "toolchains[0].launcher", "no launcher"),
    ],
)
def test_bad_toolchain_named_with_key_and_fix(item, key, words):
    found, problems = toolchains.parse([item], "site-configs/s/site.yaml")
    assert found == []
    assert problems and problems[0][0] == key, problems
    assert words in problems[0][1] and problems[0][1].startswith("site-configs/s/site.yaml")
    assert problems[0][2]  # a fix


def test_duplicate_and_empty_refused():
    _found, problems = toolchains.parse(TWO + [TWO[1]], "f")
    assert problems[0][0] == "toolchains[2].name" and "declared twice" in problems[0][1]
    assert toolchains.parse([], "f")[1][0][0] == "toolchains"
    # an MPI sitebench does not know the launcher of is fine once the launcher is named
    assert (
        toolchains.parse(
            [{"name": "c", "c": "cce", "mpi": "cray-mpich", "launcher": "srun"}], "f"
        )[1]
        == []
    )


def test_selected_in_declared_order_and_unknown_refused(monkeypatch):
    found, _ = toolchains.parse(TWO, "f")
    assert [t.name for t in toolchains.selected(found, ["gcc-mpich"])] == ["gcc-mpich"]
    monkeypatch.setenv(toolchains.SELECTED, "gcc-mpich,gcc-openmpi")
    assert [t.name for t in toolchains.selected(found)] == ["gcc-openmpi", "gcc-mpich"]
    with pytest.raises(SitebenchError) as err:
        toolchains.selected(found, ["intel-impi"])
    assert "intel-impi" in err.value.problem and "gcc-openmpi, gcc-mpich" in err.value.fix


def test_spack_toolchains_apply_each_part_only_where_used(tmp_path):
    found, _ = toolchains.parse(TWO, "f")
    files = toolchains.spack_files(found)
    tcs = yaml.safe_load(files["toolchains.yaml"])["toolchains"]
    assert tcs["gcc-mpich"] == [
        {"spec": "%c=gcc", "when": "%c"},
        {"spec": "%cxx=gcc", "when": "%cxx"},
        {"spec": "%fortran=gcc", "when": "%fortran"},
        {"spec": "%mpi=mpich", "when": "%mpi"},
    ]
    assert yaml.safe_load(files["definitions.yaml"]) == {
        "definitions": [{"toolchains": ["%gcc-openmpi", "%gcc-mpich"]}]
    }
    assert sorted(toolchains.write_spack_files(found, tmp_path)) == [
        "definitions.yaml",
        "toolchains.yaml",
    ]
    assert toolchains.write_spack_files(found, tmp_path) == []  # unchanged: not rewritten


def test_a_toolchain_not_taken_by_default_is_built_only_when_named(monkeypatch):
    clang = {"name": "clang-openmpi", "c": "llvm", "fortran": "gcc", "mpi": "openmpi"}
    found, _ = toolchains.parse(TWO + [{**clang, "default": False}], "f")
    monkeypatch.setenv(toolchains.SELECTED, "")  # restored after select() below

    def built():
        return yaml.safe_load(toolchains.spack_files(found)["definitions.yaml"])

    # Spack knows all three; a plain run (or `spack install`) builds the two it runs
    assert list(
        yaml.safe_load(toolchains.spack_files(found)["toolchains.yaml"])["toolchains"]
    ) == [
        "gcc-openmpi",
        "gcc-mpich",
        "clang-openmpi",
    ]
    defaults = {"definitions": [{"toolchains": ["%gcc-openmpi", "%gcc-mpich"]}]}
    assert built() == defaults
    # naming a default one (the nightly per toolchain) leaves the matrix, so the lock, as is
    toolchains.select(["gcc-mpich"])
    assert built() == defaults
    for names in (["clang-openmpi"], [toolchains.ALL]):
        toolchains.select(names)
        assert built()["definitions"][0]["toolchains"] == [
            "%gcc-openmpi",
            "%gcc-mpich",
            "%clang-openmpi",
        ]


def _farm(tmp_path, mpi):
    bindir = tmp_path / mpi / "bin"
    bindir.mkdir(parents=True)
    (bindir / "mpirun").touch()
    return {"externals": [{"spec": f"{mpi}@1", "prefix": str(tmp_path / mpi)}]}


def test_reframe_environments_one_per_toolchain(tmp_path):
    found, _ = toolchains.parse(TWO, "f")
    packages = {"openmpi": _farm(tmp_path, "openmpi"), "mpich": _farm(tmp_path, "mpich")}
    envs = toolchains.reframe_environments(found, packages, [["A", "1"]])
    assert [e["name"] for e in envs] == ["gcc-openmpi", "gcc-mpich"]
    # the checks that use no MPI run once per compiler set: in the first toolchain of it
    assert toolchains.NO_MPI_CHECKS in envs[0]["features"]
    assert toolchains.NO_MPI_CHECKS not in envs[1]["features"]
    assert "mpi_mpich" in envs[1]["features"]
    assert envs[1]["env_vars"] == [["PATH", f"{tmp_path}/mpich/bin:$PATH"], ["A", "1"]]
    assert envs[1]["extras"] == {
        "mpi": "mpich",
        "compilers": GCC,
        "launcher": "mpirun",
        "omp_flag": "-fopenmp",  # ReFrame's convention (tests/test_reframe_conventions.py)
    }
    # restricted to MPICH, MPICH's toolchain runs them
    alone = toolchains.reframe_environments(found[1:], packages)
    assert toolchains.NO_MPI_CHECKS in alone[0]["features"]


def test_missing_compiler_or_mpi_or_launcher_refused(tmp_path):
    found, _ = toolchains.parse(
        TWO + [{"name": "clang-openmpi", "c": "llvm", "fortran": "gcc", "mpi": "openmpi"}], "f"
    )
    gcc = {"externals": [{"spec": "gcc@12", "extra_attributes": {"compilers": {**GCC}}}]}
    packages = {"gcc": gcc, "openmpi": _farm(tmp_path, "openmpi")}
    problems = toolchains.availability_problems(found, packages, "packages.yaml")
    keys = [p[0] for p in problems]
    assert keys == [
        "toolchains.gcc-mpich.mpi",
        "toolchains.clang-openmpi.c",
        "toolchains.clang-openmpi.cxx",
    ], problems
    assert "apt-get install mpich libmpich-dev" in problems[0][2]
    # an MPI external in a prefix without a launcher (Debian's /usr with the alternatives
    # removed, or a prefix pointing elsewhere)
    (tmp_path / "openmpi/bin/mpirun").unlink()
    problems = toolchains.availability_problems(found[:1], packages, "packages.yaml")
    assert problems and "holds no launcher" in problems[0][1]


#: Root specs as Spack 1.1 wrote them in this machine's spack.lock for a matrix of
#: [stream+openmp, hpl] x [%gcc-openmpi, %gcc-mpich] (unify: when_possible).
LOCK_ROOTS = [
    (
        "5qhxh44",
        "hpl %[when='%c'] c=gcc %[when='%cxx'] cxx=gcc %[when='%fortran'] fortran=gcc "
        "%[when='%mpi'] mpi=mpich",
    ),
    (
        "dp3t4x4",
        "hpl %[when='%c'] c=gcc %[when='%cxx'] cxx=gcc %[when='%fortran'] fortran=gcc "
        "%[when='%mpi'] mpi=openmpi",
    ),
    (
        "waat5hl",
        "stream+openmp %[when='%c'] c=gcc %[when='%cxx'] cxx=gcc %[when='%fortran'] "
        "fortran=gcc %[when='%mpi'] mpi=mpich",
    ),
    (
        "waat5hl",
        "stream+openmp %[when='%c'] c=gcc %[when='%cxx'] cxx=gcc %[when='%fortran'] "
        "fortran=gcc %[when='%mpi'] mpi=openmpi",
    ),
    ("osu1234", "osu-micro-benchmarks@git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0=7.2"),
]


def _lock(tmp_path, roots):
    import json

    (tmp_path / "spack.lock").write_text(
        json.dumps({"roots": [{"hash": h, "spec": s} for h, s in roots]})
    )
    return tmp_path


def test_root_found_per_toolchain_in_the_lock(tmp_path):
    env = _lock(tmp_path, LOCK_ROOTS)
    mpich = {"mpi": "mpich", "compilers": GCC}
    openmpi = {"mpi": "openmpi", "compilers": GCC}
    assert toolchain_roots.root_for(env, "hpl", mpich) == "5qhxh44"
    assert toolchain_roots.root_for(env, "hpl", openmpi) == "dp3t4x4"
    # what uses no MPI is one build for both
    assert toolchain_roots.root_for(env, "stream", mpich) == "waat5hl"
    assert toolchain_roots.root_for(env, "stream", openmpi) == "waat5hl"
    # a root without a toolchain (an environment of plain specs) is found by name instead
    assert toolchain_roots.root_for(env, "osu-micro-benchmarks", mpich) is None
    # a toolchain the lock has no root of is an error, never another toolchain's binary
    with pytest.raises(toolchain_roots.NoRootForToolchain) as err:
        toolchain_roots.root_for(env, "hpl", {"mpi": "mvapich", "compilers": GCC})
    assert "no hpl built with c=gcc cxx=gcc fortran=gcc mpi=mvapich" in str(err.value)
    assert "mpi=mpich" in str(err.value) and "--toolchain" in str(err.value)
    assert toolchain_roots.root_for(env, "hpl", {}) is None
    assert toolchain_roots.root_for(tmp_path / "nowhere", "hpl", mpich) is None


def test_an_environment_not_yet_concretized_is_concretized_before_its_root_is_chosen(tmp_path):
    """Plain reframe in a fresh checkout (no spack.lock): installing OSU by name made Spack
    concretize the environment and install both toolchains' OSU roots, and `spack find` of
    the name reported two ("spack did not report one installed osu-micro-benchmarks", twice
    on this VM in helper worktrees). The fixture concretizes first and installs its own
    root by hash."""
    openmpi = {"mpi": "openmpi", "compilers": GCC}
    env = tmp_path / "env"
    env.mkdir()
    osu = "osu-micro-benchmarks@7.2 " + " ".join(
        f"%[when='%{v}'] {v}=gcc" for v in ("c", "cxx", "fortran")
    )
    roots = [
        ("mp1ch00", f"{osu} %[when='%mpi'] mpi=mpich"),
        ("0penmp1", f"{osu} %[when='%mpi'] mpi=openmpi"),
    ]
    calls = []

    def concretize():
        calls.append(env)
        _lock(env, roots)

    target = toolchain_roots.install_target
    assert target(env, "osu-micro-benchmarks", openmpi, concretize) == "/0penmp1"
    assert calls == [env]
    # Concretized now: the lock is read, never concretized again.
    assert (
        target(env, "osu-micro-benchmarks", {"mpi": "mpich", "compilers": GCC}, concretize)
        == "/mp1ch00"
    )
    assert calls == [env]
    # Without a toolchain, or a lock of plain specs: the name, nothing concretized.
    plain = _lock(tmp_path, LOCK_ROOTS)
    assert target(plain, "osu-micro-benchmarks", openmpi, concretize) == "osu-micro-benchmarks"
    assert target(tmp_path / "nowhere", "hpl", {}, concretize) == "hpl" and calls == [env]


def test_two_versions_of_a_compiler_are_two_roots(tmp_path):
    """A site with GCC 12 and GCC 11 (modules): each toolchain finds its own root, never the
    other version's (both once took the first, and GCC 12's checks ran GCC 11's binary)."""
    part = "%[when='%{0}'] {0}={1}"
    spec = "osu-micro-benchmarks@7.2 " + " ".join(
        part.format(v, "{gcc}") for v in ("c", "cxx", "fortran")
    )
    spec += " " + part.format("mpi", "openmpi@4.1.4")
    env = _lock(
        tmp_path,
        [("old1111", spec.format(gcc="gcc@11.3.0")), ("new1222", spec.format(gcc="gcc@12.2.0"))],
    )

    def extras(version):
        return {
            "mpi": "openmpi@4.1.4",
            "compilers": dict.fromkeys(("c", "cxx", "fortran"), version),
        }

    assert toolchain_roots.root_for(env, "osu-micro-benchmarks", extras("gcc@12.2.0")) == "new1222"
    assert toolchain_roots.root_for(env, "osu-micro-benchmarks", extras("gcc@11.3.0")) == "old1111"
    with pytest.raises(toolchain_roots.NoRootForToolchain):
        toolchain_roots.root_for(env, "osu-micro-benchmarks", extras("gcc@10.4.0"))
    # Named without a version: any GCC's root, the first.
    assert toolchain_roots.root_for(env, "osu-micro-benchmarks", extras("gcc")) == "old1111"


def test_a_clang_toolchain_finds_its_root_under_the_name_spack_prints(tmp_path):
    """A toolchain names Clang ``llvm@14.0.6`` (Spack's package); the lock keeps the
    expansion as ``c=clang@14.0.6``. The Clang check once ran GCC 12's OSU instead."""
    part = "%[when='%{0}'] {0}={1}"
    gcc = " ".join(part.format(v, "gcc@12.2.0") for v in ("c", "cxx", "fortran"))
    clang = part.format("fortran", "gcc@12.2.0") + " " + part.format("c", "clang@14.0.6")
    clang += " " + part.format("cxx", "clang@14.0.6")
    mpi = " " + part.format("mpi", "openmpi@4.1.4")
    env = _lock(tmp_path, [("gcc1222", f"osu {gcc}{mpi}"), ("clang146", f"osu {clang}{mpi}")])
    compilers = {"c": "llvm@14.0.6", "cxx": "llvm@14.0.6", "fortran": "gcc@12.2.0"}
    extras = {"mpi": "openmpi@4.1.4", "compilers": compilers}
    assert toolchain_roots.root_for(env, "osu", extras) == "clang146"


def test_listed_install_by_hash(tmp_path):
    from sitebench.run.spack_build import listed_install

    table = tmp_path / "roots.txt"
    env = tmp_path / "env"
    env.mkdir()
    table.write_text(
        f"# {os.path.realpath(env)}\n"
        "/p/hpl-a\thpl@2.3 arch=x /5qhxh44full\n/p/hpl-b\thpl@2.3 arch=x /dp3t4x4full\n"
    )
    assert listed_install("/dp3t4x4full", env, table).startswith("/p/hpl-b")
    assert listed_install("/nothere", env, table) is None
    assert listed_install("hpl", env, table) is None  # two roots of hpl: ask Spack


needs_both_mpis = pytest.mark.skipif(
    not (shutil.which("mpicc.mpich") and shutil.which("mpicc.openmpi")),
    reason="Debian's two MPIs are not both installed (apt-get install mpich libmpich-dev "
    "openmpi-bin libopenmpi-dev)",
)


@needs_both_mpis
def test_each_mpi_gets_a_prefix_of_its_own(tmp_path):
    for mpi, lib in (("mpich", "libmpich.so"), ("openmpi", "libmpi.so")):
        farm = mpi_prefix.make(mpi, tmp_path / mpi)
        assert os.path.realpath(farm / "bin/mpicc") == os.path.realpath(f"/usr/bin/mpicc.{mpi}")
        assert (farm / "bin/mpirun").exists() and (farm / "include/mpi.h").is_file()
        assert (farm / "lib" / lib).exists()
    # MPICH's libraries live in the system directory: only its own are linked in
    names = {p.name.split(".so")[0] for p in (tmp_path / "mpich/lib").iterdir()}
    assert names == {"libmpich", "libmpichcxx", "libmpichfort"}
    assert not (tmp_path / "mpich/lib/libmpi.so").exists()
    assert mpi_prefix.make("mvapich", tmp_path / "mvapich") is None


@needs_both_mpis
def test_detection_proposes_gcc_with_each_mpi(tmp_path, monkeypatch):
    monkeypatch.setattr(local_site.paths, "state_dir", lambda: tmp_path)
    packages = {
        "gcc": {
            "externals": [
                {
                    "spec": "gcc@12.2.0",
                    "prefix": "/usr",
                    "extra_attributes": {
                        "compilers": {
                            "c": "/usr/bin/gcc",
                            "cxx": "/usr/bin/g++",
                            "fortran": "/usr/bin/gfortran",
                        }
                    },
                }
            ]
        },
        "openmpi": {"externals": [{"spec": "openmpi@4.1.4", "prefix": "/usr"}]},
        "mpich": {"externals": [{"spec": "mpich@4.0.2", "prefix": "/usr"}]},
    }
    assert local_site.own_mpi_prefixes(packages, [tmp_path / "externals"]) == []
    assert packages["mpich"]["externals"][0]["prefix"] == str(tmp_path / "externals/mpich")
    proposed, _notes = local_site.propose_toolchains(packages)
    assert [t["name"] for t in proposed] == ["gcc-openmpi", "gcc-mpich"]


def test_the_newest_gcc_on_path_makes_the_toolchains(tmp_path):
    """Debian's gcc-11 installed beside gcc (12) and found first: GCC 12's compilers are the
    ones probed (here /usr/bin/gcc-11 is not even installed: probing it proposed nothing)."""
    packages = {
        "gcc": {
            "externals": [
                {
                    "spec": f"gcc@{version}",
                    "prefix": "/usr",
                    "extra_attributes": {
                        "compilers": {
                            "c": f"/usr/bin/gcc{suffix}",
                            "cxx": f"/usr/bin/g++{suffix}",
                            "fortran": f"/usr/bin/gfortran{suffix}",
                        }
                    },
                }
                for version, suffix in (("11.3.0", "-11"), ("12.2.0", ""))
            ]
        },
        "openmpi": _farm(tmp_path, "openmpi"),
    }
    proposed, _notes = local_site.propose_toolchains(packages)
    assert [t["name"] for t in proposed] == ["gcc-openmpi"]
    assert local_site.compiles_openmp("gcc")


def test_clang_without_openmp_not_proposed(tmp_path):
    if not shutil.which("clang"):
        pytest.skip("clang is not installed (apt-get install clang)")
    openmp = local_site.compiles_openmp("clang")
    packages = {
        "llvm": {
            "externals": [
                {
                    "spec": "llvm@14",
                    "extra_attributes": {
                        "compilers": {"c": "/usr/bin/clang", "cxx": "/usr/bin/clang++"}
                    },
                }
            ]
        },
        "gcc": {
            "externals": [
                {"spec": "gcc@12", "extra_attributes": {"compilers": {"fortran": "gfortran"}}}
            ]
        },
        "openmpi": _farm(tmp_path, "openmpi"),
    }
    proposed, notes = local_site.propose_toolchains(packages)
    if openmp:
        assert proposed[0] == {
            "name": "clang-openmpi",
            "c": "llvm",
            "cxx": "llvm",
            "fortran": "gcc",
            "mpi": "openmpi",
        }
    else:
        assert proposed == [] and "libomp-dev" in notes[0]
    # the probe itself: a compiler that cannot link OpenMP is told apart
    assert local_site.compiles_openmp("gcc") is (shutil.which("gcc") is not None)


@pytest.mark.spack
@pytest.mark.slow
@needs_both_mpis
def test_local_site_builds_each_benchmark_against_its_toolchains_mpi(spack):
    """The local environment's HPL, NPB and OSU, built from the source mirror for each
    toolchain (shared with the other tests' builds), load their own MPI's library:
    ``libmpich`` for gcc-mpich, ``libmpi`` for gcc-openmpi, whatever /usr/bin/mpicc is."""
    from sitebench.run import runner
    from sitebench.sites.site import Site

    if not os.environ.get("SITEBENCH_MIRROR"):
        pytest.skip("NO SOURCE MIRROR: set SITEBENCH_MIRROR to build from the source mirror")
    site = Site.resolve("local")
    prepared = runner.prepare(site)
    declared = {t.name: t for t in toolchains.load(site)}
    assert {"gcc-openmpi", "gcc-mpich"} <= set(declared)
    binaries = {"hpl": "bin/xhpl", "npb": "bin/is.A.x", "osu-micro-benchmarks": None}
    for name, wanted_lib in (("gcc-mpich", "libmpich.so"), ("gcc-openmpi", "libmpi.so")):
        tc = declared[name]
        extras = tc.extras()
        for package, binary in binaries.items():
            digest = toolchain_roots.root_for(prepared.env_dir, package, extras)
            assert digest, f"no {package} root for {name} in {prepared.env_dir}/spack.lock"
            proc = spack.run(
                "-e", prepared.env_dir, "install", f"/{digest}", capture=True, check=False
            )
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            prefix = spack.run(
                "-e", prepared.env_dir, "find", "--format", "{prefix}", f"/{digest}", capture=True
            ).stdout.strip()
            exe = Path(prefix) / binary if binary else next(Path(prefix).rglob("osu_latency"))
            libs = subprocess.run(["ldd", str(exe)], capture_output=True, text=True).stdout
            linked = [line.split()[0] for line in libs.splitlines() if "libmpi" in line]
            assert any(lib.startswith(wanted_lib) for lib in linked), (name, package, libs)
            other = "libmpi.so" if wanted_lib == "libmpich.so" else "libmpich.so"
            assert not any(lib.startswith(other) for lib in linked), (name, package, libs)
