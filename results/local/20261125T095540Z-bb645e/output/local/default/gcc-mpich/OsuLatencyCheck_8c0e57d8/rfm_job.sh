#!/bin/bash
export PATH=/work/main/.sitebench/externals/mpich/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export HYDRA_TOPO_DEBUG=1
export UCX_TLS=tcp
export UCX_LOG_LEVEL=info
export UCX_LOG_FILE=stderr
export MPIR_CVAR_NOLOCAL=1
export UCX_NET_DEVICES=lo
sitebench_launch_start=$(date +%s.%N)
mpirun -np 2 -map-by core -bind-to core /work/main/.sitebench/spack-store/linux-x86_64_v4/osu-micro-benchmarks-git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0_7.2-six6niilc6f4lgfrtqb4vrbg3bxcbqaz/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency -m 1:16777216 -x 20 -i 200
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
