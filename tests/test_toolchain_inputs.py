"""Bad toolchains (issue 16) are refused naming file, key and fix: by ``./sitebench validate``
(and so before every run), by ``--toolchain``. Each case changes one file of a valid site
'good' (onboarded from the recorded detection, one toolchain gcc-openmpi: test_validate.py) in
a temporary copy of the sites root.
"""

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from test_validate import cli, make_sites_root

from sitebench.common.errors import SitebenchError
from sitebench.sites import toolchains

SITE = "site-configs/good/site.yaml"
REFRAME = "site-configs/good/reframe.py"
TC = "{name: gcc-openmpi, c: gcc, cxx: gcc, fortran: gcc, mpi: openmpi}"

#: (id, {file: new text, or (old, new) replaced in it}, fragments the error must hold)
CASES = [
    (
        "unknown-compiler",
        {SITE: "toolchains:\n- {name: icx-openmpi, c: icx, mpi: openmpi}\n"},
        [SITE, "toolchains.icx-openmpi.c", "no icx compiler for c", "spack compiler find"],
    ),
    (
        "clang-without-fortran",
        {SITE: "toolchains:\n- {name: clang-openmpi, c: llvm, cxx: llvm, mpi: openmpi}\n"},
        [SITE, "toolchains.clang-openmpi.fortran", "no llvm compiler", "fortran: gcc"],
    ),
    (
        "unknown-mpi",
        {SITE: f"toolchains:\n- {TC}\n- {{name: gcc-mpich, c: gcc, mpi: mpich}}\n"},
        [SITE, "toolchains.gcc-mpich.mpi", "mpich", "apt-get install mpich libmpich-dev"],
    ),
    (
        "duplicate-name",
        {SITE: f"toolchains:\n- {TC}\n- {TC}\n"},
        [SITE, "toolchains[1].name", "'gcc-openmpi' is declared twice", "its own name"],
    ),
    (
        "mpi-without-launcher",
        {SITE: "toolchains:\n- {name: gcc-mvapich, c: gcc, mpi: mvapich2}\n"},
        [SITE, "toolchains[0].launcher", "no launcher sitebench knows", "launcher: srun"],
    ),
    (
        "unknown-launcher",
        {SITE: "toolchains:\n- {name: t, c: gcc, mpi: openmpi, launcher: aprun}\n"},
        [SITE, "toolchains[0].launcher", "'aprun' is not one sitebench runs", "mpirun, mpiexec"],
    ),
    (
        "unknown-key",
        {SITE: "toolchains:\n- {name: t, compiler: gcc, c: gcc, mpi: openmpi}\n"},
        [SITE, "toolchains[0].compiler", "unknown key 'compiler'", "keys: name, c, cxx"],
    ),
    (
        "no-mpi",
        {SITE: "toolchains:\n- {name: t, c: gcc}\n"},
        [SITE, "toolchains[0].mpi", "mpi is missing", "e.g. toolchains:"],
    ),
    (
        "empty-list",
        {SITE: "toolchains: []\n"},
        [SITE, "toolchains", "non-empty list", "e.g. toolchains:"],
    ),
    (
        "not-a-list",
        {SITE: "toolchains: gcc-openmpi\n"},
        [SITE, "toolchains", "e.g. toolchains: [{name: gcc-openmpi"],
    ),
    (
        "none-declared",
        {SITE: "slurm_cluster: false\n"},
        [SITE, "declares no toolchains", "`./sitebench onboard` proposes"],
    ),
    (
        "partition-names-an-undeclared-toolchain",
        {REFRAME: ("'environs': ENVIRONS", "'environs': ['gcc-mpich']")},
        [
            REFRAME,
            "systems[0].partitions[0].environs",
            "names the environment 'gcc-mpich', which is not one of the site's toolchains",
            "declared ones: gcc-openmpi",
        ],
    ),
    (
        "toolchains-of-a-site-using-another-environment",
        {
            "site-configs/other/site.yaml": f"environment: good\ntoolchains:\n- {TC}\n",
            "site-configs/other/reframe.py": ("copy", REFRAME),
        },
        ["site-configs/other/site.yaml", "toolchains", "its own would be ignored", SITE],
    ),
]


