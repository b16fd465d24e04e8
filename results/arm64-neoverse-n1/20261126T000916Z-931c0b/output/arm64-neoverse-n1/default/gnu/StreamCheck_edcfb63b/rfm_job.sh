#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export QEMU_CPU=neoverse-n1
export OMP_NUM_THREADS=2
export OMP_PROC_BIND=spread
export OMP_PLACES=cores
sitebench_launch_start=$(date +%s.%N)
/var/lib/sitebench-state/spack-store/linux-neoverse_n1/stream-5.10-rlfeelms44oukriv2c4z5yzrkq56omwo/bin/stream_c.exe
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
