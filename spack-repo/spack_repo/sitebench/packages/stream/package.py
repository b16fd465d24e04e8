# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.stream.package import Stream as BuiltinStream

from spack.package import FileFilter, maintainers, variant, version

# jeffhammond/STREAM master on 2025-02-17: stream.c "Revision 5.10" (2013-01-17)
# plus one typo fix in a warning printed only under -DN.
_COMMIT = "6703f7504a38a8da96b353cadafa64d3c2d7a2d3"


class Stream(BuiltinStream):
    """STREAM memory-bandwidth benchmark, pinned to a checksummed source snapshot.

    The builtin recipe builds whatever the default branch of the git
    repository holds (no commit, no checksum), which cannot be reproduced.
    This recipe keeps the builtin build and variants and pins the source:
    the GitHub archive of one commit, verified by sha256.

    Variants used by sitebench: ``+openmp`` and ``stream_array_size`` (the
    number of elements per array, which STREAM fixes at compile time; a
    site sets it to at least four times its last-level cache).
    """

    homepage = "https://www.cs.virginia.edu/stream/ref.html"
    url = f"https://github.com/jeffhammond/STREAM/archive/{_COMMIT}.tar.gz"
    maintainers("sitebench")

    version(
        "5.10",
        sha256="977651ffb22de4f5a2fc8a0d8d647b84f3f007c0a77bbdc36ce583872b203f67",
        url=f"https://github.com/jeffhammond/STREAM/archive/{_COMMIT}.tar.gz",
    )

    # -O2 by default, as the builtin recipe: on x86_64_v4 (AVX-512) gcc 12's -O3 Triad ran
    # 22 % slower on one thread (18.7 against 23.9 GB/s, `./sitebench perf stream`).
    variant(
        "optimization",
        default="O2",
        values=("O2", "O3"),
        description="Optimisation level (-O3 was slower than -O2 on x86_64_v4 with gcc 12)",
    )

    def edit(self, spec, prefix):
        super().edit(spec, prefix)
        level = spec.variants["optimization"].value
        makefile = FileFilter("Makefile")
        makefile.filter(r"^(CFLAGS = .*)-O2", rf"\1-{level}")
        makefile.filter(r"^(FFLAGS = .*)-O2", rf"\1-{level}")
