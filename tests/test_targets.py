"""Recipes concretize for several x86_64 targets; the flags each target gets are asserted.

Spack cannot concretize for aarch64 on this x86_64 host (spack/spack#51608), so the
recipe's aarch64 flag logic is tested on archspec's descriptions of those CPUs.
"""

import json

import pytest

from conftest import ROOT

X86_TARGETS = ("x86_64_v3", "zen3", "skylake_avx512", "icelake")


@pytest.fixture(scope="module")
def flags(spack, tmp_path_factory):
    from sitebench.discovery import local_site

    local_site.detect(spack)
    env_dir = tmp_path_factory.mktemp("targets")
    specs = [f"sitebench-suite target={t}" for t in X86_TARGETS] + [
        "hpl level=2 target=zen3",
        "hpl level=3 target=zen3",
    ]
    # Targets newer than the host are fine: nothing is built here.
    local_site.write_environment(
        env_dir, specs, concretizer={"unify": False, "targets": {"host_compatible": False}}
    )
    spack.run("-e", env_dir, "concretize", "--fresh", capture=True)
    proc = spack.run(
        "-e", env_dir, "python", ROOT / "tests/spack_scripts/hpl_flags.py", capture=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.spack
@pytest.mark.parametrize("target", X86_TARGETS)
def test_every_recipe_concretizes_for_the_target(flags, target):
    suite = next(s for s in flags["suites"] if s["target"] == target)
    ours = {"stream", "npb", "parsec-benchmark", "sysbench", "osu-micro-benchmarks"}
    assert ours <= set(suite["packages"])
    for name in ours:
        assert suite["packages"][name] == target, name
    assert suite["wrapper"]


def concrete(flags, target, level="tuned"):
    return next(c for c in flags["concrete"] if c["target"] == target and c["level"] == level)


@pytest.mark.spack
@pytest.mark.parametrize(
    "target, march, simd",
    [
        ("x86_64_v3", "-march=x86-64-v3", ["-mavx2", "-mfma"]),
        ("zen3", "-march=znver3", ["-mavx2", "-mfma"]),
        (
            "skylake_avx512",
            "-march=skylake-avx512",
            ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mprefer-vector-width=512"],
        ),
        (
            "icelake",
            "-march=icelake-client",
            ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mprefer-vector-width=512"],
        ),
    ],
)
def test_x86_targets(flags, target, march, simd):
    spec = concrete(flags, target)
    assert spec["wrapper"].split()[0] == march
    assert spec["hpl"] == ["-O3"] + simd
    assert spec["blas"] == "openblas"


@pytest.mark.spack
def test_study_levels_on_zen3(flags):
    assert concrete(flags, "zen3", "2")["hpl"] == [
        "-O0",
        "-mno-avx512f",
        "-mno-avx2",
        "-mno-fma",
        "-mno-avx",
    ]
    assert concrete(flags, "zen3", "3")["hpl"] == ["-O3", "-mavx2", "-mfma"]


@pytest.mark.spack
@pytest.mark.parametrize(
    "target, mcpu, sve",
    [
        ("neoverse_n1", "-mcpu=neoverse-n1", False),
        ("neoverse_v1", "-mcpu=neoverse-v1", True),
        ("a64fx", "-mcpu=a64fx", True),
    ],
)
def test_aarch64_flag_logic(flags, target, mcpu, sve):
    got = flags["aarch64"][target]
    assert got["wrapper"].split()[0] == mcpu
    assert got["auto"] == (["-msve-vector-bits=scalable"] if sve else ["-ftree-vectorize"])
    assert got["neon"] == [f"{mcpu}+nosve"]
    assert got["none"] == ["-march=armv8-a+nosimd"]
