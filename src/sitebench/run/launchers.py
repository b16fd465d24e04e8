"""The launcher of the partitions sitebench writes for one machine (scheduler ``local``):
ReFrame's ``mpirun``, made to give any check, sitebench's or another's, what it asked for.

ReFrame's ``mpirun`` launcher writes ``mpirun -np <num_tasks>`` and nothing else. On one
machine that left two checks measuring something else than they claim:

* a single-task check (an OpenMP STREAM, CSCS's DGEMM) is bound by Open MPI 4.1 to one core
  (its default for two ranks or fewer), so its threads share that core: ReFrame's tutorial
  STREAM counted 1 thread, CSCS's put both of its threads on CPU 0, and both passed. MPICH's
  hydra binds nothing. Here a single task gets ``--bind-to none`` (both MPIs read it) unless
  the check chose a binding or placement itself, or asked for one CPU (``num_cpus_per_task
  = 1``: a core is what it asked for);
* a flexible check (``num_tasks = 0``; ReFrame writes the launch line before it works out
  the count) got ``mpirun -np 0``: Open MPI starts one rank per slot, MPICH one. Here it
  gets one node's worth, ``num_tasks_per_node`` (1 when it says none), under both MPIs.

Registered as ``sitebench-mpirun`` by the ReFrame configurations that use it
(``site-configs/local/reframe.py``); :func:`launcher_name` names it ``mpirun`` for the checks'
tables of mpirun options.
"""

from reframe.core.backends import register_launcher
from reframe.core.launchers.mpi import MpirunLauncher

NAME = "sitebench-mpirun"

#: Options by which a check chooses binding or placement itself (Open MPI's and hydra's).
CHOSEN = ("--bind-to", "-bind-to", "--cpu-set", "--cpu-list", "-bind", "--map-by", "-map-by")


def task_count(job, nodes=1):
    """The tasks to start: the job's, or for a flexible job (0 or less) one node's worth
    (``num_tasks_per_node``, else 1) on each of ``nodes``, and no fewer than it asked."""
    if job.num_tasks and job.num_tasks > 0:
        return job.num_tasks
    return max((job.num_tasks_per_node or 1) * nodes, -(job.num_tasks or 0))


def binding_options(job, tasks, options):
    """``['--bind-to', 'none']`` for a single task whose check chose no binding and did not
    ask for one CPU; else []."""
    if tasks != 1 or job.num_cpus_per_task == 1:
        return []
    if any(str(o).split("=")[0] in CHOSEN for o in options):
        return []
    return ["--bind-to", "none"]


def launcher_name(launcher):
    """The name the checks' tables know a launcher by: ``mpirun`` for this one."""
    if isinstance(launcher, SitebenchMpirun):
        return "mpirun"
    return launcher.registered_name


@register_launcher(NAME)
class SitebenchMpirun(MpirunLauncher):
    """``mpirun -np <tasks> [--bind-to none]``: see the module's docstring."""

    def command(self, job):
        tasks = task_count(job)
        return ["mpirun", "-np", str(tasks), *binding_options(job, tasks, self.options)]
