"""Module trees laid out as production clusters lay them out, onboarded with no hand edits.

tests/modules_world.py builds, with Debian's ``lmod`` and ``environment-modules``, a pure
hierarchy per module system (``MODULEPATH`` at ``Core/`` only; ``gcc/12`` opens
``Compiler/gcc/12/`` where a category-style ``mpi/openmpi/<v>`` and ``mpich/<v>`` with a
``prereq`` live; a ``default`` marker; Lmod's ``family`` and a sticky ``StdEnv``) and
EasyBuild's meta-module ``foss/2023a``. Each is walked, onboarded (Spack's real detection
behind each module, loading exactly its parents), validated as cron would run it, and a
deliberately mismatched pairing is refused with its fix. The Tcl site is onboarded where
``modulecmd`` is not on PATH and validates and runs so, as cron would run it.
"""

import os
import shutil

import pytest
import yaml
from test_modules import (  # noqa: F401
    _environ,
    command_or_skip,
    machine_detection,
    onboard_in_new_root,
    world,
)

import modules_world
from sitebench.common.errors import SitebenchError
from sitebench.sites import modules
from sitebench.discovery import local_site, module_tree
from sitebench.onboarding import validate

KINDS = ("lmod", "envmod")


def test_names_are_read_through_categories_and_mpi_families_by_name_and_programs(tmp_path):
    assert module_tree.family_of("compiler/gcc/12") == "gcc"
    assert module_tree.kind_of("mpi/openmpi/4.1") == "mpi"
    assert module_tree.kind_of("GCC/12.3.0") == "compiler"  # EasyBuild's capitals
    assert module_tree.kind_of("toolchain/foss/2023a") == "toolchain"
    assert module_tree.kind_of("PrgEnv-gnu/8.4") == "toolchain"
    assert module_tree.kind_of("StdEnv/1") is None and module_tree.kind_of("gcc") == "compiler"
    assert module_tree.is_category_style("mpi/openmpi/4.1")
    assert not module_tree.is_category_style("openmpi/4.1")
    # By the programs a module puts on PATH: HPC-X and MVAPICH2 ship Open MPI's and
    # MPICH's programs too, and are told apart.
    programs = {
        "ompi": ["ompi_info", "mpirun"],
        "mpich": ["mpichversion", "mpiexec"],
        "mv": ["mpiname", "mpichversion"],
        "impi": ["impi_info", "mpiicc"],
    }
    for name, progs in programs.items():
        (tmp_path / name).mkdir()
        for prog in progs:
            (tmp_path / name / prog).touch()
    recognise = module_tree.recognise_mpi
    assert recognise("openmpi/4.1", [tmp_path / "ompi"]) == "openmpi"
    assert recognise("hpcx/2.14", [tmp_path / "ompi"]) == "hpcx"
    assert recognise("mpi/site-mpi/1", [tmp_path / "ompi"], {"HPCX_DIR": "/opt/hpcx"}) == "hpcx"
    assert recognise("mpich/4.0", [tmp_path / "mpich"]) == "mpich"
    assert recognise("mpi/2.3", [tmp_path / "mv"]) == "mvapich"
    assert recognise("mpi/2021", [tmp_path / "impi"]) == "intel-mpi"
    assert recognise("cray-mpich/8.1", [], {"CRAY_MPICH_DIR": "/opt/cray"}) == "cray-mpich"
    assert recognise("intel-oneapi-mpi/2021.9") == "intel-mpi"
    assert recognise("mvapich2/2.3.7") == "mvapich" and recognise("python/3") is None
    tested = {k for k, (_label, _pkg, ok) in module_tree.MPI_FAMILIES.items() if ok}
    assert tested == {"openmpi", "mpich", "hpcx"}


def _compiler(version, modules):
    langs = {k: f"/m/gcc-{version}/bin/{k}" for k in ("c", "cxx", "fortran")}
    return {"spec": f"gcc@{version}", "modules": modules, "extra_attributes": {"compilers": langs}}


