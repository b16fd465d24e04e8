"""How long a case may run before it is stopped: scaled to what it measures and to the load
the machine had when it started, so that a hung benchmark fails its case with its reason and
the run goes on, and a slow one on a busy machine is not cut short.

A check that can count its work (message sizes and iterations: the ping-pongs) estimates it
at floor rates far under any machine's (:data:`FLOOR_BYTES_PER_S`, :data:`FLOOR_MESSAGE_S`);
the others get their scale's bound (:data:`SCALE_BOUND_S`). Either is added to
:data:`STARTUP_S` and multiplied by the load factor (the 1-minute load average over the CPUs,
at least 1, at most :data:`LOAD_FACTOR_CAP`) where the job runs on this machine. The floor
rates already hold what the cases took on a machine at a load of 15-22, so the factor is a
margin on top, capped: a hung case is stopped in minutes whatever the load (uncapped, an
MPICH case hung in MPI_Finalize at a load of 10 held a night for 3,170 s). GNU ``timeout``
stops the launch at that limit (TERM, then KILL :data:`KILL_AFTER_S` later): the job's own
commands after the launch still run (the disturbance snapshot), so the case says whether
other work held the CPU meanwhile.
"""

import math
import os

#: Start-up allowance of a launch (mpirun, JVMs, MPJ's daemon), seconds.
STARTUP_S = 60
#: Bytes per second a message-passing benchmark moves at the least: 200 MB/s, 20 times under
#: the slowest quick OSU case measured on the project's idle 2-core VM (osu_bw over TCP on
#: loopback, 47 GB in 11.4 s, tests/fixtures/osu/README.md), as work_estimates'
#: FLOOR_SLOWDOWN; the load factor's margin (capped at 2) covers what a load of 15-22 took.
FLOOR_BYTES_PER_S = 200e6
#: Seconds a message takes at the most, whatever its size: 1 ms (a 1-byte round trip over
#: TCP took 7 us on the quiet VM, 7.9 ms under MPJ's niodev at a load of 18).
FLOOR_MESSAGE_S = 1e-3
#: The most the load stretches a limit: the slowest real case measured beside other work,
#: over its limit at factor 1 (measured figures in tests/test_time_limits.py).
LOAD_FACTOR_CAP = 2.0
#: Work bound of a check that does not estimate its own, by scale (seconds).
SCALE_BOUND_S = {"quick": 1800, "full": 4 * 3600}
#: Seconds between timeout's TERM and its KILL.
KILL_AFTER_S = 10
#: The scheduler's own limit is the launch's plus this (the job's other commands).
JOB_MARGIN_S = 120
#: ``timeout``'s exit statuses when it stopped the command: TERM (124) or KILL (137).
TIMED_OUT = (124, 137)


def message_work_s(rounds):
    """Seconds of ``rounds``: (bytes, messages) pairs a benchmark sends, at the floor rates."""
    total_bytes = sum(b for b, _ in rounds)
    messages = sum(m for _, m in rounds)
    return total_bytes / FLOOR_BYTES_PER_S + messages * FLOOR_MESSAGE_S


def load_factor(loadavg=None, cpus=None):
    """The 1-minute load average over the CPUs, at least 1: how many times slower a case may
    run than on an idle machine."""
    if loadavg is None:
        try:
            loadavg = os.getloadavg()[0]
        except OSError:
            return 1.0
    return max(1.0, loadavg / (cpus or os.cpu_count() or 1))


def capped(factor):
    """The load factor a limit is stretched by: at most :data:`LOAD_FACTOR_CAP`."""
    return min(factor, LOAD_FACTOR_CAP)


def launch_limit_s(work_s, factor=1.0, startup_s=STARTUP_S):
    """The launch's limit: start-up and work, times the load factor (capped), in whole 10 s."""
    return int(math.ceil((startup_s + work_s) * capped(factor) / 10.0) * 10)


def factor_said(factor):
    """How a limit's load factor is written in its reason: "load factor 5.0, capped at 2.0"."""
    if factor > LOAD_FACTOR_CAP:
        return f"load factor {factor:.1f}, capped at {LOAD_FACTOR_CAP:.1f}"
    return f"load factor {factor:.1f}"


def timed_out_reason(limit_s, how, share=None, finished=""):
    """The sentence a case that reached its limit fails with: the limit, how it was set and
    whether other work held the CPU (``share``: a disturbance.Share, None if not measured).
    ``finished``: why a benchmark whose output already holds every figure did not exit (a
    hang after measuring is not a busy machine, whatever the load)."""
    said = f"the benchmark reached its time limit of {limit_s} s ({how}) and was stopped"
    if finished:
        return f"{said}; it had printed every figure it measures and did not exit: {finished}"
    if share is None:
        return f"{said}; other work's CPU was not measured"
    other = f"other work took {share.foreign_cores:.2f} of the {share.cpus} CPUs meanwhile"
    if share.disturbed:
        return f"{said}; {other}: the machine was busy (disturbed), run it again when it is idle"
    return f"{said}; {other}: not a busy machine, the benchmark itself hung or is too slow"
