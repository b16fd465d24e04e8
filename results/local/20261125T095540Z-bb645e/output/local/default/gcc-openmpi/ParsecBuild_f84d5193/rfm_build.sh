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
spack -e /work/main/environments/local install /vnrc4zkp2ayjxplsi5dqpehibef64rfn
spack -e /work/main/environments/local find --format '{prefix}	{name}@{version}{variants} arch={architecture} /{hash}' /vnrc4zkp2ayjxplsi5dqpehibef64rfn > spack-spec.txt
