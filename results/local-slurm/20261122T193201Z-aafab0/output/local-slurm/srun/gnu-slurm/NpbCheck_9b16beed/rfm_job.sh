#!/bin/bash
#SBATCH --job-name="rfm_NpbCheck_9b16beed"
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
export OMP_NUM_THREADS=1
srun --cpus-per-task=1 /work/main/.sitebench/spack-store/linux-x86_64_v4/npb-3.4.3-fpcml3yfcfrpf3qnd7yw5s7hyxthmhrk/bin/ft.A.x
