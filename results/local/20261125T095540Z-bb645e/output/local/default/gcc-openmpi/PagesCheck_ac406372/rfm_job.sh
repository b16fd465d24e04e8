#!/bin/bash
export PATH=/work/main/.sitebench/externals/openmpi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
export GLIBC_TUNABLES=glibc.malloc.hugetlb=0
sitebench_launch_start=$(date +%s.%N)
mpirun -np 1 /work/main/.sitebench/spack-store/linux-x86_64_v4/memaccess-1.0-ucayuszyhh5fq7augjetwt7gly2mpe5k/bin/pagewatch /work/main/.sitebench/spack-store/linux-x86_64_v4/npb-3.4.3-jxwfihejdiyuacrzko4gisufcn2epryf/bin/cg.A.x
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
