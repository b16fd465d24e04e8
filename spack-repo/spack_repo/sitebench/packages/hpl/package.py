# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.hpl.package import Hpl as BuiltinHpl

from spack.package import (
    InstallError,
    conflicts,
    filter_file,
    join_path,
    maintainers,
    requires,
    run_after,
    variant,
    when,
)

#: Vector extensions switched off, per target family (the wrapper's -march enables them).
NO_SIMD = {
    "x86_64": ["-mno-avx512f", "-mno-avx2", "-mno-fma", "-mno-avx"],
    "aarch64": ["-march=armv8-a+nosimd"],
}


def simd_flags(target, choice, compiler="gcc", compiler_version="12.2.0"):
    """Compiler flags for the vector ISA of ``target`` (an archspec microarchitecture).

    ``auto``: the widest vector ISA of the target (AVX-512, AVX2+FMA; SVE, NEON).
    ``neon``: aarch64 without SVE, even on an SVE target (NEON-only build).
    ``none``: vector extensions off (the "unoptimised HPL" of the study).
    """
    family = str(target.family)
    if choice == "none":
        return list(NO_SIMD.get(family, []))
    if family == "x86_64":
        if "avx512f" in target:
            # gcc defaults to 256-bit vectors even where AVX-512 is enabled
            return ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mprefer-vector-width=512"]
        if "avx2" in target:
            return ["-mavx2", "-mfma"]
        return []
    if family == "aarch64":
        if choice == "neon":
            cpu = [f for f in target.optimization_flags(compiler, compiler_version).split()]
            mcpu = [f for f in cpu if f.startswith("-mcpu=")]
            return [mcpu[0] + "+nosve"] if mcpu else ["-march=armv8.2-a+nosve"]
        if "sve" in target:
            return ["-msve-vector-bits=scalable"]
        return ["-ftree-vectorize"]  # NEON (ASIMD) is part of every ARMv8-A target
    return []


class Hpl(BuiltinHpl):
    """HPL 2.3 (the builtin recipe) with the BLAS the spec asks for, the MPI
    compiler wrapper, SIMD and optimisation flags chosen per target, and the
    optimisation levels of the ARM-cluster study.

    Differences from the builtin recipe, each fixing a problem seen on real
    sites:

    * HPL's ``configure`` probes ``-lopenblas``, ``-latlas``, ... before the
      ``libs10`` line the builtin recipe rewrites, so ``hpl ^atlas`` silently
      linked a system OpenBLAS. Every probe line now names the spec's BLAS.
    * ``CC`` is the MPI wrapper, so an external MPI whose ``mpi.h`` is outside
      the compiler's search path (Debian's Open MPI) still builds.
    * ``simd`` adds the vector ISA flags of the concrete target on top of the
      ``-march``/``-mcpu`` that Spack's compiler wrapper injects.
    * ``level`` reproduces the study's executions, so its speed-ups can be
      measured on any site: 1 = reference BLAS and unoptimised HPL (-O0, no
      vector ISA); 2 = a tuned BLAS, HPL still unoptimised; 3 = a tuned BLAS
      and HPL at -O3 with the target's SIMD flags. ``tuned`` (the default) is
      -O3 with ``simd`` and whatever BLAS the site chose.
    """

    maintainers("sitebench")

    variant(
        "level",
        default="tuned",
        values=("tuned", "1", "2", "3"),
        description="tuned: -O3 + simd, site's BLAS; 1/2/3: the ARM-cluster study's executions",
    )
    variant(
        "simd",
        default="auto",
        values=("auto", "neon", "none"),
        when="level=tuned",
        description="auto: widest vector ISA of the target; neon: aarch64 without SVE; none: off",
    )

    requires(
        "^[virtuals=blas] netlib-lapack",
        when="level=1",
        msg="execution 1 of the study runs on the reference BLAS (netlib-lapack)",
    )
    conflicts(
        "^[virtuals=blas] netlib-lapack",
        when="level=2",
        msg="execution 2 of the study needs a tuned BLAS, not the reference one",
    )
    conflicts(
        "^[virtuals=blas] netlib-lapack",
        when="level=3",
        msg="execution 3 of the study needs a tuned BLAS, not the reference one",
    )
    conflicts("simd=neon", when="target=x86_64:", msg="simd=neon is for aarch64 targets")
    conflicts("@:2.2", msg="sitebench builds HPL 2.3 (autotools); 2.2 needs a Make.<arch> file")

    def hpl_flags(self):
        """Optimisation and vector ISA flags of HPL itself for this spec."""
        level = self.spec.variants["level"].value
        if level in ("1", "2"):
            return ["-O0"] + simd_flags(self.spec.target, "none")
        choice = "auto" if level == "3" else self.spec.variants["simd"].value
        name, version = self.compiler.name, str(self.compiler.version)
        return ["-O3"] + simd_flags(self.spec.target, choice, name, version)

    @when("@2.3:")
    def configure_args(self):
        args = super().configure_args()
        # configure tries libs1..libs10 in order (read back from a here-document, so
        # no quotes), then falls back to -lopenblas, -latlas, ... from the system:
        # make every probe the spec's BLAS, and check_blas() refuses any fallback.
        blas = self.spec["blas"].libs.ld_flags
        filter_file(r"^libs([0-9]+)=.*", rf"libs\1={blas}", "configure")

        flags = " ".join(self.hpl_flags())
        args = [a.replace("-O3", flags, 1) if a.startswith("CFLAGS=") else a for a in args]
        args.append(f"CC={self.spec['mpi'].mpicc}")
        return args

    @run_after("configure", when="@2.3:")
    def check_blas(self):
        """Fail the build if configure linked anything but the spec's BLAS."""
        wanted = self.spec["blas"].libs.ld_flags
        with open(join_path(self.build_directory, "Makefile")) as makefile:
            libs = [line for line in makefile if line.startswith("LIBS =")]
        if not libs or wanted not in libs[0]:
            raise InstallError(
                f"HPL's configure chose {libs[0].strip() if libs else 'no LIBS'!r}, not the "
                f"spec's BLAS ({wanted}): it fell back to a system library"
            )