def test_each_pair_of_the_hierarchy_is_proposed_and_a_meta_module_that_loads_one():
    """An MPI module below a compiler (its external's modules start with the compiler's)
    pairs with that compiler only, for every compiler; a meta-module that loads a
    compiler and an MPI found as externals is a toolchain of its own."""
    packages = {
        "gcc": {"externals": [_compiler("12.2.0", ["gcc/12"]), _compiler("11.3.0", ["gcc/11"])]},
        "openmpi": {
            "externals": [
                {"spec": "openmpi@4.1.4", "modules": ["gcc/12", "mpi/openmpi/4.1.4"]},
                {"spec": "openmpi@4.1.6", "modules": ["gcc/11", "openmpi/4.1.6"]},
            ]
        },
        "mpich": {"externals": [{"spec": "mpich@4.0.2", "modules": ["gcc/11", "mpich/4.0.2"]}]},
    }
    found, notes = local_site._module_toolchains(packages, {})
    assert notes == []
    assert [(t["name"], t["mpi"], t["modules"], t.get("default", True)) for t in found] == [
        ("gcc12-openmpi4", "openmpi@4.1.4", ["gcc/12", "mpi/openmpi/4.1.4"], True),
        ("gcc11-openmpi4", "openmpi@4.1.6", ["gcc/11", "openmpi/4.1.6"], False),
        ("gcc11-mpich4", "mpich@4.0.2", ["gcc/11", "mpich/4.0.2"], False),
    ]
    metas = [
        {
            "module": "foss/2023a",
            "modules": ["foss/2023a"],
            "loads": ["gcc/12", "mpi/openmpi/4.1.4", "foss/2023a"],
        },
        {
            "module": "PrgEnv-cray/8",
            "modules": ["PrgEnv-cray/8"],
            "loads": ["cce/15", "PrgEnv-cray/8"],
        },
    ]
    found, notes = local_site._meta_toolchains(packages, metas, others=True)
    assert found == [
        {
            "name": "foss-2023a",
            "c": "gcc@12.2.0",
            "cxx": "gcc@12.2.0",
            "fortran": "gcc@12.2.0",
            "mpi": "openmpi@4.1.4",
            "modules": ["foss/2023a"],
            "default": False,
        }
    ]
    assert len(notes) == 1 and "PrgEnv-cray/8 loads cce/15" in notes[0], notes


@pytest.mark.parametrize("kind", KINDS)
def test_a_hierarchy_is_walked_below_its_core(kind):
    tree = modules_world.build_hierarchy_shared(kind)
    env = modules_world.environ(kind, command_or_skip(kind), tree["modulepath"])
    found = modules.find(env)
    system = modules.ModulesSystem(found.kind, found.command, (tree["core"],))
    assert tree["openmpi"] not in system.avail(env)  # below Core/: avail does not see it
    entries, notes = module_tree.walk(system, env)
    by_name = {e.name: e for e in entries}
    assert notes == []
    assert by_name[tree["gcc"]].parents == () and by_name[tree["gcc"]].kind == "compiler"
    for mpi in ("openmpi", "mpich"):
        assert by_name[tree[mpi]].parents == (tree["gcc"],), by_name
        assert by_name[tree[mpi]].kind == "mpi"
    assert by_name[tree["foss"]].kind == "toolchain"
    if kind == "lmod":
        assert by_name["StdEnv/1"].sticky and by_name[tree["gcc"]].lmod_family == "compiler"


def _onboard(kind, detected, tmp_path_factory, env):
    tree = modules_world.build_hierarchy_shared(kind)
    name = f"tree-{kind}"
    root, name, report = onboard_in_new_root(env, name, detected, tmp_path_factory)
    return tree, root, name, report


def _shell(kind, modulecmd_on_path=True):
    """A login shell of the site: MODULEPATH at Core/ only, nothing loaded; for the Tcl
    modules, with or without ``modulecmd`` on PATH."""
    tree = modules_world.build_hierarchy_shared(kind)
    env = modules_world.environ(kind, command_or_skip(kind), tree["modulepath"])
    if not modulecmd_on_path:
        env["PATH"] = ":".join(d for d in env["PATH"].split(":") if not d.endswith("envmod-bin"))
        assert not shutil.which("modulecmd", path=env["PATH"]), "modulecmd is on PATH here"
    return env


