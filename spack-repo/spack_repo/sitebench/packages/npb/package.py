# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import glob
import os

from spack_repo.builtin.packages.npb.package import Npb as BuiltinNpb

from spack.package import maintainers, variant


class Npb(BuiltinNpb):
    """NAS Parallel Benchmarks (the builtin recipe) with the benchmarks and
    problem classes sitebench runs as the defaults.

    The builtin recipe builds every benchmark in every class by default,
    including the large classes D, E and F (FT class D alone works on a
    2048 x 1024 x 1024 complex grid, 32 GiB per array; F on 8192 x 4096 x
    4096, 2 TiB), which no test machine and few nodes can run. Here the defaults
    are the kernels CG, EP, FT, IS, MG and the LU pseudo-application in
    classes S to C; either list can still be set in the spec, e.g.
    ``npb names=cg,ep classes=S,W`` or ``classes=D`` on a large system.

    Everything else is the builtin recipe: NPB 3.4.3 (the default version)
    with ``implementation=mpi``, the MPI compiler wrappers, ``-O3`` and,
    with gfortran 10 or newer, ``-fallow-argument-mismatch``. Binaries are
    ``bin/<name>.<CLASS>.x``; NPB 3.4 takes the process count at run time.

    One fix: NPB's ``sys/print_header`` and ``sys/print_instructions`` are shell
    scripts without ``#!``, which make runs only because exec fails with ENOEXEC and
    GNU make retries with /bin/sh. Under QEMU user emulation (the aarch64 site
    arm64-neoverse-n1) posix_spawn does not report that failure and the build stops
    with "Error 127"; a ``#!/bin/sh`` line makes them scripts everywhere.
    """

    maintainers("sitebench")

    variant(
        "names",
        default="cg,ep,ft,is,lu,mg",
        values=BuiltinNpb.valid_names,
        multi=True,
        description="Benchmarks to build (the builtin default adds bt and sp)",
    )
    variant(
        "classes",
        default="S,W,A,B,C",
        values=BuiltinNpb.valid_classes,
        multi=True,
        description="Problem classes to build (the builtin default adds D, E and F)",
    )

    def patch(self):
        for path in glob.glob(os.path.join(self.stage.source_path, "*", "sys", "print_*")):
            with open(path) as script:
                text = script.read()
            if not text.startswith("#!"):
                with open(path, "w") as script:
                    script.write("#!/bin/sh\n" + text)
