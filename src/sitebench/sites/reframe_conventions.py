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
  launcher (ReFrame's OSU tutorial: ``valid_prog_environs = ['+mpi']``).
"""

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
