# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.packages.osu_micro_benchmarks.package import (
    OsuMicroBenchmarks as BuiltinOsuMicroBenchmarks,
)

from spack.package import maintainers, version


class OsuMicroBenchmarks(BuiltinOsuMicroBenchmarks):
    """OSU Micro-Benchmarks (the builtin recipe), also buildable from a git
    commit of a public release import, for sites that cannot download the
    release tarball.

    Everything of the builtin recipe stays: its tarball versions (7.2 pinned by
    sha256 and fetched from mvapich.cse.ohio-state.edu), configure arguments
    (``CC``/``CXX`` = the MPI wrappers, ``LDFLAGS=-lrt``), variants. This
    recipe adds only ``git``, so a spec can name a commit with Spack's
    git-commit version syntax, treated as the release it contains:

        osu-micro-benchmarks@git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0=7.2

    That commit, "Added release 7.2." on branch ``release/7.2`` of
    github.com/yqin/osu-micro-benchmarks, imports the 7.2 release tree
    (generated ``configure`` included; ``AC_INIT`` says 7.2, the programs print
    "v7.2"). It is not checked against the release tarball's sha256, and a
    git source has no checksum of its own: the commit id pins it. Spack stores
    it in a source mirror as ``_source-cache/git/yqin/osu-micro-benchmarks.git/
    <commit>.tar.gz`` (``spack mirror create`` clones the commit when online).
    """

    git = "https://github.com/yqin/osu-micro-benchmarks.git"

    # The same commit as a named version, for dependents: Spack takes commit versions
    # (``@git.<commit>=7.2``) from input specs and configuration only, never from another
    # recipe's depends_on. ``sitebench-suite`` pins this; it is the same source and the same
    # mirror file as the environments' ``@git.b7fc8c57...=7.2``, and satisfies ``@7.2``.
    version("7.2-b7fc8c5", commit="b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0")

    maintainers("sitebench")
