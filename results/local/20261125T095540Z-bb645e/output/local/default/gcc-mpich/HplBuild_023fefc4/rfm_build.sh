#!/bin/bash

_onerror()
{
    exitcode=$?
    echo "-reframe: command \`$BASH_COMMAND' failed (exit code: $exitcode)"
    exit $exitcode
}

trap _onerror ERR

export PATH=/work/main/.sitebench/externals/mpich/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo 'sitebench: hpl is installed (listed before ReFrame started)'
printf '%s\n' '/work/main/.sitebench/spack-store/linux-x86_64_v4/hpl-2.3-h5fac6o5jxhd2nlghg54kje4t6awlhkg	hpl@2.3~openmp build_system=autotools level=tuned simd=auto arch=linux-debian12-x86_64_v4 /h5fac6o5jxhd2nlghg54kje4t6awlhkg' > spack-spec.txt
