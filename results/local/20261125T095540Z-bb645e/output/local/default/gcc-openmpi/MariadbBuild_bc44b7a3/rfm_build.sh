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
echo 'sitebench: mariadb is installed (listed before ReFrame started)'
printf '%s\n' '/usr	mariadb@10.11.19+nonblocking build_system=cmake build_type=Release generator=make arch=linux-debian12-x86_64 /reta4mv43k5pukqkidsapwhkfgdmrjs5' > spack-spec.txt
