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
spack -e /work/main/environments/local install /ogcl6f5tx4zlwpxhlpy7gzyitpaaidpc
spack -e /work/main/environments/local find --format '{prefix}	{name}@{version}{variants} arch={architecture} /{hash}' /ogcl6f5tx4zlwpxhlpy7gzyitpaaidpc > spack-spec.txt
