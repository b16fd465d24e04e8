#!/bin/bash
export PATH=/work/main/.sitebench/externals/mpich/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export HYDRA_TOPO_DEBUG=1
export UCX_TLS=self,sm
sitebench_launch_start=$(date +%s.%N)
mpirun -np 2 -map-by core -bind-to core /work/main/.sitebench/spack-store/linux-x86_64_v4/mpi-ring-1.0-ao7sa5c4fnbd3fuhwx4ofjg6nzbvv3c7/bin/mpi_ring -s 16 -n 20000
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
