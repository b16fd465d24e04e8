# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import Executable, depends_on, maintainers, mkdirp, version

_HERE = os.path.dirname(os.path.abspath(__file__))


class Jacobi3d(Package):
    """sitebench's 3D Jacobi stencil with MPI halo exchange (Cartesian decomposition).

    The source is ``jacobi3d.c`` beside this recipe: fetched from the package directory
    (no download) and verified by its sha256, so an edited source is refused until the
    checksum here is updated. Installs ``bin/jacobi3d``; see the source's header for the
    output and the known-solution check.
    """

    homepage = "https://github.com/sitebench/sitebench"
    # The version carries its own url: Spack would read "3d" of "jacobi3d.c" as a version.
    url = f"file://{_HERE}/jacobi3d.c"
    maintainers("sitebench")

    version(
        "1.0",
        sha256="02c4eafe82bedc7fc173c8f78dc73f465e69d04f561b19bf22400550aeb3e874",
        url=f"file://{_HERE}/jacobi3d.c",
        expand=False,
    )

    depends_on("c", type="build")
    depends_on("mpi")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        mpicc = Executable(spec["mpi"].mpicc)
        mpicc("-O2", "-Wall", "-o", prefix.bin.jacobi3d, "jacobi3d.c", "-lm")
