"""Toolchains in the report: a site's compiler set and MPI, run as the ReFrame programming
environment of that name (the figures' ``environ``).

The MPI is known from the name by convention only (``<compilers>-<mpi>``: ``gcc-mpich``,
``gcc-openmpi``); runs made before sites declared toolchains have the environment ``gnu``,
GCC with Open MPI. A name that follows no convention is shown as it is, with no MPI.
"""

#: The last part of a toolchain's name, and the MPI it names (the longest match wins).
MPI_NAMES = {
    "openmpi": "Open MPI",
    "ompi": "Open MPI",
    "mpich": "MPICH",
    "cray-mpich": "Cray MPICH",
    "mvapich": "MVAPICH",
    "mvapich2": "MVAPICH",
    "intelmpi": "Intel MPI",
    "intel-mpi": "Intel MPI",
    "impi": "Intel MPI",
    "intel-oneapi-mpi": "Intel MPI",
    "hpcx": "HPC-X (Open MPI)",
    "hpcx-mpi": "HPC-X (Open MPI)",
}
#: Environments of runs made before toolchains, and their MPI.
LEGACY = {"gnu": "Open MPI"}


def mpi_of(environ):
    """The MPI a toolchain's name says (``gcc-mpich`` -> ``MPICH``), or None."""
    if not isinstance(environ, str) or not environ:
        return None
    name = environ.lower()
    if name in LEGACY:
        return LEGACY[name]
    for suffix in sorted(MPI_NAMES, key=len, reverse=True):
        if name == suffix or name.endswith("-" + suffix):
            return MPI_NAMES[suffix]
    return None


def toolchain_label(environ, mpi=True):
    """``gcc-mpich (MPICH)``; the name alone when ``mpi`` is false or the MPI is unknown."""
    name = environ if isinstance(environ, str) and environ else "?"
    which = mpi_of(environ) if mpi else None
    return f"{name} ({which})" if which else name


def series_labels(partitions, environs, mpi=True):
    """One label per row naming what tells its curve apart: the toolchain (with its MPI when
    ``mpi``) where rows have more than one, the partition where they have more than one;
    (labels, legend title), or (None, None) when all rows are one series."""
    partitions, environs = [str(p) for p in partitions], list(environs)
    by_partition = len(set(partitions)) > 1
    by_toolchain = len(set(map(str, environs))) > 1
    if not (by_partition or by_toolchain):
        return None, None
    labels, title = [], []
    if by_partition:
        title.append("partition")
    if by_toolchain:
        title.append("toolchain (MPI)" if mpi else "toolchain")
    for partition, environ in zip(partitions, environs):
        parts = [partition] if by_partition else []
        parts += [toolchain_label(environ, mpi)] if by_toolchain else []
        labels.append(" / ".join(parts))
    return labels, " / ".join(title)
