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
export OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl_tcp_if_include=lo
export SLURM_MPI_TYPE=pmix
spack -e /work/main/environments/local install hpl
spack -e /work/main/environments/local location -i hpl > spack-prefix.txt
spack -e /work/main/environments/local find --format '{name}@{version}{variants} arch={architecture} /{hash}' hpl > spack-spec.txt