@pytest.fixture(scope="module")
def onboarded(machine_detection, tmp_path_factory):  # noqa: F811 (the imported fixture)
    """onboarded(kind): the hierarchy onboarded once per module system (the Tcl one
    from a shell without modulecmd on PATH): (tree, root, name, report, env)."""
    made = {}

    def make(kind):
        if kind not in made:
            env = _shell(kind, modulecmd_on_path=kind == "lmod")
            made[kind] = (*_onboard(kind, machine_detection, tmp_path_factory, env), env)
        return made[kind]

    return make


def _cron(env, root):
    """What cron gives sitebench: no module setup, the sites' root."""
    clean = {k: v for k, v in env.items() if k not in ("LMOD_CMD", "MODULES_CMD", "MODULEPATH")}
    return {**clean, "SITEBENCH_SITES_ROOT": str(root)}


@pytest.mark.parametrize("kind", KINDS)
def test_a_pure_hierarchy_onboards_with_no_hand_edits(onboarded, kind):
    tree, root, name, report, _env = onboarded(kind)
    site = yaml.safe_load((root / "site-configs" / name / "site.yaml").read_text())
    assert site["modules"]["system"] == kind and site["modules"]["use"] == [tree["core"]]
    proposed = {tc["name"]: tc for tc in site["toolchains"]}
    assert proposed["gcc12-openmpi4"]["modules"] == [tree["gcc"], tree["openmpi"]]
    assert proposed["gcc12-mpich4"]["modules"] == [tree["gcc"], tree["mpich"]]
    foss = proposed["foss-2023a"]
    assert foss["modules"] == [tree["foss"]] and foss["default"] is False
    assert foss["c"] == foss["fortran"] == "gcc@12.2.0" and foss["mpi"].startswith("openmpi@")
    assert set(proposed) == {"gcc12-openmpi4", "gcc12-mpich4", "foss-2023a"}, proposed
    packages = yaml.safe_load(
        (root / "site-configs" / name / "spack" / "packages.yaml").read_text()
    )["packages"]
    # Registered by loading exactly the modules each needs, parents first.
    assert packages["openmpi"]["externals"][0]["modules"] == [tree["gcc"], tree["openmpi"]]
    assert packages["mpich"]["externals"][0]["modules"] == [tree["gcc"], tree["mpich"]]
    assert [e["modules"] for e in packages["gcc"]["externals"]] == [[tree["gcc"]]]
    review = "\n".join(report.review)
    assert f"module {tree['openmpi']}: category-style name, read as mpi openmpi" in review
    if kind == "lmod":
        assert "module StdEnv/1 is sticky" in review
        assert "module aocc/4: Spack found no compiler" in review
    else:  # onboarded without modulecmd on PATH: the review says what ReFrame will run
        assert "`modulecmd`, which ReFrame runs, is not on PATH" in review
        assert f"gives ReFrame {site['modules']['command']}" in review


