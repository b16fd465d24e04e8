"""The Debian packages a fresh machine needs for the README's two commands.

README.md's fresh-machine ``apt-get install`` line lists exactly :data:`RUN` and :data:`TEST`
(``tests/test_debian_packages.py`` reads the line and compares). Every package the code or
the tests detect or name in an ``apt-get install`` hint is in :data:`RUN`, :data:`TEST` or
:data:`OPTIONAL` (the same test scans them), so a hint added anywhere cannot leave the README
behind.
"""

#: ``./sitebench run``: the quick suite on this machine, every benchmark built from the
#: source mirror. Spack's own prerequisites (make, patch, the archivers, file, git), the
#: toolchains Spack takes as externals (compilers, Open MPI and MPICH: two toolchains),
#: OpenBLAS, Debian's reference
#: BLAS/LAPACK (registered as netlib-lapack: its recipe cannot be built offline), the
#: autotools HPL's build needs, MariaDB for sysbench (without a detected MariaDB the
#: ``mariadb`` root is built from source), MPJ Express and a JDK for the Java ping-pong.
RUN = (
    "git",
    "python3-venv",
    "make",
    "patch",
    "bzip2",
    "xz-utils",
    "unzip",
    "file",
    "gcc",
    "g++",
    "gfortran",
    "openmpi-bin",
    "libopenmpi-dev",
    "mpich",
    "libmpich-dev",
    "libopenblas-dev",
    "libblas3",
    "liblapack3",
    "autoconf",
    "automake",
    "libtool",
    "autoconf-archive",
    "mariadb-server",
    "libmariadb-dev",
    "libmariadb-dev-compat",
    # The Java ping-pong: MPJ Express 0.44 (its jars, with log4j and commons-io) and the JDK
    # that builds it and Open MPI's mpi.jar (environments/local/spack.yaml's externals).
    "libmpj-java",
    "default-jdk-headless",
    # Gadget-2's GSL (environments/local/spack.yaml's external gsl).
    "libgsl-dev",
    # The Clang toolchain detection proposes beside GCC's (default: false, so a plain run
    # neither builds nor runs it: `run --toolchain clang-openmpi` or `all` does).
    "clang",
    "libomp-dev",
)

#: ``./sitebench test`` beyond that: Debian's HPCC (the perf suite's STREAM and HPL
#: baselines), Chromium (the report opened headless), the private Slurm cluster (slurmdbd
#: accounting, munge), cron (the nightly schedule) and Lmod (toolchains from environment
#: modules; tests/README.md unpacks the Tcl Environment Modules beside it, as Debian's
#: packages of the two conflict). Without them those tests skip.
TEST = (
    "hpcc",
    "chromium",
    "slurm-wlm",
    "slurm-client",
    "slurmdbd",
    "munge",
    "cron",
    "lmod",
)

#: Named by hints but needed by neither command: the emulated aarch64 site
#: (``./sitebench qemu-prepare``) and systemd (always on Debian; its tests skip without it).
OPTIONAL = (
    # A site whose modules are the Tcl Environment Modules (conflicts with lmod).
    "environment-modules",
    "debootstrap",
    "qemu-user-static",
    "binfmt-support",
    "binutils-aarch64-linux-gnu",
    "systemd",
)

ALL = RUN + TEST
