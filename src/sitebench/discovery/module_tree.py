"""A site's module tree walked whole, as production clusters lay it out.

* **Flat**: every module listed by ``module avail`` (``gcc/12``, ``openmpi/4.1.4``).
* **Hierarchical** (Lmod's and EasyBuild's layout): ``MODULEPATH`` holds ``Core/`` only;
  loading ``gcc/12`` adds ``Compiler/gcc/12/``, where the MPIs built with it live. Lmod's
  spider (:meth:`~sitebench.sites.modules.ModulesSystem.spider`) gives every module with
  the parents it needs; a Tcl tree has no spider and is walked by loading each compiler
  (then each MPI) and listing what appears below it.
* **Category-style names** (``compiler/gcc/12``, ``mpi/openmpi/4.1``): the family is the
  first part of the name that is one (:func:`family_of`).
* **Meta-modules** (EasyBuild's ``foss/2023a``, Cray's ``PrgEnv-gnu``): a module that
  loads a compiler and an MPI; :data:`TOOLCHAIN_MODULES` names the usual ones, and any
  module under a ``toolchain`` category is one too.

MPI families (:data:`MPI_FAMILIES`) are recognised by module name and by the programs the
module puts on ``PATH`` (:func:`recognise_mpi`); those sitebench cannot test here are named
in the onboarding review, not proposed.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from sitebench.common.errors import SitebenchError

#: Module family -> what Spack looks for behind it.
FAMILIES = {
    **dict.fromkeys(("gcc", "gnu", "clang", "llvm", "aocc", "nvhpc", "oneapi"), "compiler"),
    **dict.fromkeys(("openmpi", "open-mpi", "ompi", "mpich"), "mpi"),
    **dict.fromkeys(("hpcx", "hpc-x", "hpcx-ompi", "hpcx-mpi"), "mpi"),
    **dict.fromkeys(("mvapich2", "mvapich", "mvapich2-x", "mvapich-plus"), "mpi"),
    **dict.fromkeys(("impi", "intel-mpi", "intelmpi", "intel-oneapi-mpi"), "mpi"),
    **dict.fromkeys(("cray-mpich",), "mpi"),
    **dict.fromkeys(("openblas",), "blas"),
}

#: MPI family -> (what a centre calls it, Spack's package, tested here by sitebench).
MPI_FAMILIES = {
    "openmpi": ("Open MPI", "openmpi", True),
    "mpich": ("MPICH", "mpich", True),
    "hpcx": ("HPC-X (Open MPI based)", "openmpi", True),
    "mvapich": ("MVAPICH2/MVAPICH", "mvapich2", False),
    "intel-mpi": ("Intel MPI", "intel-oneapi-mpi", False),
    "cray-mpich": ("Cray MPICH", "cray-mpich", False),
}
_MPI_BY_NAME = {
    **dict.fromkeys(("openmpi", "open-mpi", "ompi"), "openmpi"),
    "mpich": "mpich",
    **dict.fromkeys(("hpcx", "hpc-x", "hpcx-ompi", "hpcx-mpi"), "hpcx"),
    **dict.fromkeys(("mvapich2", "mvapich", "mvapich2-x", "mvapich-plus"), "mvapich"),
    **dict.fromkeys(("impi", "intel-mpi", "intelmpi", "intel-oneapi-mpi"), "intel-mpi"),
    "cray-mpich": "cray-mpich",
}
#: How a loaded MPI shows itself: (environment variable or program on PATH, family), in
#: the order asked (HPC-X and MVAPICH2 ship Open MPI's and MPICH's programs too).
_MPI_SIGNS = (
    ("env:CRAY_MPICH_DIR", "cray-mpich"),
    ("env:HPCX_DIR", "hpcx"),
    ("env:I_MPI_ROOT", "intel-mpi"),
    ("impi_info", "intel-mpi"),
    ("mpiicc", "intel-mpi"),
    ("mpiname", "mvapich"),
    ("ompi_info", "openmpi"),
    ("mpichversion", "mpich"),
)

#: Meta-modules that load a compiler and an MPI (EasyBuild's toolchains, Cray's PrgEnv).
TOOLCHAIN_MODULES = ("foss", "gompi", "gompic", "gmpich", "gmvapich2", "iimpi", "intel", "iompi")
TOOLCHAIN_PREFIXES = ("prgenv-",)
#: Category parts of a name (``compiler/gcc/12``) that are not the family themselves.
CATEGORIES = ("compiler", "compilers", "mpi", "lib", "libs", "math", "numlib", "toolchain")


def family_of(name):
    """The family of a module name: ``gcc`` for ``gcc/12`` and ``compiler/gcc/12``;
    ``foss`` for ``toolchain/foss/2023a``; else its first part, lower case."""
    parts = [p.lower() for p in name.split("/")]
    for part in parts[:-1] or parts:
        if part in FAMILIES or _is_toolchain_name(part):
            return part
    return parts[0]


def _is_toolchain_name(part):
    return part in TOOLCHAIN_MODULES or part.startswith(TOOLCHAIN_PREFIXES)


def kind_of(name):
    """``compiler``, ``mpi``, ``blas``, ``toolchain`` (a meta-module) or None."""
    family = family_of(name)
    if family in FAMILIES:
        return FAMILIES[family]
    parts = [p.lower() for p in name.split("/")[:-1]]
    if _is_toolchain_name(family) or "toolchain" in parts:
        return "toolchain"
    return None


def is_category_style(name):
    """Whether ``name`` reads its family after a category (``mpi/openmpi/4.1``)."""
    return family_of(name) != name.split("/")[0].lower()


def recognise_mpi(name, added_dirs=(), loaded=None):
    """The MPI family (a key of :data:`MPI_FAMILIES`) of module ``name``: by what loading
    it set (``$CRAY_MPICH_DIR``, ``$HPCX_DIR``, ``$I_MPI_ROOT``) and put on PATH (Intel's
    ``impi_info``, MVAPICH's ``mpiname``, Open MPI's ``ompi_info``, MPICH's
    ``mpichversion``), else by its name; None when neither says."""
    loaded = loaded or {}
    for sign, family in _MPI_SIGNS:
        if sign.startswith("env:"):
            if loaded.get(sign[4:]):
                return family
        elif any((Path(d) / sign).exists() for d in added_dirs):
            if family == "openmpi" and "hpcx" in name.lower():
                return "hpcx"
            return family
    return _MPI_BY_NAME.get(family_of(name))


@dataclass(frozen=True)
class Entry:
    """A module of the tree: its name, the modules to load before it (its parents in a
    hierarchy, in order), its kind (:func:`kind_of`), Lmod's ``family`` and stickiness."""

    name: str
    parents: tuple = ()
    kind: str = None
    lmod_family: str = ""
    sticky: bool = False

    @property
    def modules(self):
        return [*self.parents, self.name]


