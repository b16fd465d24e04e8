"""Compilers, MPIs and BLAS offered as environment modules, made Spack externals.

The tree is walked whole (:mod:`sitebench.discovery.module_tree`: flat, Lmod's hierarchy by its
spider, a Tcl hierarchy by loading, category-style names). Each compiler, MPI and BLAS
module is loaded with exactly the modules it needs before it (its parents in a hierarchy,
or the compiler a ``prereq`` asks for) after ``module purge``
(:meth:`~sitebench.sites.modules.ModulesSystem.loaded_environment`), and Spack's own
detection (``spack compiler find``, ``spack external find --path``) looks only at the
directories the module itself put on ``PATH`` (and, for BLAS, ``LD_LIBRARY_PATH``/
``LIBRARY_PATH``). Whatever it finds becomes an external with ``modules: [<parents>...,
<module>]``, which Spack loads when it builds with it. A module that fails to load, or names
a prefix that is not there, is a note of the report, not the end of onboarding; so is one
in which Spack finds nothing, and an MPI family sitebench recognises but has not been tested
with here (:data:`~sitebench.discovery.module_tree.MPI_FAMILIES`). Meta-modules (``foss/2023a``)
are loaded to see which modules they load: :func:`detect` returns them for the toolchains.
"""

import os
import sys

from sitebench.common.errors import SitebenchError
from sitebench.discovery import module_tree
from sitebench.discovery.spack_detection import spack_detection
from sitebench.discovery.module_tree import family_of

MPI_PACKAGES = ("openmpi", "mpich", "mvapich2")
BLAS_PACKAGES = ("openblas",)


def family(module):
    return family_of(module)


def _detect(spack, kind, dirs, env):
    """``packages:`` of ``kind`` Spack's detection finds in ``dirs``, in ``env``."""
    if kind == "compiler":
        return spack_detection(spack, [["compiler", "find", "--scope", "user", *dirs]], env)
    search = [a for d in dirs for a in ("--path", d)]
    wanted = MPI_PACKAGES if kind == "mpi" else BLAS_PACKAGES
    # Open MPI's detection asks which configured compiler built it: configure the ones on
    # the module's PATH first (without any, its recipe fails to detect).
    steps = [
        ["compiler", "find", "--scope", "user"],
        ["external", "find", "--scope", "user", "--not-buildable", *search, *wanted],
    ]
    found = spack_detection(spack, steps, env)
    return {k: v for k, v in found.items() if k in wanted}


def _search_dirs(kind, system, module, parents=()):
    """The directories ``module`` adds (to what its ``parents`` give) where Spack should
    look for ``kind``."""
    if kind != "blas":
        return system.added_path([module], after=parents)
    before = system.loaded_environment(list(parents))
    after = system.loaded_environment([*parents, module])
    dirs = []
    for var in ("LD_LIBRARY_PATH", "LIBRARY_PATH"):
        old = set(before.get(var, "").split(":"))
        dirs += [d for d in after.get(var, "").split(":") if d and d not in old and d not in dirs]
    return dirs


def detect(spack, system):
    """(``packages:`` of the externals behind modules, notes, meta-modules and the user's
    module collections: [{"module", "modules" (to load), "collection" (one to restore),
    "loads" (what loading them loaded)}])."""
    packages, notes, metas = {}, [], []
    entries, notes = module_tree.walk(system)
    wanted = [e for e in entries if e.kind in ("compiler", "mpi", "blas")]
    below = sum(1 for e in entries if e.parents)
    print(
        f"==> {system.kind}: {len(wanted)} compilers, MPIs or BLAS to look into"
        + (f" ({below} below a compiler or MPI of the hierarchy)" if below else ""),
        file=sys.stderr,
    )
    compilers = [e for e in entries if e.kind == "compiler" and not e.parents]
    for entry in entries:
        if entry.sticky:
            notes.append(
                f"module {entry.name} is sticky (a plain `module purge` keeps it in a login "
                "shell): builds and runs load only each toolchain's modules, as a cron job "
                "without it; a toolchain that needs it lists it in its modules"
            )
        if module_tree.is_category_style(entry.name) and entry.kind:
            notes.append(
                f"module {entry.name}: category-style name, read as {entry.kind} "
                f"{family_of(entry.name)}"
            )
    for entry in wanted:
        try:
            parents, loaded = _loadable(system, entry, compilers, notes)
            dirs = _search_dirs(entry.kind, system, entry.name, parents)
        except SitebenchError as err:
            notes.append(f"module {entry.name}: {err.problem}: left out")
            continue
        if entry.kind == "mpi":
            mpi = module_tree.recognise_mpi(entry.name, dirs, loaded)
            label, package, tested = module_tree.MPI_FAMILIES.get(mpi, (None, None, True))
            if not tested:
                notes.append(
                    f"module {entry.name}: {label} recognised, not tested with sitebench "
                    f"here: not proposed (to try it: a toolchain with mpi: {package}, its "
                    f"launcher (mpiexec, or srun under Slurm) and modules: "
                    f"[{', '.join([*parents, entry.name])}])"
                )
                continue
        found = _detect(spack, entry.kind, dirs, loaded) if dirs else {}
        externals = [
            (pkg, ext) for pkg, cfg in found.items() for ext in cfg.get("externals") or []
        ]
        if not externals:
            notes.append(
                f"module {entry.name}: Spack found no {entry.kind} in {', '.join(dirs) or 'it'}"
            )
            continue
        for pkg, ext in externals:
            ext["modules"] = [*parents, entry.name]
            entry_cfg = packages.setdefault(pkg, {"externals": []})
            entry_cfg["externals"].append(ext)
            if found[pkg].get("buildable") is False:
                entry_cfg["buildable"] = False
    for entry in (e for e in entries if e.kind == "toolchain"):
        try:
            loaded = system.loaded_environment(entry.modules)
        except SitebenchError as err:
            notes.append(f"meta-module {entry.name}: {err.problem}: left out")
            continue
        loads = [m for m in loaded.get("LOADEDMODULES", "").split(":") if m]
        metas.append({"module": entry.name, "modules": entry.modules, "loads": loads})
    for name in system.collections():
        try:
            loaded = system.loaded_environment([], collection=name)
        except SitebenchError as err:
            notes.append(f"collection {name}: {err.problem}: left out")
            continue
        loads = [m for m in loaded.get("LOADEDMODULES", "").split(":") if m]
        metas.append({"module": name, "collection": True, "modules": [], "loads": loads})
    return packages, notes, metas


