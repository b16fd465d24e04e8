#!/bin/bash
#SBATCH --job-name="rfm_NpbMessagesCheck_5c627ac8"
#SBATCH --ntasks=4
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --output=rfm_job.out
#SBATCH --error=rfm_job.err
#SBATCH --partition=local
export PATH=/root/.cache/sitebench/externals/openmpi/bin:$PATH
export OMPI_CC=/usr/bin/gcc
export OMPI_CXX=/usr/bin/g++
export OMPI_FC=/usr/bin/gfortran
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=10.213.0.1/24
export OMPI_MCA_btl_tcp_if_include=10.213.0.1/24
export SLURM_MPI_TYPE=pmix
export OMPI_MCA_hwloc_base_binding_policy=core:overload-allowed
export OMPI_MCA_mpi_yield_when_idle=1
export OMP_NUM_THREADS=1
export OMPI_MCA_pml_monitoring_enable=2
export OMPI_MCA_pml_monitoring_enable_output=3
export OMPI_MCA_pml_monitoring_filename=/work/main/.sitebench/reframe-runs/20261126T165857Z-78db98/stage/local-slurm/mpirun/gcc-openmpi/NpbMessagesCheck_5c627ac8/monitoring
sitebench_launch_start=$(date +%s.%N)
mpirun -np 4 --report-bindings /work/main/.sitebench/spack-store/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spack_path_placeholder__/__spac/linux-icelake/npb-3.4.3-ncou54g5anepdl3hlic5msct3fozirc5/bin/lu.A.x
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