def _apply(root, changes):
    for rel, change in changes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(change, str):
            path.write_text(change)
        elif change[0] == "copy":
            shutil.copy(root / change[1], path)
        else:
            text = path.read_text()
            assert change[0] in text, (rel, change[0])
            path.write_text(text.replace(*change))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    good = make_sites_root(tmp_path_factory.mktemp("sites") / "root")

    def one(case):
        name, changes, _expect = case
        root = tmp_path_factory.mktemp(name) / "root"
        shutil.copytree(good, root, symlinks=True)
        _apply(root, changes)
        site = "other" if any("other" in rel for rel in changes) else "good"
        env = {"SITEBENCH_SITES_ROOT": str(root), toolchains.SELECTED: ""}
        return cli("validate", site, env=env)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(one, CASES))
    return {"good": good, **{case[0]: result for case, result in zip(CASES, results)}}


@pytest.mark.reliability_input
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_bad_toolchain_is_refused_naming_file_key_and_fix(case, outcomes):
    name, _changes, expect = case
    proc = outcomes[name]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.startswith("sitebench: error: ") and "fix: " in proc.stderr
    for fragment in expect:
        assert fragment in proc.stderr, f"{fragment!r} not in:\n{proc.stderr}"


@pytest.mark.reliability_input
def test_toolchain_option_naming_none_of_the_sites(outcomes):
    declared, _problems = toolchains.parse(yaml.safe_load(f"[{TC}]"), "site.yaml")
    with pytest.raises(SitebenchError, match="toolchain 'nope' is not one of the site's") as err:
        toolchains.selected(declared, ["gcc-openmpi", "nope"])
    assert "use one of: gcc-openmpi" in err.value.fix
    assert [t.name for t in toolchains.selected(declared, ["gcc-openmpi"])] == ["gcc-openmpi"]
    # The command: refused before Spack is set up or anything is built.
    env = {"SITEBENCH_SITES_ROOT": str(outcomes["good"]), "SITEBENCH_RESULTS_DIR": "/nonexistent"}
    proc = cli("run", "--site", "good", "--toolchain", "nope", env=env)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "toolchain 'nope' is not one of the site's" in proc.stderr
    assert "use one of: gcc-openmpi" in proc.stderr


def test_stale_spack_files_of_the_toolchains_are_rewritten(outcomes, tmp_path):
    """Two toolchains declared by hand: validate makes the scope's files follow site.yaml."""
    root = tmp_path / "root"
    shutil.copytree(outcomes["good"], root, symlinks=True)
    scope = root / "site-configs/good/spack"
    (root / SITE).write_text(
        f"toolchains:\n- {TC}\n- {{name: gcc-openmpi-o3, c: gcc, mpi: openmpi}}\n"
    )
    (scope / "definitions.yaml").write_text("definitions: [{toolchains: ['%gcc-openmpi']}]\n")
    env = {"SITEBENCH_SITES_ROOT": str(root), toolchains.SELECTED: ""}
    proc = cli("validate", "good", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "toolchains: gcc-openmpi, gcc-openmpi-o3" in proc.stdout
    assert "==> rewrote site-configs/good/spack/definitions.yaml" in proc.stderr
    assert "==> rewrote site-configs/good/spack/toolchains.yaml" in proc.stderr
    assert yaml.safe_load((scope / "definitions.yaml").read_text()) == {
        "definitions": [{"toolchains": ["%gcc-openmpi", "%gcc-openmpi-o3"]}]
    }
    assert list(yaml.safe_load((scope / "toolchains.yaml").read_text())["toolchains"]) == [
        "gcc-openmpi",
        "gcc-openmpi-o3",
    ]
    again = cli("validate", "good", env=env)
    assert again.returncode == 0 and "rewrote" not in again.stderr
