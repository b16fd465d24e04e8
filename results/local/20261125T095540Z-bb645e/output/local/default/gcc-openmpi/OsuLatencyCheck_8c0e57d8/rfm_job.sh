#!/bin/bash
export PATH=/work/main/.sitebench/externals/openmpi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_base_verbose=1
export OMPI_MCA_btl_tcp_if_include=lo
sitebench_launch_start=$(date +%s.%N)
mpirun -np 2 --map-by core --bind-to core --report-bindings /work/main/.sitebench/spack-store/linux-x86_64_v4/osu-micro-benchmarks-git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0_7.2-vzf4sbfyv5qulloiey5eh2gq5n6moycy/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency -m 1:16777216 -x 20 -i 200
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
