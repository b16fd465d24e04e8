# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.hpl.package import Hpl as BuiltinHpl

from spack.package import conflicts, filter_file, maintainers, variant, when


class Hpl(BuiltinHpl):
    """HPL 2.3 (the builtin recipe) with the BLAS the spec asks for, the MPI
    compiler wrapper, and SIMD and optimisation flags chosen per target.

    Differences from the builtin recipe, each fixing a problem seen on real
    sites:

    * HPL's ``configure`` probes ``-lopenblas``, ``-latlas``, ... before the
      ``libs10`` line the builtin recipe rewrites, so ``hpl ^atlas`` silently
      linked a system OpenBLAS. Every probe line now names the spec's BLAS.
    * ``CC`` is the MPI wrapper, so an external MPI whose ``mpi.h`` is outside
      the compiler's search path (Debian's Open MPI) still builds.
    * ``simd`` adds the vector ISA flags of the concrete target (AVX-512 or
      AVX2+FMA on x86_64, SVE or NEON on aarch64) on top of the ``-march`` or
      ``-mcpu`` that Spack's compiler wrapper injects; ``simd=none`` turns the
      vector extensions off, for the "unoptimised HPL" level of comparisons.
    """

    maintainers("sitebench")

    variant(
        "optimization",
        default="O3",
        values=("O0", "O2", "O3"),
        description="Optimisation level of HPL itself (the time is mostly in BLAS)",
    )
    variant(
        "simd",
        default="auto",
        values=("auto", "none"),
        description="auto: vector ISA flags from the target; none: vector extensions off",
    )

    conflicts("@:2.2", msg="sitebench builds HPL 2.3 (autotools); 2.2 needs a Make.<arch> file")

    def simd_flags(self):
        """Compiler flags for the vector ISA of the concrete target (gcc/clang syntax)."""
        target = self.spec.target
        family = str(target.family)
        choice = self.spec.variants["simd"].value
        if family == "x86_64":
            if choice == "none":
                return ["-mno-avx512f", "-mno-avx2", "-mno-fma", "-mno-avx"]
            if "avx512f" in target:
                # gcc defaults to 256-bit vectors even where AVX-512 is enabled
                return ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mprefer-vector-width=512"]
            if "avx2" in target:
                return ["-mavx2", "-mfma"]
            return []
        if family == "aarch64":
            if choice == "none":
                return ["-march=armv8-a+nosimd"]
            if "sve" in target:
                return ["-msve-vector-bits=scalable"]
            return ["-ftree-vectorize"]  # NEON (ASIMD) is part of every ARMv8-A target
        return []

    @when("@2.3:")
    def configure_args(self):
        args = super().configure_args()
        # configure tries libs1..libs10 in order; make them all the spec's BLAS.
        blas = self.spec["blas"].libs.ld_flags
        filter_file(r"^libs([0-9]+)=.*", rf"libs\1='{blas}'", "configure")

        level = "-" + self.spec.variants["optimization"].value
        flags = [level] + self.simd_flags()
        args = [
            a.replace("-O3", " ".join(flags), 1) if a.startswith("CFLAGS=") else a for a in args
        ]
        args.append(f"CC={self.spec['mpi'].mpicc}")
        return args
