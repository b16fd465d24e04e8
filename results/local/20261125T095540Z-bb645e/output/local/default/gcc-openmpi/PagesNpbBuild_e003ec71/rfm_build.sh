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
echo 'sitebench: npb is installed (listed before ReFrame started)'
printf '%s\n' '/work/main/.sitebench/spack-store/linux-x86_64_v4/npb-3.4.3-jxwfihejdiyuacrzko4gisufcn2epryf	npb@3.4.3 build_system=makefile classes:=A,B,C,S,W implementation=mpi names:=cg,ep,ft,is,lu,mg nprocs:=1,2,4,8,16,32,64,128 arch=linux-debian12-x86_64_v4 /jxwfihejdiyuacrzko4gisufcn2epryf' > spack-spec.txt
