#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
export OMP_PROC_BIND=spread
export OMP_PLACES=cores
/work/main/.sitebench/spack-store/linux-x86_64_v4/stream-5.10-2fhp7qwsve7hvfrjdpb4myqdsj5db3cx/bin/stream_c.exe
