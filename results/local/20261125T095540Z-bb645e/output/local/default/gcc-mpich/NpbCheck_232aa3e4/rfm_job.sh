#!/bin/bash
export PATH=/work/main/.sitebench/externals/mpich/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
sitebench_launch_start=$(date +%s.%N)
mpirun -np 1 /work/main/.sitebench/spack-store/linux-x86_64_v4/npb-3.4.3-7nwdrp3wz3piav6lhws4y2cqg22e5jgg/bin/is.A.x
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
