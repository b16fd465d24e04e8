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
echo 'sitebench: sysbench is installed (listed before ReFrame started)'
printf '%s\n' '/work/main/.sitebench/spack-store/linux-x86_64_v4/sysbench-1.0.20-lvxuqmszzg3tq45gv6y6ucbcyjyauwfn	sysbench@1.0.20+mysql build_system=autotools arch=linux-debian12-x86_64_v4 /lvxuqmszzg3tq45gv6y6ucbcyjyauwfn' > spack-spec.txt
