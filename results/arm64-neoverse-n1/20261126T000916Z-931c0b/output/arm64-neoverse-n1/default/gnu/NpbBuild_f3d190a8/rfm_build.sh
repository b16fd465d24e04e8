#!/bin/bash

_onerror()
{
    exitcode=$?
    echo "-reframe: command \`$BASH_COMMAND' failed (exit code: $exitcode)"
    exit $exitcode
}

trap _onerror ERR

export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export QEMU_CPU=neoverse-n1
spack -e /work/main/environments/arm64-neoverse-n1 install npb
spack -e /work/main/environments/arm64-neoverse-n1 find --format '{prefix}	{name}@{version}{variants} arch={architecture} /{hash}' npb > spack-spec.txt
