# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os
import tarfile

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import (
    conflicts,
    depends_on,
    install,
    maintainers,
    mkdirp,
    requires,
    resource,
    variant,
    version,
    working_dir,
)

# connorimes/parsec-3.0, "Initial parsec-3.0 source" (2015-11-11): the PARSEC 3.0 release
# (its ``version`` file says 3.0-beta-20150206). Princeton's own download server is gone.
_COMMIT = "6e9fdffb9263c24c6af6b3501f9ae6f8e2d91c8c"

# Only these trees are checked out (git sparse checkout, cone mode: the files at the top of
# the repository come along, among them ``version``). The whole commit is 38 MB of other
# benchmarks, and one of their blobs (a splash2 raytrace input) is missing from the copies
# this project's offline mirror was made from. Changing this list changes the mirror path.
_SPARSE_PATHS = ["pkgs/apps/blackscholes", "pkgs/apps/fluidanimate", "pkgs/libs/hooks"]

# Multi2Sim/m2s-bench-parsec-3.0 "Added vips benchmark": the only public copy of the
# simsmall and simmedium fluidanimate inputs (the PARSEC sim/native input tarballs are not
# mirrored anywhere public). Plain files, checksummed.
_M2S_COMMIT = "afc7d27d702438a80714a34e9b6f7b62ef433223"
_M2S_RAW = f"https://raw.githubusercontent.com/Multi2Sim/m2s-bench-parsec-3.0/{_M2S_COMMIT}"

#: fluidanimate input sets: file name, and where it comes from (a tar file in the PARSEC
#: sources, or a path in the Multi2Sim repository with its sha256).
FLUIDANIMATE_INPUTS = {
    "test": ("in_5K.fluid", "input_test.tar", None),
    "simdev": ("in_15K.fluid", "input_simdev.tar", None),
    "simsmall": (
        "in_35K.fluid",
        "fluidanimate/data-small/in_35K.fluid",
        "0a649e52c616ee52ef24038b1d4dae316520f517c122f45fa16755b761ada5a6",
    ),
    "simmedium": (
        "in_100K.fluid",
        "fluidanimate/data-medium/in_100K.fluid",
        "40bf640c419080111ee44a9946545489e695b4b8cf2ac5f7b280de365714294e",
    ),
}

_BLACKSCHOLES = "pkgs/apps/blackscholes/src"
_FLUIDANIMATE = "pkgs/apps/fluidanimate/src"
_HOOKS = "pkgs/libs/hooks/src"