def test_the_lmod_hierarchy_validates_as_cron_and_refuses_a_mismatched_pairing(onboarded):
    tree, root, name, _report, env = onboarded("lmod")
    site_yaml = root / "site-configs" / name / "site.yaml"
    text = site_yaml.read_text()
    onboarded_modules = f"modules: [{tree['gcc']}, {tree['openmpi']}]"
    assert onboarded_modules in text

    def refusal_with(modules):
        """validate's refusal once Open MPI's toolchain loads ``modules`` instead."""
        site_yaml.write_text(text.replace(onboarded_modules, f"modules: [{modules}]", 1))
        with pytest.raises(SitebenchError) as err:
            validate.validate_site(name, load_reframe=False)
        return err.value

    with _environ(_cron(env, root)):
        validate.validate_site(name)
        try:
            # Open MPI's toolchain loading MPICH's module: the MPI the job gets is not
            # the one Spack builds with.
            err = refusal_with(f"{tree['gcc']}, {tree['mpich']}")
            said = str(err)
            assert "toolchain 'gcc12-openmpi4'" in said and "mpich" in said, said
            assert "not in the openmpi@" in said and "it is mpich@" in said, said
            assert onboarded_modules in err.fix
            # A second compiler of Lmod's family swaps GCC out.
            err = refusal_with(f"{tree['gcc']}, {tree['openmpi']}, aocc/4")
            assert "leaves gcc/12" in str(err) and "unloaded" in str(err)
            assert "one module of each family" in err.fix
            # The meta-module loads Open MPI; its toolchain naming MPICH's external is
            # refused, the fix naming the MPI foss/2023a brings first.
            site = yaml.safe_load(text)
            mpis = {tc["name"]: tc["mpi"] for tc in site["toolchains"]}
            for tc in site["toolchains"]:
                if tc["name"] == "foss-2023a":
                    tc["mpi"] = mpis["gcc12-mpich4"]
            site_yaml.write_text(yaml.safe_dump(site, sort_keys=False))
            with pytest.raises(SitebenchError) as err:
                validate.validate_site(name, load_reframe=False)
            said = str(err.value)
            assert f"after `module load {tree['foss']}` in a clean environment" in said, said
            assert f"not in the {mpis['gcc12-mpich4']} external's prefix" in said, said
            assert f"(it is {mpis['gcc12-openmpi4']}'s)" in said, said
            assert err.value.fix.startswith(
                f"name the MPI {tree['foss']} loads: mpi: {mpis['gcc12-openmpi4']}; or load "
                f"the {mpis['gcc12-mpich4']} external's modules: "
                f"modules: [{tree['gcc']}, {tree['mpich']}] (instead of {tree['foss']})"
            ), err.value.fix
        finally:
            site_yaml.write_text(text)


