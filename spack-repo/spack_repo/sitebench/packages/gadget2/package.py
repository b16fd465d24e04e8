# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import glob
import os
import re

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import (
    FileFilter,
    InstallError,
    depends_on,
    install,
    install_tree,
    license,
    maintainers,
    mkdirp,
    variant,
    version,
)

#: The examples Gadget-2 ships, each with its Makefile options (parameterfiles/<name>.Makefile).
EXAMPLES = ("lcdm_gas", "cluster", "galaxy", "gassphere")

#: The Makefile's own block per target computer is chosen by SYSTYPE; this recipe adds one.
SYSTYPE = "spack"


class Gadget2(MakefilePackage):
    """GADGET-2 (Volker Springel, 2005), the cosmological N-body/SPH code (TreePM gravity,
    entropy-conserving SPH), MPI-parallel, with FFTW 2's MPI transforms for the PM mesh.

    The source: no upstream tarball is reachable offline, so version 2.0.7 is a ``git
    archive`` of the root commit a6140aa2 of ``github:sfebruary/Gadget-2.0.7`` (the
    2.0.7 release committed unchanged; later commits edit the Makefile and lcdm_gas.param,
    and keep the original Makefile as Makefile.original, byte-identical to a6140aa's), made
    with git 2.39.5 and gzip 1.12 as::

        git archive --format=tar --prefix=gadget2-2.0.7/ \\
            a6140aa2afd505c3196168d6f09ce0a33f9d5101 \\
            ':(exclude)ICs/cluster_bigendian.dat' ':(exclude)ICs/cluster_littleendian.dat' \\
            | gzip -n    # sha256 c1eadcbe...45bd

    The two cluster initial conditions are left out: the snapshot sitebench's mirror was
    made from lacks their blobs (git prints "error: invalid object" and exits 0). A site's
    source mirror serves it at ``_source-cache/archive/c1/<sha256>.tar.gz``
    (spack-repo/README.md).

    The Makefile is driven here: its active ``OPT`` lines are replaced by those of the
    example's own ``parameterfiles/<example>.Makefile`` (lcdm_gas: PERIODIC, PEANOHILBERT,
    WALLCLOCK, PMGRID=128, SYNCHRONIZATION), and a ``SYSTYPE="spack"`` block sets the MPI
    compiler wrapper and the GSL and FFTW paths of the spec. FFTW 2 is taken in double
    precision with its ``d``-prefixed names (DOUBLEPRECISION_FFTW: ``-ldrfftw_mpi
    -ldfftw_mpi -ldrfftw -ldfftw``, ``<drfftw_mpi.h>``), which Spack's fftw@2.1.5 builds with
    ``--enable-type-prefix``. Not its ``s`` (single) libraries, lcdm_gas.Makefile's choice:
    Spack's float build of 2.1.5 came out double here (its ``sfftw.h`` leaves
    FFTW_ENABLE_FLOAT undefined, ``libsfftw.a`` is as large as ``libdfftw.a``), and
    Gadget-2 built on them stopped in its first step with infinite PM forces ("A timestep
    of size zero was assigned"). ``+double`` also keeps the particles in double precision
    (DOUBLEPRECISION).

    Installs ``bin/Gadget2`` and, under ``share/gadget2/``, the shipped ``ICs/`` and
    ``parameterfiles/`` (the ``.param`` files name their ICs and output list relative to
    the run directory).
    """

    homepage = "https://wwwmpa.mpa-garching.mpg.de/gadget/"
    # Served by a source mirror only (the archive above); GitHub's own archive of the
    # commit has another sha256.
    url = "https://github.com/sfebruary/Gadget-2.0.7/archive/a6140aa2/gadget2-2.0.7.tar.gz"
    maintainers("sitebench")

    license("GPL-2.0-or-later")

    version("2.0.7", sha256="c1eadcbe58df879d5b2fb46ca1812d29eb8731f83b7d27ee4b4441d7139245bd")

    variant(
        "example",
        default="lcdm_gas",
        values=EXAMPLES,
        description="Compile-time options of this shipped example (parameterfiles/<x>.Makefile)",
    )
    variant("double", default=False, description="Particle data in double precision too")

    depends_on("c", type="build")
    depends_on("gmake", type="build")
    depends_on("mpi")
    depends_on("gsl")
    depends_on("fftw@2.1.5+mpi precision=double")

    build_directory = "Gadget2"

    def example_options(self):
        """The ``OPT += -D...`` lines of the chosen example's Makefile."""
        name = self.spec.variants["example"].value
        path = os.path.join(self.build_directory, "parameterfiles", f"{name}.Makefile")
        with open(path) as fp:
            options = re.findall(r"^OPT\s*\+=\s*(-D\S+)", fp.read(), re.MULTILINE)
        if not options:
            raise InstallError(f"no OPT line in {path}")
        options.append("-DDOUBLEPRECISION_FFTW")
        if self.spec.satisfies("+double"):
            options.append("-DDOUBLEPRECISION")
        return options

    def edit(self, spec, prefix):
        makefile = FileFilter(os.path.join(self.build_directory, "Makefile"))
        # Upstream's own choices (HDF5, UNEQUALSOFTENINGS, SYSTYPE "MPA") go; the example's come.
        makefile.filter(r"^OPT\s*\+=.*$", "")
        makefile.filter(r"^SYSTYPE=.*$", "")
        block = [f'SYSTYPE="{SYSTYPE}"']
        block += [f"OPT += {option}" for option in self.example_options()]
        block += [
            f'ifeq ($(SYSTYPE),"{SYSTYPE}")',
            f"CC       = {spec['mpi'].mpicc}",
            "OPTIMIZE = -O3 -Wall",
            f"GSL_INCL = -I{spec['gsl'].prefix.include}",
            # The Makefile adds -lgsl -lgslcblas and the FFTW libraries itself.
            f"GSL_LIBS = {spec['gsl'].libs.search_flags}",
            f"FFTW_INCL= -I{spec['fftw'].prefix.include}",
            f"FFTW_LIBS= -L{spec['fftw'].prefix.lib}",
            "MPICHLIB =",
            "HDF5INCL =",
            "HDF5LIB  =",
            "endif",
        ]
        header = "#--------------------------------------- Adjust settings for target computer"
        makefile.filter(f"^{header}$", "\n".join(block + ["", header]))

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install(os.path.join(self.build_directory, "Gadget2"), prefix.bin)
        share = os.path.join(prefix.share, "gadget2")
        install_tree("ICs", os.path.join(share, "ICs"))
        params = os.path.join(share, "parameterfiles")
        mkdirp(params)
        for path in glob.glob(os.path.join(self.build_directory, "parameterfiles", "*")):
            if not path.endswith(".Makefile"):
                install(path, params)
