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
echo 'sitebench: memaccess is installed (listed before ReFrame started)'
printf '%s\n' '/work/main/.sitebench/spack-store/linux-x86_64_v4/memaccess-1.0-ucayuszyhh5fq7augjetwt7gly2mpe5k	memaccess@1.0 build_system=generic arch=linux-debian12-x86_64_v4 /ucayuszyhh5fq7augjetwt7gly2mpe5k' > spack-spec.txt