def test_a_tcl_site_without_modulecmd_on_path_validates_and_reframe_finds_it(onboarded, tmp_path):
    """Onboarded where ``modulecmd`` is not on PATH, the Tcl site records the command it
    found (``$MODULES_CMD``) and its reframe.py gives it to ReFrame as ``modulecmd``: as
    cron runs it (no module setup, no modulecmd on PATH), validate passes and ReFrame's own
    Tcl backend starts (it stopped with "could not find a sane TMod4 installation"). A
    command that is no Environment Modules is refused before any run, with its fix."""
    import subprocess
    import sys

    tree, root, name, _report, env = onboarded("envmod")
    site_yaml = root / "site-configs" / name / "site.yaml"
    text = site_yaml.read_text()
    command = yaml.safe_load(text)["modules"]["command"]
    assert command == _shell("envmod")["MODULES_CMD"]  # what the shell's modules said
    cron = _cron(env, root)
    assert not shutil.which("modulecmd", path=cron["PATH"])
    with _environ(cron):
        validate.validate_site(name)
    # ReFrame itself, with the site's configuration, starting its modules system as every
    # run does (System.create validates `modulecmd python -V`).
    script = (
        "import sys; from reframe.core import config, runtime as rt; "
        "site = config.load_config(sys.argv[1]); site.select_subconfig(sys.argv[2]); "
        "rt.init_runtime(site); m = rt.runtime().modules_system; print(m.name, m.version)"
    )
    config = root / "site-configs" / name / "reframe.py"
    proc = subprocess.run(
        [sys.executable, "-c", script, str(config), name],
        env=cron, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and proc.stdout.startswith("envmod "), out[-4000:]
    version = tuple(int(v) for v in proc.stdout.split()[1].split(".")[:2])
    assert version >= modules.REFRAME_MIN_ENVMOD, out

    # A command that is not Environment Modules: refused, saying what it answered.
    fake = tmp_path / "modulecmd.tcl"
    fake.write_text("#!/bin/sh\necho 'Modules Release 3.2.10' >&2\n")
    fake.chmod(0o755)
    try:
        site_yaml.write_text(text.replace(f"command: {command}", f"command: {fake}", 1))
        with _environ(cron), pytest.raises(SitebenchError) as err:
            validate.validate_site(name, load_reframe=False)
        said = str(err.value)  # also: the toolchains' modules no longer load through it
        assert "modules command" in said and "said: Modules Release 3.2.10" in said, said
        assert "Environment Modules 4.1 or later in site.yaml's modules.command" in said
    finally:
        site_yaml.write_text(text)


@pytest.mark.parametrize("kind", KINDS)
def test_a_collection_that_loads_a_compiler_and_an_mpi_is_a_toolchain_in_reframes_form(
    kind, tmp_path
):
    tree = modules_world.build_hierarchy_shared(kind)
    # Saved in a home of its own (both systems keep collections under $HOME): no other
    # onboarding lists it.
    env = {**_shell(kind), "HOME": str(tmp_path)}
    found = modules.find(env)
    system = modules.ModulesSystem(found.kind, found.command, (tree["core"],))
    save = f"module load {tree['gcc']} {tree['openmpi']} && module save gompi"
    proc = system._bash(save, env)
    assert proc.returncode == 0, proc.stderr
    assert "gompi" in system.collections(env)
    loaded = system.loaded_environment([], env, collection="gompi")
    loads = loaded["LOADEDMODULES"].split(":")
    assert loads == [tree["gcc"], tree["openmpi"]], loads
    packages = {
        "gcc": {"externals": [_compiler("12.2.0", [tree["gcc"]])]},
        "openmpi": {"externals": [{"spec": "openmpi@4.1.4", "modules": loads}]},
    }
    meta = {"module": "gompi", "collection": True, "modules": [], "loads": loads}
    (proposed,), notes = local_site._meta_toolchains(packages, [meta], others=False)
    assert notes == [] and proposed["collection"] == "gompi" and "modules" not in proposed
    from sitebench.sites import toolchains

    (tc,), problems = toolchains.parse([proposed], "site.yaml")
    assert not problems and tc.collection == "gompi"
    (environ,) = toolchains.reframe_environments([tc], packages)
    assert environ["modules"] == [{"name": "gompi", "collection": True}]
    with pytest.raises(SitebenchError) as err:
        system.loaded_environment([], env, collection="nosuch")
    assert "module restore nosuch" in err.value.problem


@pytest.mark.slow
@pytest.mark.spack
def test_the_hierarchy_sites_run_osu_with_each_toolchains_own_mpi(onboarded, results_root):
    """Both hierarchies onboarded with no hand edits (the Tcl one from a shell without
    ``modulecmd`` on PATH, and run so), each through `./sitebench run --toolchain all`: the two
    pairs and the meta-module ``foss/2023a`` (``default: false``, so named). Spack builds OSU
    per toolchain, loading each external's modules (parents first), ReFrame runs its latency
    check loading the toolchain's, and each binary links its module's MPI. The meta-module
    names the pair's externals (same compilers, same Open MPI), so its OSU is the pair's build,
    not a second one. The two trees name the same modules over the same prefixes, so the Tcl
    site's externals hash as the Lmod site's and its OSU comes from the first build:the second
    site adds its run, not a build."""
    import time

    from conftest import sitebench

    took, builds = {}, {}
    for kind in KINDS:
        tree, root, name, _report, env = onboarded(kind)
        # The Tcl site runs as onboarded: `modulecmd` not on PATH (its reframe.py gives it).
        start = time.monotonic()
        proc = sitebench(
            "run",
            *("--site", name, "--toolchain", "all"),
            *("--", "-n", "OsuLatencyCheck"),
            env=_cron(env, root),
        )
        took[kind] = round(time.monotonic() - start)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{kind}: {out[-6000:]}"
        (run,) = (results_root / name).iterdir()
        builds[kind] = _links_each_toolchains_own_mpi(run, tree, kind)
    assert builds["lmod"] == builds["envmod"], builds
    print(f"./sitebench run seconds per site: {took}")


def _links_each_toolchains_own_mpi(run, tree, kind):
    """Each toolchain's OSU binary of ``run`` links its module's MPI (``ldd``), and the job
    script loads the toolchain's modules after a purge, parents first (the meta-module
    alone). Returns {toolchain: OSU's install prefix}."""
    import re
    import subprocess
    from pathlib import Path

    # The MPI library each binary loads (ldd), as the file it is: Debian's Open MPI
    # library lives in /lib, its prefix's lib/ links to it.
    libraries, prefixes = {}, {}
    for spec in sorted(run.glob("output/*/*/*/OsuBuild_*/spack-spec.txt")):
        prefixes[spec.parts[-3]] = spec.read_text().split("\t")[0]
        binary = next(Path(prefixes[spec.parts[-3]]).rglob("osu_latency"))
        ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        libraries[spec.parts[-3]] = {
            m.group(1): os.path.realpath(m.group(2))
            for m in re.finditer(r"(libmpi|libmpich)\.so\S* => (\S+)", ldd)
        }
    assert set(libraries) == {"gcc12-openmpi4", "gcc12-mpich4", "foss-2023a"}, (kind, libraries)
    # The prefixes the modules put on PATH (modules_world: beside the flat tree).
    flat = Path(modules_world.build_shared()["modulepath"]).parent
    for toolchain, mpi, lib in (
        ("gcc12-openmpi4", "openmpi", "libmpi"),
        ("foss-2023a", "openmpi", "libmpi"),
        ("gcc12-mpich4", "mpich", "libmpich"),
    ):
        prefix = flat / f"{mpi}-{tree[mpi].rsplit('/', 1)[1]}"
        want = {lib: os.path.realpath(prefix / "lib" / f"{lib}.so")}
        assert libraries[toolchain] == want, (kind, toolchain, libraries)
    # Same compilers and Open MPI externals: one OSU build for the pair and the meta-module.
    assert prefixes["foss-2023a"] == prefixes["gcc12-openmpi4"], (kind, prefixes)
    loads = {
        "gcc12-mpich4": [tree["gcc"], tree["mpich"]],
        "foss-2023a": [tree["foss"]],
    }
    for toolchain, names in loads.items():
        scripts = list(run.glob(f"output/*/*/{toolchain}/OsuLatency*/rfm_job.sh"))
        assert scripts, (kind, toolchain, sorted(run.glob("output/*/*/*/*")))
        for script in scripts:
            text = script.read_text()
            at = [text.index("module purge")]
            at += [text.index(f"module load {module}\n") for module in names]
            assert at == sorted(at) and at[-1] < text.index("mpirun"), (kind, text)
            # The meta-module loads its compiler and MPI itself: the job names it alone.
            if toolchain == "foss-2023a":
                assert f"module load {tree['gcc']}" not in text, (kind, text)
    return prefixes


def test_a_module_with_a_prereq_is_loaded_after_the_compiler_it_needs():
    """A flat tree's MPI module that refuses to load alone (``prereq gcc/12``) is
    registered with the first compiler module after which it loads, and the notes say so;
    one that loads after none stays an error."""
    from sitebench.discovery import module_externals

    class Tree:
        def loaded_environment(self, names, env=None, collection=None):
            if names[-1].startswith("mpich") and "gcc/12" not in names:
                raise SitebenchError(f"`module load {' '.join(names)}` failed: prereq", "")
            if names[-1] == "lonely/1":
                raise SitebenchError("`module load lonely/1` failed", "")
            return {"PATH": "/usr/bin", "LOADEDMODULES": ":".join(names)}

    compilers = [module_tree.Entry("clang/14", (), "compiler")]
    compilers.append(module_tree.Entry("gcc/12", (), "compiler"))
    notes = []
    parents, loaded = module_externals._loadable(
        Tree(), module_tree.Entry("mpich/4.0.2", (), "mpi"), compilers, notes
    )
    assert parents == ("gcc/12",) and loaded["LOADEDMODULES"] == "gcc/12:mpich/4.0.2"
    assert notes == [
        "module mpich/4.0.2 loads only after gcc/12 (a prereq): its externals and toolchains "
        "load gcc/12 first"
    ]
    with pytest.raises(SitebenchError, match="lonely/1"):
        module_externals._loadable(
            Tree(), module_tree.Entry("lonely/1", (), "mpi"), compilers, notes
        )
