# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import Executable, depends_on, maintainers, mkdirp, version

_HERE = os.path.dirname(os.path.abspath(__file__))


class MpiRing(Package):
    """sitebench's MPI ring: each rank exchanges a message with both neighbours per step.

    The source is ``mpi_ring.c`` beside this recipe: fetched from the package directory
    (no download) and verified by its sha256. Installs ``bin/mpi_ring``, which prints the
    time per ring step and checks the count and contents of every message.
    """

    homepage = "https://github.com/sitebench/sitebench"
    url = f"file://{_HERE}/mpi_ring.c"
    maintainers("sitebench")

    version(
        "1.0",
        sha256="b9d3e352ffb59bd5208287e7f1e1519a464f09e589801a2871dafd34333ba6f4",
        url=f"file://{_HERE}/mpi_ring.c",
        expand=False,
    )

    depends_on("c", type="build")
    depends_on("mpi")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        mpicc = Executable(spec["mpi"].mpicc)
        mpicc("-O2", "-Wall", "-o", prefix.bin.mpi_ring, "mpi_ring.c")
