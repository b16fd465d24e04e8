#!/bin/bash
export PATH=/work/main/.sitebench/externals/openmpi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PARSEC_CPU_NUM=1
export PARSEC_CPU_BASE=0
/work/main/.sitebench/spack-store/linux-x86_64_v4/parsec-benchmark-3.0-vnrc4zkp2ayjxplsi5dqpehibef64rfn/bin/inputgen 2000000 in_2000000.txt
sitebench_start=$(date +%s.%N)
sitebench_launch_start=$(date +%s.%N)
/work/main/.sitebench/spack-store/linux-x86_64_v4/parsec-benchmark-3.0-vnrc4zkp2ayjxplsi5dqpehibef64rfn/bin/blackscholes 1 in_2000000.txt prices.txt
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
sitebench_status=$?
sitebench_end=$(date +%s.%N)
echo "[sitebench] exit status $sitebench_status, started $sitebench_start, ended $sitebench_end"
exit $sitebench_status