def walk(system, env=None):
    """(every compiler, MPI, BLAS and meta-module of the tree as :class:`Entry`, notes)."""
    spider = system.spider(env)
    if spider:
        return _from_spider(spider)
    return _by_loading(system, env)


def _from_spider(spider):
    entries, notes, seen = [], [], set()
    for entry in spider.values():
        name = entry.get("fullName")
        if not name or entry.get("hidden"):
            continue
        options = [tuple(p) for p in entry.get("parentAA") or [] if isinstance(p, list)]
        # The fewest parents; among those the first spider lists (a plain name before a
        # category-style alias of the same module).
        parents = min(options, key=len) if options else ()
        sticky = bool(((entry.get("propT") or {}).get("lmod") or {}).get("sticky"))
        item = Entry(name, parents, kind_of(name), entry.get("family") or "", sticky)
        if (name, parents) in seen:
            continue
        seen.add((name, parents))
        if item.kind or sticky:
            entries.append(item)
    entries.sort(key=lambda e: (len(e.parents), _natural(e.name)))
    return entries, notes


def _natural(name):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name.lower())]


#: Levels walked below the top of a Tcl tree: compiler, then MPI.
DEPTH = 2


def _by_loading(system, env):
    """A tree without spider (Tcl): what ``avail`` lists at the top, then what appears once
    each compiler (then each MPI below it) is loaded."""
    notes, listings = [], {}

    def listed(loaded):
        if loaded not in listings:
            listings[loaded] = system.avail(env, loaded=loaded)
        return listings[loaded]

    entries = [Entry(n, (), kind_of(n)) for n in listed(()) if kind_of(n)]
    level = [e for e in entries if e.kind == "compiler"]
    for depth in range(DEPTH):
        below = []
        for parent in level:
            try:
                here = listed(tuple(parent.modules))
                above = set(listed(parent.parents))
            except SitebenchError as err:
                notes.append(f"module {parent.name}: {err.problem}: not walked below")
                continue
            for name in here:
                if name in above or not kind_of(name):
                    continue
                item = Entry(name, tuple(parent.modules), kind_of(name))
                entries.append(item)
                if depth == 0 and item.kind == "mpi":
                    below.append(item)
        level = below
    return entries, notes
