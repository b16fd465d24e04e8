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
echo 'sitebench: stream is installed (listed before ReFrame started)'
printf '%s\n' '/work/main/.sitebench/spack-store/linux-x86_64_v4/stream-5.10-waat5hlpchophymtbaypjxhl5mfaia2a	stream@5.10+openmp build_system=makefile ntimes=none offset=none optimization=O2 stream_array_size=17000000 stream_type=none arch=linux-debian12-x86_64_v4 /waat5hlpchophymtbaypjxhl5mfaia2a' > spack-spec.txt
