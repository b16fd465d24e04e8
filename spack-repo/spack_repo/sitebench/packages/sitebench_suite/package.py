# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.bundle import BundlePackage

from spack.package import depends_on, maintainers, variant, version


class SitebenchSuite(BundlePackage):
    """The whole sitebench suite for one site: one spec pulls every benchmark.

    Members: STREAM (OpenMP), HPL, NPB-MPI (CG, EP, FT, IS, LU, MG; classes S to
    C), PARSEC blackscholes and fluidanimate, sysbench with the MariaDB client
    and the MariaDB server it drives (usually the site's own, as an external),
    and the OSU micro-benchmarks for MPI ping-pong. Each can be left out with
    its variant, e.g. ``sitebench-suite ~sysbench`` where no database server
    may run.
    """

    homepage = "https://github.com/sitebench/sitebench"
    maintainers("sitebench")

    version("2026.11")

    variant("stream", default=True, description="STREAM memory bandwidth")
    variant("hpl", default=True, description="HPL")
    variant("npb", default=True, description="NAS Parallel Benchmarks (MPI)")
    variant("parsec", default=True, description="PARSEC blackscholes and fluidanimate")
    variant("sysbench", default=True, description="sysbench OLTP on MariaDB")
    variant("osu", default=True, description="OSU MPI ping-pong latency and bandwidth")
    variant("jacobi", default=True, description="sitebench's 3D Jacobi with MPI halo exchange")
    variant("ring", default=True, description="sitebench's MPI ring exchange")
    variant("pages", default=True, description="sitebench's memory-access kernel (page size)")

    depends_on("stream+openmp", type="run", when="+stream")
    depends_on("hpl", type="run", when="+hpl")
    depends_on("npb implementation=mpi", type="run", when="+npb")
    depends_on("parsec-benchmark", type="run", when="+parsec")
    depends_on("sysbench+mysql", type="run", when="+sysbench")
    depends_on("mariadb", type="run", when="+sysbench")
    # The environments' OSU commit b7fc8c57 (@git.b7fc8c57...=7.2), which the sites' mirrors
    # hold, by its recipe name; plain osu-micro-benchmarks is an upstream tarball.
    depends_on("osu-micro-benchmarks@=7.2-b7fc8c5", type="run", when="+osu")
    depends_on("jacobi3d", type="run", when="+jacobi")
    depends_on("mpi-ring", type="run", when="+ring")
    depends_on("memaccess", type="run", when="+pages")
