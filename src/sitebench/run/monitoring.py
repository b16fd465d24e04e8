"""Open MPI's message monitoring on an MPI check: the multi-core study's message distribution.

A check that mixes in :class:`MessageMonitoring` runs unchanged while ``monitor_messages``
is False (the default: the timed cases are never monitored). Set, it runs the benchmark
under Open MPI's ``pml_monitoring`` (``--mca pml_monitoring_enable 2``, chosen by
``OMPI_MCA_*`` variables that any launcher passes on), asks mpirun where each rank ran
(``--report-bindings``) and, after the benchmark's own figures, logs the distribution of its
messages over the channels (:func:`sitebench.run.channels.figures`) as performance
variables. The per-rank files (``monitoring.<rank>.prof``) are kept with the case's output.

Under MPICH (or any MPI but Open MPI) the case is skipped, saying why: MPICH has no
monitoring component that counts messages per peer, and measuring nothing silently would
store an empty distribution.
"""

import os

import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import PerformanceError
from reframe.core.pipeline import RegressionTestPlugin

from sitebench.parsers import ParseError, ompi_monitoring, osu
from sitebench.run import channels
from sitebench.run.launchers import launcher_name
from sitebench.run.mapping import mpi_of

#: Prefix of the per-rank files in the stage: monitoring.0.prof, monitoring.1.prof, ...
PREFIX = "monitoring"


def monitoring_env(stagedir):
    """The MCA variables that make every rank write ``<stagedir>/monitoring.<rank>.prof``."""
    return {
        "OMPI_MCA_pml_monitoring_enable": "2",
        "OMPI_MCA_pml_monitoring_enable_output": "3",
        "OMPI_MCA_pml_monitoring_filename": os.path.join(stagedir, PREFIX),
    }


def unavailable(mpi, launcher):
    """Why the monitoring cannot run with ``mpi`` and ``launcher`` (None when it can)."""
    if mpi != "openmpi":
        return (
            f"message monitoring is not available under {mpi}: it is Open MPI's pml_monitoring "
            f"component (per-peer message counts and sizes); {mpi} has no such component, so "
            f"the case would measure nothing"
        )
    if launcher != "mpirun":
        return (
            f"message monitoring needs mpirun's --report-bindings to place the ranks on their "
            f"channels; this partition launches with {launcher}"
        )
    return None


class MessageMonitoring(RegressionTestPlugin):
    """Variable ``monitor_messages`` (logged; False: the check is untouched)."""

    #: Run under Open MPI's monitoring and log the message distribution by channel.
    #:
    #: :type: :class:`bool`
    monitor_messages = variable(bool, value=False, loggable=True)

    @run_after("setup")
    def skip_unmonitorable(self):
        if not self.monitor_messages:
            return
        reason = unavailable(mpi_of(self.current_environ), launcher_name(self.job.launcher))
        self.skip_if(reason is not None, reason)

    @run_before("run")
    def monitor_the_launch(self):
        if not self.monitor_messages:
            return
        self.env_vars = {**self.env_vars, **monitoring_env(self.stagedir)}
        self.job.launcher.options = list(self.job.launcher.options) + ["--report-bindings"]
        self.keep_files = self.keep_files + [f"{PREFIX}.*.prof"]

    def message_distribution(self):
        """The run's :class:`~sitebench.run.channels.Distribution` (ParseError, PlacementError
        when the files or the bindings do not give it)."""
        monitoring = ompi_monitoring.read_run(self.stagedir, PREFIX, self.num_tasks)
        with open(os.path.join(self.stagedir, sn.evaluate(self.stderr))) as fp:
            bindings = osu.bindings(fp.read())
        sockets = self.current_partition.processor.num_sockets
        return channels.distribution(monitoring, bindings, sockets)

    @run_before("performance")
    def add_distribution_figures(self):
        self._monitoring_error = None
        if not self.monitor_messages or self.is_dry_run():
            return
        try:
            dist = self.message_distribution()
        except (ParseError, channels.PlacementError, OSError) as err:
            self._monitoring_error = str(err)
            return
        if dist.missing:
            self._monitoring_error = (
                f"ranks {list(dist.missing)} of {dist.ranks} wrote no monitoring file (they "
                f"did not reach MPI_Finalize): the distribution logged is a lower bound"
            )
        for name, (value, unit) in channels.figures(dist).items():
            self.perf_variables[name] = sn.make_performance_function(
                lambda value=value: value, unit
            )

    @run_after("performance")
    def fail_on_monitoring_error(self):
        # After the benchmark's own figures (and any partial distribution) were logged.
        if self.monitor_messages and getattr(self, "_monitoring_error", None):
            raise PerformanceError(f"message monitoring: {self._monitoring_error}")