class ParsecBenchmark(MakefilePackage):
    """PARSEC 3.0 (Princeton Application Repository for Shared-Memory Computers):
    the blackscholes and fluidanimate benchmarks, pthreads builds.

    Not Spack's builtin ``parsec``, which is ICL's PaRSEC task runtime, an unrelated
    project: hence the name ``parsec-benchmark``.

    Why a recipe of our own: there is no Princeton PARSEC package in Spack, and
    ``parsecmgmt`` (the suite's build tool) builds into its own tree. This recipe builds
    the two benchmarks the way ``parsecmgmt -a build -c gcc-pthreads`` (``~hooks``) or
    ``-c gcc-hooks`` (``+hooks``) does: the benchmarks' own Makefiles, with the flags of
    ``config/gcc.bldconf`` (-O3 -g -funroll-loops -fprefetch-loop-arrays, C++ also
    -fpermissive -fno-exceptions, -static-libgcc, -DPARSEC_VERSION=...). Spack's
    compiler wrapper adds the target's -march. The hooks library is linked statically
    (its ``Makefile.static``), so no run-time library path is needed.

    Source: the PARSEC 3.0 release as committed to github.com/connorimes/parsec-3.0 (the
    Princeton download server is unreachable), a sparse checkout of the three trees used,
    pinned by commit. Its blackscholes and fluidanimate trees are identical (same git
    tree ids) to those of bamos/parsec-benchmark, an independent copy of a 3.0 beta.

    Installed: ``bin/blackscholes``, ``bin/inputgen`` (writes blackscholes inputs of any
    size, byte-identical to PARSEC's: 4 test, 16 simdev, 4096 simsmall, 16384 simmedium,
    65536 simlarge, 10000000 native options), ``bin/fluidanimate``, ``bin/fluidcmp``
    (compares two .fluid files), and the fluidanimate inputs chosen by ``inputs`` in
    ``share/parsec-benchmark/inputs/fluidanimate/`` (test in_5K, simdev in_15K, simsmall
    in_35K, simmedium in_100K). Run: ``blackscholes NTHREADS in.txt prices.txt``;
    ``fluidanimate NTHREADS FRAMES in.fluid out.fluid`` (NTHREADS a power of 2; PARSEC
    runs 1 frame for test, 3 for simdev, 5 for the sim sets, 500 for native).

    Variants: ``benchmarks`` (which to build), ``hooks`` (ROI timing: the programs then
    print "[HOOKS] Total time spent in ROI: ...s"; without, they print no time at all;
    with hooks, PARSEC_CPU_NUM and PARSEC_CPU_BASE in the environment pin the process to
    that range of CPUs),
    ``inputs`` (fluidanimate input sets to install; simlarge and native are in no public
    copy, so they conflict).
    """

    homepage = "https://parsec.cs.princeton.edu/"
    git = "https://github.com/connorimes/parsec-3.0.git"
    maintainers("sitebench")

    version("3.0", commit=_COMMIT, git_sparse_paths=_SPARSE_PATHS)

    variant(
        "benchmarks",
        values=("blackscholes", "fluidanimate"),
        default="blackscholes,fluidanimate",
        multi=True,
        description="Benchmarks to build",
    )
    variant(
        "hooks",
        default=True,
        description="Link the PARSEC hooks library: ROI begin/end and time printed",
    )
    variant(
        "inputs",
        values=("test", "simdev", "simsmall", "simmedium", "simlarge", "native"),
        default="test,simdev,simsmall,simmedium",
        multi=True,
        when="benchmarks=fluidanimate",
        description="fluidanimate input sets to install (blackscholes has bin/inputgen)",
    )

    conflicts(
        "inputs=simlarge",
        msg="fluidanimate simlarge (in_300K.fluid, from parsec-3.0-input-sim.tar.gz) is in no "
        "public copy of PARSEC; available input sets: test, simdev, simsmall, simmedium",
    )
    conflicts(
        "inputs=native",
        msg="fluidanimate native (in_500K.fluid, from parsec-3.0-input-native.tar.gz) is in no "
        "public copy of PARSEC; available input sets: test, simdev, simsmall, simmedium",
    )

    # PARSEC ships flags for GCC only (config/gcc.bldconf); Clang takes them too, less the
    # one it does not implement (-fprefetch-loop-arrays, ignored with a warning).
    requires(
        "%gcc",
        "%llvm",
        policy="one_of",
        msg="the build uses the flags of PARSEC's config/gcc.bldconf (GCC or Clang)",
    )

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("m4", type="build", when="benchmarks=blackscholes")

    for _set, (_name, _path, _sha256) in FLUIDANIMATE_INPUTS.items():
        if _sha256:
            resource(
                name=f"fluidanimate-{_set}",
                url=f"{_M2S_RAW}/{_path}",
                sha256=_sha256,
                expand=False,
                destination="m2s-inputs",
                placement={_name: _name},
                when=f"benchmarks=fluidanimate inputs={_set}",
            )

    def parsec_flags(self):
        """CFLAGS, CXXFLAGS, LDFLAGS and LIBS as ``parsecmgmt`` sets them for gcc (Clang:
        without -fprefetch-loop-arrays, with -std=gnu++98)."""
        source = self.stage.source_path
        with open(os.path.join(source, "version")) as f:
            parsec_version = f.read().strip()
        common = "-O3 -g -funroll-loops"
        cxx = "-fpermissive -fno-exceptions"
        if self.spec.satisfies("%c=llvm"):
            # C++98, the language PARSEC 3.0 is written in: in C++11 and later Clang reads
            # "Version "__PARSEC_XSTRING(...) as a user-defined literal (GCC warns only).
            cxx = f"-std=gnu++98 {cxx}"
        else:
            common += " -fprefetch-loop-arrays"
        portability = "-static-libgcc -Wl,--hash-style=both,--as-needed"
        define = f"-DPARSEC_VERSION={parsec_version}"
        flags = {
            "CFLAGS": f"{common} {portability} {define}",
            "CXXFLAGS": f"{common} {cxx} {portability} {define}",
            "LDFLAGS": "",
            "LIBS": "",
        }
        if self.spec.satisfies("+hooks"):
            hooks = os.path.join(source, _HOOKS)
            for var in ("CFLAGS", "CXXFLAGS"):
                flags[var] += f" -DENABLE_PARSEC_HOOKS -I{hooks}/include"
            flags["LDFLAGS"] = f"-L{hooks}"
            flags["LIBS"] = "-lhooks"
        return flags

    def build(self, spec, prefix):
        make = self.module.make
        env = self.parsec_flags()
        env["version"] = "pthreads"  # the Makefiles' switch, as in gcc-pthreads.bldconf
        if spec.satisfies("+hooks"):
            with working_dir(_HOOKS):
                make("-f", "Makefile.static", "RANLIB=ranlib", extra_env=env)
        if spec.satisfies("benchmarks=blackscholes"):
            env["M4"] = spec["m4"].prefix.bin.m4
            with working_dir(_BLACKSCHOLES):
                # serial: its target depends on "clean" and on the m4 output
                make(parallel=False, extra_env=env)
                make("inputgen", extra_env=env)
        if spec.satisfies("benchmarks=fluidanimate"):
            with working_dir(_FLUIDANIMATE):
                make(extra_env=env)

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        share = os.path.join(prefix.share, "parsec-benchmark")
        mkdirp(share)
        install("LICENSE", share)
        if spec.satisfies("benchmarks=blackscholes"):
            install(f"{_BLACKSCHOLES}/blackscholes", prefix.bin)
            install(f"{_BLACKSCHOLES}/inputgen", prefix.bin)
            install(f"{_BLACKSCHOLES}/COPYRIGHT", os.path.join(share, "COPYRIGHT.blackscholes"))
        if spec.satisfies("benchmarks=fluidanimate"):
            install(f"{_FLUIDANIMATE}/fluidanimate", prefix.bin)
            install(f"{_FLUIDANIMATE}/fluidcmp", prefix.bin)
            install(f"{_FLUIDANIMATE}/COPYRIGHT", os.path.join(share, "COPYRIGHT.fluidanimate"))
            inputs = os.path.join(share, "inputs", "fluidanimate")
            mkdirp(inputs)
            for size in spec.variants["inputs"].value:
                name, path, sha256 = FLUIDANIMATE_INPUTS[size]
                if sha256:
                    install(os.path.join("m2s-inputs", name), inputs)
                else:
                    tar = os.path.join("pkgs/apps/fluidanimate/inputs", path)
                    with tarfile.open(tar) as archive:
                        member = archive.extractfile(name)
                        assert member is not None, f"{name} missing from {tar}"
                        with open(os.path.join(inputs, name), "wb") as out:
                            out.write(member.read())
