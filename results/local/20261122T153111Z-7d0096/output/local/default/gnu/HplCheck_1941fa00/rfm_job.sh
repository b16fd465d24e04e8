#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
mpirun -np 2 /work/main/.sitebench/spack-store/linux-x86_64_v4/hpl-2.3-dp3t4x4jr5cp7raiu5xdoi3mvlzsarbn/bin/xhpl
