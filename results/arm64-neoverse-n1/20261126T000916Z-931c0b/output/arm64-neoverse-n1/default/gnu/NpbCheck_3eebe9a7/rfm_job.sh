#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export QEMU_CPU=neoverse-n1
export OMP_NUM_THREADS=1
sitebench_launch_start=$(date +%s.%N)
mpirun -np 2 /var/lib/sitebench-state/spack-store/linux-neoverse_n1/npb-3.4.3-wsvgzjpdey22y2vqv4k57xcz4mjgyd3a/bin/ep.A.x
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
