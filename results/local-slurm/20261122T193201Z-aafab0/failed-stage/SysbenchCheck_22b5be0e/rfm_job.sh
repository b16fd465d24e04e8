#!/bin/bash
#SBATCH --job-name="rfm_SysbenchCheck_22b5be0e"
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --output=rfm_job.out
#SBATCH --error=rfm_job.err
#SBATCH --time=0:10:20
#SBATCH --partition=local
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl_tcp_if_include=lo
export SLURM_MPI_TYPE=pmix
export PYTHONPATH=/work/main/src
/work/main/.sitebench/venv/bin/python -m sitebench.rfm.mariadb_server --prefix=/usr --workdir=. --database=sbtest --start-timeout=60 --server-option=--innodb-buffer-pool-size=512M --step sysbench-prepare '/work/main/.sitebench/spack-store/linux-x86_64_v4/sysbench-1.0.20-lvxuqmszzg3tq45gv6y6ucbcyjyauwfn/bin/sysbench oltp_read_write --db-driver=mysql --mysql-socket=@socket@ --mysql-user=@user@ --mysql-db=sbtest --tables=1 --table-size=100000 --threads=1 prepare' --step sysbench-run '/work/main/.sitebench/spack-store/linux-x86_64_v4/sysbench-1.0.20-lvxuqmszzg3tq45gv6y6ucbcyjyauwfn/bin/sysbench oltp_read_write --db-driver=mysql --mysql-socket=@socket@ --mysql-user=@user@ --mysql-db=sbtest --tables=1 --table-size=100000 --threads=1 --time=20 --percentile=95 run'
