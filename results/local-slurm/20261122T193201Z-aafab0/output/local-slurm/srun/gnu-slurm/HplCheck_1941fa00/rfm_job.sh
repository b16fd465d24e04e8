#!/bin/bash
#SBATCH --job-name="rfm_HplCheck_1941fa00"
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
export OPENBLAS_NUM_THREADS=1
srun --cpus-per-task=1 /work/main/.sitebench/spack-store/linux-x86_64_v4/hpl-2.3-dp3t4x4jr5cp7raiu5xdoi3mvlzsarbn/bin/xhpl
