"""sysbench OLTP read/write on a private MariaDB server, from 1 client thread to all cores."""

import os
import shlex
import sys

# Plain `reframe -c reframe-checks` works without installing sitebench.
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
sys.path.insert(0, SRC)

import reframe as rfm  # noqa: E402
import reframe.utility.sanity as sn  # noqa: E402
import reframe.utility.typecheck as typ  # noqa: E402
from reframe.core.backends import getlauncher  # noqa: E402
from reframe.core.builtins import (  # noqa: E402
    fixture,
    parameter,
    performance_function,
    run_after,
    sanity_function,
    variable,
)

from sitebench.parsers import ParseError, sysbench  # noqa: E402
from sitebench.services import mariadb_server  # noqa: E402
from sitebench.run import work_estimates  # noqa: E402
from sitebench.run.benchmark import SitebenchBenchmark  # noqa: E402
from sitebench.run.scales import THREAD_LABELS, resolve_threads  # noqa: E402
from sitebench.run.spack_build import SpackBuild  # noqa: E402

#: Rows per table by scale: full as in the study (os-services.md), quick a tenth.
TABLE_SIZE = {"quick": 100_000, "full": 1_000_000}

#: Seconds of each run by scale. Quick: the two cases of a 2-core machine, each with
#: its own server and prepare, fit in about a minute.
RUN_TIME = {"quick": 20, "full": 60}

DATABASE = "sbtest"
PREPARE_OUT = "sysbench-prepare.txt"
RUN_OUT = "sysbench-run.txt"


class SysbenchBuild(SpackBuild):
    """The site's sysbench, built with its MySQL/MariaDB driver."""

    spack_spec = "sysbench"

    @run_after("setup")
    def built_with_gcc_only(self):
        # sysbench 1.0.20's bundled LuaJIT runs `gcc` by name; under Spack's wrappers for
        # another compiler that is not a program ("gcc: Permission denied", Clang 14).
        compilers = (self.current_environ.extras or {}).get("compilers") or {}
        c = compilers.get("c", "gcc")
        self.skip_if(
            c.split("@")[0] != "gcc",
            f"sysbench's bundled LuaJIT builds with GCC only (this toolchain's C: {c})",
        )


class MariadbBuild(SpackBuild):
    """The site's MariaDB (an external on most sites: its prefix holds the server)."""

    spack_spec = "mariadb"


def read_output(stagedir, name):
    """A step's output in the stage; ParseError when the step never ran."""
    path = os.path.join(stagedir, name)
    if not os.path.isfile(path):
        raise ParseError(f"{name} is missing: sysbench did not run (see rfm_job.err)")
    with open(path) as fp:
        return fp.read()


#: sysbench retries a transaction that hit a deadlock or a lock wait timeout and counts it
#: as an ignored error, so a rare one does not spoil the run: 2 threads on the quick
#: table deadlocked once in 27,223 transactions in a CI run (fixture stage-one-deadlock).
#: Above this share, the figure measures contention (8 threads on 10 rows: 748 in 2,382).
MAX_IGNORED_ERRORS_PER_TRANSACTION = 1 / 1000


def verdict(stagedir, num_threads, table_size, tables):
    """Why the run in ``stagedir`` failed, as one message naming the cause; None if it passed.

    In order: the server (did not start, died during the run, did not stop
    cleanly), a sysbench step that failed, the rows prepared, the run's own
    statistics (threads, ignored errors, reconnects).
    """
    try:
        status = mariadb_server.load_status(stagedir)
    except mariadb_server.ServerError as err:
        return str(err)
    problem = mariadb_server.failure(status, stagedir)
    if problem:
        return problem
    try:
        rows = sysbench.prepared_rows(read_output(stagedir, PREPARE_OUT))
        result = sysbench.parse(read_output(stagedir, RUN_OUT))
    except ParseError as err:
        return str(err)
    wanted = {f"sbtest{i}": table_size for i in range(1, tables + 1)}
    if rows != wanted:
        return f"sysbench prepare inserted {rows}, expected {wanted}"
    if result.threads != num_threads:
        return f"sysbench ran {result.threads} threads, expected {num_threads}"
    if result.ignored_errors > result.transactions * MAX_IGNORED_ERRORS_PER_TRANSACTION:
        return (
            f"sysbench counted {result.ignored_errors} ignored errors (deadlocks, lock wait "
            f"timeouts) in {result.transactions} transactions, more than 1 in "
            f"{round(1 / MAX_IGNORED_ERRORS_PER_TRANSACTION)}: the run measured lock "
            f"contention, not the server's throughput"
        )
    if result.reconnects:
        return f"sysbench reconnected {result.reconnects} times to the server, expected 0"
    return None


