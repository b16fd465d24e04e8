#!/bin/bash
#SBATCH --job-name="rfm_StreamCheck_edcfb63b"
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --output=rfm_job.out
#SBATCH --error=rfm_job.err
#SBATCH --partition=local
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl_tcp_if_include=lo
export SLURM_MPI_TYPE=pmix
export OMP_NUM_THREADS=2
export OMP_PROC_BIND=spread
export OMP_PLACES=cores
/work/main/.sitebench/spack-store/linux-x86_64_v4/stream-5.10-2fhp7qwsve7hvfrjdpb4myqdsj5db3cx/bin/stream_c.exe
