#!/bin/bash

_onerror()
{
    exitcode=$?
    echo "-reframe: command \`$BASH_COMMAND' failed (exit code: $exitcode)"
    exit $exitcode
}

trap _onerror ERR

export PATH=/work/main/.sitebench/externals/openmpi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo 'sitebench: osu-micro-benchmarks is installed (listed before ReFrame started)'
printf '%s\n' '/work/main/.sitebench/spack-store/linux-x86_64_v4/osu-micro-benchmarks-git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0_7.2-vzf4sbfyv5qulloiey5eh2gq5n6moycy	osu-micro-benchmarks@git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0=7.2~cuda~graphing~papi~rocm build_system=autotools commit=b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0 arch=linux-debian12-x86_64_v4 /vzf4sbfyv5qulloiey5eh2gq5n6moycy' > spack-spec.txt