@rfm.simple_test
class SysbenchCheck(SitebenchBenchmark):
    """``sysbench oltp_read_write`` with ``num_threads`` client threads on a private MariaDB.

    Each case starts its own server (``mariadb-install-db`` into ``<stage>/datadir``,
    ``mariadbd --no-defaults --skip-networking``, unix socket in the stage), prepares
    its own table, runs, and stops the server with ``mariadb-admin shutdown``
    (:mod:`sitebench.services.mariadb_server`). A fresh server and table per thread
    count keep the cases independent: a read/write run leaves changed rows, purge
    work and a warm buffer pool behind, which would favour or burden the next
    count. It costs about 6 s per case on the 2-core VM (measured under load:
    install-db 2.3-2.7 s, start 0.2-0.5 s, prepare of 100,000 rows 2.1-2.4 s,
    shutdown 1.0 s): a quick case took 28 s for its 20 s run.

    Parameters: ``scale``, ``threads`` (label resolved against the cores).
    Variables: ``table_size``, ``tables``, ``run_time`` (0: by scale),
    ``server_options``, ``start_timeout``.
    Figures: ``tps`` (transactions/s), ``qps`` (queries/s), ``p95_latency`` (ms),
    ``errors`` (sysbench's ignored errors, e.g. deadlocks).
    Sanity: the server answered and was alive after the run, then shut down
    cleanly ("MariaDB server died during the run: <its log>" otherwise, the log
    kept); prepare inserted ``table_size`` rows per table; the run printed its
    statistics with ``num_threads`` threads, at most 1 ignored error (a deadlock, retried)
    per 1000 transactions and 0 reconnects.
    Fixtures: :class:`SysbenchBuild`, :class:`MariadbBuild`.
    """

    uses_mpi = False

    threads = parameter(THREAD_LABELS, loggable=True)

    #: Client threads, resolved from ``threads`` at setup.
    #:
    #: :type: :class:`int`
    num_threads = variable(int, value=0, loggable=True)

    #: Rows per table; 0 takes :data:`TABLE_SIZE` of the scale.
    #:
    #: :type: :class:`int`
    table_size = variable(int, value=0, loggable=True)

    #: Tables (``sbtest1`` ...), shared by all threads.
    #:
    #: :type: :class:`int`
    tables = variable(int, value=1, loggable=True)

    #: Seconds of the measured run; 0 takes :data:`RUN_TIME` of the scale.
    #:
    #: :type: :class:`int`
    run_time = variable(int, value=0, loggable=True)

    #: Extra ``mariadbd`` options. 512 MiB of buffer pool hold the full-scale
    #: table (241 MB of data and index, measured), as in the study; everything
    #: else is MariaDB's default.
    #:
    #: :type: :class:`List[str]`
    server_options = variable(
        typ.List[str], value=["--innodb-buffer-pool-size=512M"], loggable=True
    )

    #: Seconds the server may take to answer after it was started.
    #:
    #: :type: :class:`int`
    start_timeout = variable(int, value=60)

    reference_keys = ["scale", "num_threads"]
    problem_keys = ["table_size", "tables"]
    energy_figures = {"tps": "tx/s/W"}
    sysbench_build = fixture(SysbenchBuild, scope="environment")
    mariadb_build = fixture(MariadbBuild, scope="environment")
    num_tasks = 1
    descr = "sysbench OLTP read/write on a private MariaDB (Spack-built)"
    keep_files = [
        PREPARE_OUT,
        RUN_OUT,
        mariadb_server.ERROR_LOG,
        mariadb_server.INSTALL_LOG,
        mariadb_server.STATUS_FILE,
    ]

    def expected_work_s(self):
        # A 1M-row prepare took 6-21 s here; the estimate gives it 330 s.
        rows = self.table_size * self.tables
        return work_estimates.sysbench(rows, self.run_time, self.start_timeout)

    @run_after("setup")
    def set_run(self):
        count = resolve_threads(self.threads, self.processor_cores())
        self.skip_if(count is None, f"threads={self.threads} duplicates or exceeds the cores")
        self.num_threads = count
        self.table_size = self.table_size or TABLE_SIZE[self.scale]
        self.run_time = self.run_time or RUN_TIME[self.scale]
        for name in ("table_size", "tables", "run_time"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive number, got {getattr(self, name)}")
        # Client and server share the node: ask for all of it, run without MPI.
        self.num_cpus_per_task = self.processor_cores()
        self.job.launcher = getlauncher("local")()
        exe = self.binary(self.sysbench_build, "bin/sysbench")
        mariadb_prefix = self.mariadb_build.install_prefix()
        self.concrete_spec += f" ^{self.mariadb_build.concrete_spec()}"
        common = [
            exe,
            "oltp_read_write",
            "--db-driver=mysql",
            "--mysql-socket=@socket@",
            "--mysql-user=@user@",
            f"--mysql-db={DATABASE}",
            f"--tables={self.tables}",
            f"--table-size={self.table_size}",
        ]
        prepare = common + [f"--threads={min(self.num_threads, self.tables)}", "prepare"]
        run = common + [
            f"--threads={self.num_threads}",
            f"--time={self.run_time}",
            "--percentile=95",
            "run",
        ]
        self.env_vars = {"PYTHONPATH": os.path.abspath(SRC)}
        self.executable = sys.executable
        opts = [
            "-m",
            "sitebench.services.mariadb_server",
            f"--prefix={mariadb_prefix}",
            "--workdir=.",
            f"--database={DATABASE}",
            f"--start-timeout={self.start_timeout}",
            *(f"--server-option={opt}" for opt in self.server_options),
            "--step",
            PREPARE_OUT.removesuffix(".txt"),
            shlex.join(prepare),
            "--step",
            RUN_OUT.removesuffix(".txt"),
            shlex.join(run),
        ]
        self.executable_opts = [shlex.quote(opt) for opt in opts]

    def result(self):
        return sysbench.parse(read_output(self.stagedir, RUN_OUT))

    @sanity_function
    def served_and_verified(self):
        problem = verdict(self.stagedir, self.num_threads, self.table_size, self.tables)
        # ReFrame formats sanity messages with str.format: keep braces of logs literal.
        return sn.assert_true(
            problem is None, msg=(problem or "").replace("{", "{{").replace("}", "}}")
        )

    @performance_function("tx/s")
    def tps(self):
        return self.result().tps

    @performance_function("queries/s")
    def qps(self):
        return self.result().qps

    @performance_function("ms")
    def p95_latency(self):
        return self.result().latency_percentile_ms

    @performance_function("count")
    def errors(self):
        return self.result().ignored_errors
