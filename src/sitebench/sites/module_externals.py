"""Compilers, MPIs and BLAS offered as environment modules, made Spack externals.

For each module whose family (its name up to the first ``/``) is one the suite builds with
(:data:`FAMILIES`), the module is loaded alone after ``module purge``
(:meth:`~sitebench.sites.modules.ModulesSystem.loaded_environment`), and Spack's own
detection (``spack compiler find``, ``spack external find --path``) looks only at the
directories it put on ``PATH`` (and, for BLAS, ``LD_LIBRARY_PATH``/``LIBRARY_PATH``).
Whatever it finds becomes an external with ``modules: [<module>]``, which Spack loads when
it builds with it. A module that fails to load, or names a prefix that is not there, is a
note of the report, not the end of onboarding; so is one in which Spack finds nothing.

Hierarchical module trees (Lmod's MPI modules that appear only once a compiler is loaded)
are not walked: their MPIs are found when the tree's first level lists them.
"""

import os
import sys

from sitebench.common.errors import SitebenchError
from sitebench.sites import local_site

#: Module family -> what Spack looks for behind it.
FAMILIES = {
    **dict.fromkeys(("gcc", "gnu", "clang", "llvm", "aocc", "nvhpc", "oneapi"), "compiler"),
    **dict.fromkeys(("openmpi", "open-mpi", "ompi", "mpich", "mvapich2", "mvapich"), "mpi"),
    **dict.fromkeys(("openblas",), "blas"),
}
MPI_PACKAGES = ("openmpi", "mpich", "mvapich2")
BLAS_PACKAGES = ("openblas",)


def family(module):
    return module.split("/")[0].lower()


def _detect(spack, kind, dirs, env):
    """``packages:`` of ``kind`` Spack's detection finds in ``dirs``, in ``env``."""
    if kind == "compiler":
        return local_site.spack_detection(
            spack, [["compiler", "find", "--scope", "user", *dirs]], env
        )
    search = [a for d in dirs for a in ("--path", d)]
    wanted = MPI_PACKAGES if kind == "mpi" else BLAS_PACKAGES
    # Open MPI's detection asks which configured compiler built it: configure the ones on
    # the module's PATH first (without any, its recipe fails to detect).
    steps = [
        ["compiler", "find", "--scope", "user"],
        ["external", "find", "--scope", "user", "--not-buildable", *search, *wanted],
    ]
    found = local_site.spack_detection(spack, steps, env)
    return {k: v for k, v in found.items() if k in wanted}


def _search_dirs(kind, system, module):
    """The directories ``module`` adds where Spack should look for ``kind``."""
    if kind != "blas":
        return system.added_path([module])
    before = system.loaded_environment([])
    after = system.loaded_environment([module])
    dirs = []
    for var in ("LD_LIBRARY_PATH", "LIBRARY_PATH"):
        old = set(before.get(var, "").split(":"))
        dirs += [d for d in after.get(var, "").split(":") if d and d not in old and d not in dirs]
    return dirs


def detect(spack, system):
    """(``packages:`` of the externals behind modules, notes)."""
    packages, notes = {}, []
    names = system.avail()
    wanted = [n for n in names if family(n) in FAMILIES]
    print(
        f"==> {system.kind}: {len(names)} modules, {len(wanted)} of them compilers, MPIs or "
        "BLAS to look into",
        file=sys.stderr,
    )
    for module in wanted:
        kind = FAMILIES[family(module)]
        try:
            dirs = _search_dirs(kind, system, module)
            loaded = system.loaded_environment([module])
        except SitebenchError as err:
            notes.append(f"module {module}: {err.problem}: left out")
            continue
        found = _detect(spack, kind, dirs, loaded) if dirs else {}
        externals = [
            (pkg, ext) for pkg, cfg in found.items() for ext in cfg.get("externals") or []
        ]
        if not externals:
            notes.append(f"module {module}: Spack found no {kind} in {', '.join(dirs) or 'it'}")
            continue
        for pkg, ext in externals:
            ext["modules"] = [module]
            entry = packages.setdefault(pkg, {"externals": []})
            entry["externals"].append(ext)
            if found[pkg].get("buildable") is False:
                entry["buildable"] = False
    return packages, notes


def from_shell(spack):
    """(the modules system with this shell's MODULEPATH recorded as its ``use``, the
    externals behind its modules, notes), or (None, {}, []) where the shell has no modules
    system or no MODULEPATH. Recorded: cron and batch jobs may not set MODULEPATH."""
    from sitebench.sites import modules

    use = tuple(d for d in os.environ.get("MODULEPATH", "").split(":") if d)
    system = modules.find() if use else None
    if system is None:
        return None, {}, []
    system = modules.ModulesSystem(system.kind, system.command, use)
    found, notes = detect(spack, system)
    return system, found, notes


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
