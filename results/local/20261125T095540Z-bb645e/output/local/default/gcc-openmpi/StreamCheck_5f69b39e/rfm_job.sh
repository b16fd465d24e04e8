#!/bin/bash
export PATH=/work/main/.sitebench/externals/openmpi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
export OMP_PROC_BIND=spread
export OMP_PLACES=cores
sitebench_launch_start=$(date +%s.%N)
/work/main/.sitebench/spack-store/linux-x86_64_v4/stream-5.10-waat5hlpchophymtbaypjxhl5mfaia2a/bin/stream_c.exe
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
