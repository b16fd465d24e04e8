#!/bin/bash
#SBATCH --job-name="rfm_OsuLatencyCheck_8c0e57d8"
#SBATCH --ntasks=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --output=rfm_job.out
#SBATCH --error=rfm_job.err
#SBATCH --partition=local
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl_tcp_if_include=lo
export SLURM_MPI_TYPE=pmix
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_base_verbose=1
export OMPI_MCA_btl_tcp_if_include=lo
mpirun -np 2 --map-by core --bind-to core --report-bindings /work/main/.sitebench/spack-store/linux-x86_64_v4/osu-micro-benchmarks-git.b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0_7.2-u6t6qlqter55cs5miroj7zq7afyiikjc/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency -m 1:16777216 -x 20 -i 200