def _loadable(system, entry, compilers, notes):
    """(the parents ``entry`` loads after, the environment it loads in): its own parents;
    for a top-level MPI or BLAS that does not load alone (a ``prereq``), the first compiler
    module it loads after (named in the notes)."""
    try:
        return entry.parents, system.loaded_environment(entry.modules)
    except SitebenchError as alone:
        if entry.parents or entry.kind == "compiler":
            raise
        for compiler in compilers:
            try:
                loaded = system.loaded_environment([*compiler.modules, entry.name])
            except SitebenchError:
                continue
            notes.append(
                f"module {entry.name} loads only after {compiler.name} (a prereq): its "
                f"externals and toolchains load {compiler.name} first"
            )
            return tuple(compiler.modules), loaded
        raise alone


def from_shell(spack):
    """(the modules system with this shell's MODULEPATH recorded as its ``use``, the
    externals behind its modules, notes, meta-modules), or (None, {}, [], []) where the
    shell has no modules system or no MODULEPATH. Recorded: cron and batch jobs may not
    set MODULEPATH."""
    from sitebench.sites import modules

    use = tuple(d for d in os.environ.get("MODULEPATH", "").split(":") if d)
    system = modules.find() if use else None
    if system is None:
        return None, {}, [], []
    system = modules.ModulesSystem(system.kind, system.command, use)
    found, notes, metas = detect(spack, system)
    notes += shell_notes(os.environ)
    return system, found, notes, metas


def shell_notes(env):
    """What this shell has loaded (a site's default modules, StdEnv) that builds and runs,
    which purge first as a cron job has none of it, will not have."""
    loaded = [m for m in env.get("LOADEDMODULES", "").split(":") if m]
    defaults = [m for m in env.get("LMOD_SYSTEM_DEFAULT_MODULES", "").split(":") if m]
    named = list(dict.fromkeys(loaded + defaults))
    if not named:
        return []
    return [
        f"loaded in this shell: {', '.join(named)} (the site's default modules): builds and "
        "runs purge first and load only each toolchain's modules, as cron would; a toolchain "
        "that needs one lists it in its modules"
    ]


def _spec_key(ext):
    return ext.get("spec", "").split()[0]


def merge(path_packages, module_packages):
    """Spack's detection on PATH with the modules' externals added. An external a module
    offers replaces the PATH one of the same spec (Spack cannot tell two externals of one
    spec apart; the module is how the site means it to be used). Returns (packages,
    notes)."""
    merged = {name: dict(cfg) for name, cfg in path_packages.items()}
    notes = []
    for name, cfg in module_packages.items():
        entry = merged.setdefault(name, {})
        old = list(entry.get("externals") or [])
        new = cfg["externals"]
        keys = {_spec_key(ext) for ext in new}
        dropped = [ext for ext in old if _spec_key(ext) in keys]
        for ext in dropped:
            notes.append(
                f"{_spec_key(ext)} at {ext.get('prefix')} is also module "
                f"{[n for e in new if _spec_key(e) == _spec_key(ext) for n in e['modules']][0]}: "
                "the module's is used"
            )
        entry["externals"] = new + [ext for ext in old if _spec_key(ext) not in keys]
        if cfg.get("buildable") is False:
            entry["buildable"] = False
    return merged, notes


def module_of(packages, package):
    """The modules of the first external of ``package`` (``gcc@12.2.0`` or ``openmpi``)
    that has some, else []."""
    name, _, version = package.partition("@")
    for ext in (packages.get(name) or {}).get("externals") or []:
        if version and not ext.get("spec", "").startswith(f"{name}@{version}"):
            continue
        if ext.get("modules"):
            return list(ext["modules"])
    return []
