#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
mpirun -np 1 /work/main/.sitebench/spack-store/linux-x86_64_v4/npb-3.4.3-fpcml3yfcfrpf3qnd7yw5s7hyxthmhrk/bin/ft.A.x
