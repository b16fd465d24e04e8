"""Whether other work shared the machine while a benchmark ran, and whether it is busy now.

Right before and after the launch the job appends a snapshot to ``sitebench-cpu.txt``: the
time (``/proc/uptime``), the machine's aggregate ``cpu`` line of ``/proc/stat`` and the CPU
time of the job's own processes, every process of its session (ReFrame's local scheduler
starts each job in a session of its own, so daemons a check starts, like sysbench's
MariaDB, count as its own) with their reaped children. Other work's CPU over the launch
is the machine's busy time (user, nice, system, irq, softirq and steal: time the
hypervisor gave to other guests) minus the job's own; averaged over the launch's wall
time it is in cores, ``foreign_cores``. A case is *disturbed* when that exceeds
``DISTURBED_SHARE`` of the machine's CPUs (0.1: 0.2 cores of the project's 2-core VM, where
ReFrame's own polling took 0.03 cores of a quick suite). A snapshot took 37 ms of wall time
(10 ms of CPU) on the 2-core VM at a load average of 8.7. Measured where the job runs on
the machine ReFrame runs on (scheduler ``local``); under Slurm the ranks are not the job
script's session.
"""

import os
import re
from dataclasses import dataclass

CPU_FILE = "sitebench-cpu.txt"
#: Other work's CPU, as a share of the machine's CPUs, above which a case is disturbed.
DISTURBED_SHARE = 0.1

#: One snapshot, "<uptime s> cpu <user> <nice> <system> <idle> ... <own ticks>", in two
#: processes (each costs the run time): `cat` (not awk on the glob, which stops at a
#: process that ended meanwhile) and `awk`. The job shell leads its session, so its pid is
#: the session id.
SNAPSHOT = (
    "cat /proc/uptime /proc/stat /proc/[0-9]*/stat 2>/dev/null | awk -v sid=$$ "
    "'NR == 1 {t = $1} /^cpu / {c = $0} "
    '/^[0-9]+ \\(/ {s = $0; sub(/^.*\\) /, "", s); split(s, a, " "); '
    "if (a[4] == sid) n += a[12] + a[13] + a[14] + a[15]} "
    f"END {{print t, c, n + 0}}' >> {CPU_FILE}"
)


@dataclass(frozen=True)
class Share:
    """CPU over the launch: wall seconds, the job's own and the machine's busy CPU seconds."""

    wall_s: float
    own_s: float
    busy_s: float
    cpus: int

    @property
    def foreign_cores(self):
        return max(0.0, self.busy_s - self.own_s) / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def disturbed(self):
        return self.foreign_cores > DISTURBED_SHARE * self.cpus


def busy_ticks(cpu_fields):
    """Busy clock ticks of a /proc/stat ``cpu`` line's numbers (user nice system idle iowait
    irq softirq steal ...): all but idle and iowait (guest time is inside user)."""
    values = [int(v) for v in cpu_fields]
    return sum(values) - values[3] - values[4] - sum(values[8:10])


def parse(text, cpus=None, hz=None):
    """The Share of a job's ``sitebench-cpu.txt`` (two snapshots), or ValueError."""
    hz = hz or os.sysconf("SC_CLK_TCK")
    snaps = []
    for line in text.splitlines():
        if not re.fullmatch(r"\s*\d+(\.\d+)? cpu( +\d+){9,}\s*", line):
            raise ValueError(f"{CPU_FILE}: not a CPU snapshot: {line!r}")
        words = line.split()
        snaps.append((float(words[0]), busy_ticks(words[2:-1]), int(words[-1])))
    if len(snaps) != 2:
        raise ValueError(f"{CPU_FILE}: {len(snaps)} snapshot(s), want 2 (before, after)")
    (t0, busy0, own0), (t1, busy1, own1) = snaps
    return Share(t1 - t0, (own1 - own0) / hz, (busy1 - busy0) / hz, cpus or os.cpu_count())


def machine_busy(seconds=1.0, stat="/proc/stat"):
    """Cores busy with work on this machine, averaged over ``seconds`` (it sleeps)."""
    import time

    def sample():
        with open(stat) as fp:
            return busy_ticks(fp.readline().split()[1:])

    start, t0 = sample(), time.monotonic()
    time.sleep(seconds)
    end, t1 = sample(), time.monotonic()
    return (end - start) / os.sysconf("SC_CLK_TCK") / (t1 - t0)


def busy_warning(cores, cpus=None):
    """The line ``./sitebench run`` prints when the machine is busy before it starts, or
    None when it is quiet enough."""
    cpus = cpus or os.cpu_count()
    if cores <= DISTURBED_SHARE * cpus:
        return None
    return (
        f"warning: this machine is busy before the run: {cores:.2f} of its {cpus} CPUs in "
        f"use by other work; figures measured beside it are marked disturbed (more than "
        f"{DISTURBED_SHARE:.0%} of the CPUs taken by other work), and will be lower than "
        f"this machine's: run when it is idle, or on nodes of your own"
    )
