# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import Executable, depends_on, maintainers, mkdirp, version

_HERE = os.path.dirname(os.path.abspath(__file__))


class Memaccess(Package):
    """sitebench's memory-access kernel: streaming and random reads, small or large pages.

    The source is ``memaccess.c`` beside this recipe: fetched from the package directory
    (no download) and verified by its sha256. Installs ``bin/memaccess`` (the kernel, which
    reads its own /proc/self/smaps_rollup to prove its page size) and ``bin/pagewatch``
    (runs any program and reports its peak AnonHugePages, e.g. NPB's ranks).
    """

    homepage = "https://github.com/sitebench/sitebench"
    url = f"file://{_HERE}/memaccess.c"
    maintainers("sitebench")

    version(
        "1.0",
        sha256="92051f5ab3dee978e1366e23a33ded091de575a24ef0d36c9d074c6d63286587",
        url=f"file://{_HERE}/memaccess.c",
        expand=False,
    )

    depends_on("c", type="build")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        cc = Executable(os.environ["CC"])
        cc("-O2", "-Wall", "-o", prefix.bin.memaccess, "memaccess.c")
        cc("-O2", "-Wall", "-DPAGEWATCH", "-o", prefix.bin.pagewatch, "memaccess.c")
