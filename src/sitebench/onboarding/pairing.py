"""A toolchain's modules proved against the Spack externals it names.

A toolchain says ``c: gcc@12.2.0, mpi: openmpi@4.1.4, modules: [gcc/12, openmpi/4.1.4]``:
Spack builds with the externals of those specs, ReFrame's job loads those modules. They
must be the same installations. :func:`problems` loads the modules after ``module purge``
in a clean environment (what cron and a batch job have: no login shell's PATH or loaded
modules) and checks that

* every module asked for is still loaded afterwards (Lmod's ``family`` swaps a second
  compiler out; a Tcl ``conflict`` refuses it);
* each compiler whose external comes from a module is the one found on that PATH;
* the MPI wrappers and launcher on that PATH are in the MPI external's prefix.

Each mismatch says what was found, where, and the fix. Onboarding runs it on what it
proposes; ``validate`` on every toolchain of a site.
"""

import os
import re
import shutil
from pathlib import Path

from sitebench.common.errors import SitebenchError

#: What cron gives a job: no login shell's PATH.
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
_KEPT = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR")


def clean_environment(base=None):
    """A cron job's environment: the user's identity and language, PATH of the system
    only, no modules loaded, no MODULEPATH (the site's ``modules.use`` gives it)."""
    base = os.environ if base is None else base
    return {**{k: base[k] for k in _KEPT if k in base}, "PATH": CLEAN_PATH}


def external(packages, spec, modules=()):
    """The external of ``spec`` (``gcc@12.2.0``, ``openmpi``): the one whose modules the
    toolchain loads where several share the spec, else the first; None if none."""
    name, _, version = spec.partition("@")
    found = [
        ext
        for ext in (packages.get(name) or {}).get("externals") or []
        if not version or ext.get("spec", "").startswith(f"{name}@{version}")
    ]
    loaded = [e for e in found if e.get("modules") and set(e["modules"]) <= set(modules)]
    return (loaded or found or [None])[0]


def _same(found, wanted):
    """Whether two paths are one file (a prefix of links to the MPI's programs counts)."""
    try:
        return Path(found).parent == Path(wanted).parent or os.path.samefile(found, wanted)
    except OSError:
        return False


def _owner(packages, program):
    """The spec and modules of the external whose prefix holds ``program``, or None."""
    for name, cfg in packages.items():
        for ext in (cfg or {}).get("externals") or []:
            prefix = ext.get("prefix")
            if prefix and Path(program).parent == Path(prefix) / "bin":
                return ext
    return None


def _is_loaded(module, loaded):
    return any(m == module or m.startswith(f"{module}/") for m in loaded)


def problems(tc, packages, system, env=None):
    """[(problem, fix)] of toolchain ``tc`` against the site's ``packages:`` (see the
    module's docstring), loading in ``env`` (default: :func:`clean_environment`)."""
    env = clean_environment() if env is None else env
    load = f"`{tc.load_command()}`"
    try:
        loaded = system.loaded_environment(list(tc.modules), env, tc.collection or None)
    except SitebenchError as err:
        return [(err.problem, err.fix)]
    found = []
    if "LOADEDMODULES" in loaded:
        now = [m for m in loaded["LOADEDMODULES"].split(":") if m]
        gone = [m for m in tc.modules if not _is_loaded(m, now)]
        if gone:
            found.append(
                (
                    f"toolchain {tc.name!r}: {load} leaves {', '.join(gone)} unloaded "
                    f"(loaded: {', '.join(now) or 'nothing'}): a later module swapped it out "
                    "(Lmod's family) or conflicts with it",
                    "load one module of each family per toolchain: drop "
                    f"{', '.join(gone)} from its modules, or give its compiler a toolchain "
                    "of its own",
                )
            )
    path = loaded.get("PATH", "")
    for lang, spec in tc.compilers.items():
        ext = external(packages, spec, tc.modules)
        program = ((ext or {}).get("extra_attributes") or {}).get("compilers", {}).get(lang)
        if not program or not ext.get("modules"):
            continue  # a compiler not from a module is used by its absolute path
        there = shutil.which(os.path.basename(program), path=path)
        if not there or not _same(there, program):
            found.append(
                (
                    f"toolchain {tc.name!r}: after {load} in a clean environment, "
                    f"{os.path.basename(program)} is {there or 'not on PATH'}, not the "
                    f"{spec} external's {program} ({lang})",
                    f"load that compiler's modules ({', '.join(ext['modules'])}) in the "
                    f"toolchain, or change {lang}: to the compiler those modules give",
                )
            )
    mpi = external(packages, tc.mpi, tc.modules)
    if mpi and mpi.get("prefix"):
        for program in ("mpicc", tc.launcher or "mpirun"):
            if program == "srun":
                continue
            wanted = Path(mpi["prefix"]) / "bin" / program
            if not wanted.exists():
                continue
            there = shutil.which(program, path=path)
            if there and _same(there, wanted):
                continue
            other = _owner(packages, there) if there else None
            fix = (
                f"load the {tc.mpi} external's modules: modules: "
                f"[{', '.join(_with(tc.modules, mpi.get('modules') or []))}]"
                if mpi.get("modules")
                else "load no other MPI's module, or name the MPI those modules give"
            )
            bundles = _bundles(tc)
            if other and bundles:
                # A meta-module or collection is loaded for the MPI it brings: name that
                # one first; loading another MPI's modules means a toolchain without it.
                fix = (
                    f"name the MPI {' and '.join(bundles)} loads: mpi: "
                    f"{_named(other)}; or {fix} (instead of {', '.join(bundles)})"
                )
            elif other:
                fix += f"; or mpi: {_named(other)} (what they load now)"
            found.append(
                (
                    f"toolchain {tc.name!r}: after {load} in a clean environment, {program} "
                    f"is {there or 'not on PATH'}, not in the {tc.mpi} external's prefix "
                    f"{mpi['prefix']}" + (f" (it is {_named(other)}'s)" if other else ""),
                    fix,
                )
            )
            break
    return found


def _named(ext):
    """An external's spec as a toolchain names it: ``openmpi@4.1.4``, without variants."""
    return re.match(r"[\w-]+(@[\w.]+)?", ext["spec"]).group(0)


def _bundles(tc):
    """The meta-modules (``foss/2023a``) and collection a toolchain loads: each loads a
    compiler and an MPI of its own choosing."""
    from sitebench.discovery import module_tree

    metas = [m for m in tc.modules if module_tree.kind_of(m) == "toolchain"]
    return [f"collection {tc.collection}"] * bool(tc.collection) + metas


def _with(modules, mpi_modules):
    """The toolchain's modules with another MPI's replaced by ``mpi_modules``: the
    compiler modules kept, in order, the MPI's (with its parents) after them. A
    meta-module goes too: it would load its own MPI beside (Lmod's family swaps one out,
    a Tcl ``conflict`` refuses it)."""
    from sitebench.discovery import module_tree

    kept = [m for m in modules if module_tree.kind_of(m) not in ("mpi", "toolchain")]
    return list(dict.fromkeys([*kept, *mpi_modules]))
