#!/bin/bash
export PATH=/work/main/.sitebench/externals/openmpi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONPATH=/work/main/src
sitebench_launch_start=$(date +%s.%N)
/work/main/.sitebench/venv/bin/python -m sitebench.services.mariadb_server --prefix=/usr --workdir=. --database=sbtest --start-timeout=60 --server-option=--innodb-buffer-pool-size=512M --step sysbench-prepare '/work/main/.sitebench/spack-store/linux-x86_64_v4/sysbench-1.0.20-lvxuqmszzg3tq45gv6y6ucbcyjyauwfn/bin/sysbench oltp_read_write --db-driver=mysql --mysql-socket=@socket@ --mysql-user=@user@ --mysql-db=sbtest --tables=1 --table-size=100000 --threads=1 prepare' --step sysbench-run '/work/main/.sitebench/spack-store/linux-x86_64_v4/sysbench-1.0.20-lvxuqmszzg3tq45gv6y6ucbcyjyauwfn/bin/sysbench oltp_read_write --db-driver=mysql --mysql-socket=@socket@ --mysql-user=@user@ --mysql-db=sbtest --tables=1 --table-size=100000 --threads=2 --time=20 --percentile=95 run'
sitebench_launch_status=$?
echo "$sitebench_launch_start $(date +%s.%N) $sitebench_launch_status" > sitebench-launch.txt
(exit $sitebench_launch_status)
