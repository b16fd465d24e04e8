#!/bin/bash
export PATH=/work/main/.sitebench/externals/openmpi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,vader
sitebench_launch_start=$(date +%s.%N)
mpirun -np 2 --map-by core --bind-to core --report-bindings /work/main/.sitebench/spack-store/linux-x86_64_v4/jacobi3d-1.0-py5zgfpylpwhm67qwjulzauwuoqdw3qw/bin/jacobi3d -n 120 120 120 -i 200
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
