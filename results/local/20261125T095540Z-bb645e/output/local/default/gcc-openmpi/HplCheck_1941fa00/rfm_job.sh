#!/bin/bash
export PATH=/work/main/.sitebench/externals/openmpi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
sitebench_launch_start=$(date +%s.%N)
mpirun -np 2 /work/main/.sitebench/spack-store/linux-x86_64_v4/hpl-2.3-2357pbwxu6aoxsl2ajs2lgxcifuhnsc5/bin/xhpl
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
