#!/bin/bash
export PATH=/work/main/.sitebench/externals/mpich/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
sitebench_launch_start=$(date +%s.%N)
mpirun -np 2 /work/main/.sitebench/spack-store/linux-x86_64_v4/hpl-2.3-h5fac6o5jxhd2nlghg54kje4t6awlhkg/bin/xhpl
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
