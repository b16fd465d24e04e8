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
echo 'sitebench: npb is installed (listed before ReFrame started)'
printf '%s\n' '/work/main/.sitebench/spack-store/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spac/linux-icelake/npb-3.4.3-ncou54g5anepdl3hlic5msct3fozirc5	npb@3.4.3 build_system=makefile classes:=A,B,C,S,W implementation=mpi names:=cg,ep,ft,is,lu,mg nprocs:=1,2,4,8,16,32,64,128 arch=linux-debian12-icelake /ncou54g5anepdl3hlic5msct3fozirc5' > spack-spec.txt
