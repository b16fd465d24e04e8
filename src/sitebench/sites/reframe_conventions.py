"""ReFrame's conventions for a programming environment, so checks other than sitebench's
(ReFrame's tutorial, CSCS's, EESSI's, a centre's own) run on every configuration sitebench
writes.

ReFrame's documentation and tutorial checks expect of an environment:

* ``cc``/``cxx``/``ftn``: the compilers its build systems call. sitebench's are the MPI's
  wrappers (``mpicc``...), and a wrapper calls the compiler it was built with unless told
  otherwise: a Clang toolchain's ``mpicc`` would compile with GCC. The wrapper variables
  (Open MPI's ``OMPI_CC``..., MPICH's ``MPICH_CC``...) name the toolchain's own compilers;
* the feature ``openmp`` with ``extras['omp_flag']``, the flag that enables OpenMP
  (``valid_prog_environs = ['+openmp']``, ``cflags = ['-O3', omp_flag]`` in ReFrame's
  STREAM tutorial); a compiler whose flag is unknown gets neither;
* the feature ``mpi`` where ``cc`` builds MPI programs, launched by the partition's
  launcher (ReFrame's OSU tutorial: ``valid_prog_environs = ['+mpi']``);
* a BLAS that links without a flag of the check's own, as Cray's compiler wrappers link
  LibSci: CSCS's DGEMM calls ``dgemm_`` and names no library outside CSCS's own systems.
  The environment's ``ldflags`` (used by a build system that sets none) link the site's
  BLAS behind ``-Wl,--as-needed``, so a program that calls no BLAS does not depend on it;
  the feature ``blas`` says an environment has one.
"""

from pathlib import Path

#: The OpenMP flag of each compiler, by Spack package name.
OMP_FLAGS = {
    "gcc": "-fopenmp",
    "llvm": "-fopenmp",
    "aocc": "-fopenmp",
    "cce": "-fopenmp",
    "acfl": "-fopenmp",
    "intel-oneapi-compilers": "-qopenmp",
    "intel-oneapi-compilers-classic": "-qopenmp",
    "nvhpc": "-mp",
    "fj": "-Kopenmp",
}

#: The variables that choose the compiler behind each MPI's wrappers, per language.
WRAPPER_VARIABLES = {
    "openmpi": {"c": "OMPI_CC", "cxx": "OMPI_CXX", "fortran": "OMPI_FC"},
    "mpich": {"c": "MPICH_CC", "cxx": "MPICH_CXX", "fortran": "MPICH_FC"},
}


def omp_flag(compilers):
    """The OpenMP flag of the toolchain's C compiler (a Spack spec such as ``gcc@12``), or
    None where it is not known."""
    return OMP_FLAGS.get(compilers["c"].split("@")[0])


def compiler_executable(packages, compiler, language):
    """The path of ``compiler`` (``gcc``, ``llvm@15``) for ``language`` from its Spack
    external (``extra_attributes.compilers``), or None."""
    name, _, version = compiler.partition("@")
    for ext in (packages.get(name) or {}).get("externals") or []:
        spec = ext.get("spec", "")
        if version and not spec.startswith(f"{name}@{version}"):
            continue
        found = ((ext.get("extra_attributes") or {}).get("compilers") or {}).get(language)
        if found:
            return found
    return None


def wrapper_variables(packages, compilers, mpi):
    """[[variable, compiler path]] that make ``mpi``'s wrappers call the toolchain's
    compilers (empty for an MPI whose variables are not known)."""
    names = WRAPPER_VARIABLES.get(mpi, {})
    found = []
    for language, variable in names.items():
        path = compiler_executable(packages, compilers[language], language)
        if path:
            found.append([variable, path])
    return found


#: The library each BLAS provider links as (``-l<name>``), by Spack package name.
BLAS_LIBRARIES = {
    "openblas": "openblas",
    "netlib-lapack": "blas",
    "blis": "blis",
    "amdblis": "blis",
}
#: Where a linker finds a library without being told.
SYSTEM_PREFIXES = ("/usr", "/")


def blas_ldflags(packages):
    """The flags that link the site's BLAS (the first ``blas`` provider of ``packages``
    that is an external with a known library), or [] where there is none."""
    providers = ((packages.get("all") or {}).get("providers") or {}).get("blas") or []
    for name in [p.split("@")[0] for p in providers] + list(BLAS_LIBRARIES):
        library = BLAS_LIBRARIES.get(name)
        for ext in (packages.get(name) or {}).get("externals") or [] if library else []:
            prefix = ext.get("prefix")
            if not prefix:
                continue
            if prefix.rstrip("/") in ("", "/usr"):
                return ["-Wl,--as-needed", f"-l{library}"]
            for libdir in (Path(prefix) / "lib", Path(prefix) / "lib64"):
                if any(libdir.glob(f"lib{library}.so*")):
                    return [
                        "-Wl,--as-needed",
                        f"-L{libdir}",
                        f"-Wl,-rpath,{libdir}",
                        f"-l{library}",
                    ]
    return []
