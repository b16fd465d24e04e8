#!/bin/bash

_onerror()
{
    exitcode=$?
    echo "-reframe: command \`$BASH_COMMAND' failed (exit code: $exitcode)"
    exit $exitcode
}

trap _onerror ERR

export PATH=/root/.cache/sitebench/externals/openmpi/bin:$PATH
export OMPI_CC=/usr/bin/gcc
export OMPI_CXX=/usr/bin/g++
export OMPI_FC=/usr/bin/gfortran
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=10.213.0.1/24
export OMPI_MCA_btl_tcp_if_include=10.213.0.1/24
export SLURM_MPI_TYPE=pmix
export OMPI_MCA_hwloc_base_binding_policy=core:overload-allowed
export OMPI_MCA_mpi_yield_when_idle=1
echo 'sitebench: hpl is installed (listed before ReFrame started)'
printf '%s\n' '/work/main/.sitebench/spack-store/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spac/linux-icelake/hpl-2.3-aqg4dbbzasysirpjo3uazxwh2zqgsmaw	hpl@2.3~openmp build_system=autotools level=tuned simd=auto arch=linux-debian12-icelake /aqg4dbbzasysirpjo3uazxwh2zqgsmaw' > spack-spec.txt
