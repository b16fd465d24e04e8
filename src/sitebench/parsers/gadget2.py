"""Gadget-2 (2.0.7): its stdout and the log files it writes into OutputDir.

stdout of a complete run (rank 0 prints)::

    This is Gadget, version `2.0'.
    Running on 2 processors.
    ...
    Begin Step 0, Time: 0.0909091, Redshift: 10, Systemstep: 0, Dloga: 0
    ...
    Begin Step 32, Time: 0.2, Redshift: 4, Systemstep: 0.00486764, Dloga: 0.0246393
    ...
    writing snapshot file...
    done with snapshot.

The last step begins at TimeMax; after it Gadget-2 writes a last snapshot. ``cpu.txt`` has
per step a line "Step N, Time: t, CPUs: n" and one of 18 timers, the first the total
(a wall clock when built with WALLCLOCK, as sitebench's recipe does) since the start,
taken as the step begins. ``energy.txt`` has one line per TimeBetStatistics: the time and
27 energies and masses, every one finite in a sound run.

Gadget-2 ends most refusals (a missing initial-conditions file, NumFilesPerSnapshot above
the rank count, a bad parameter file) with ``endrun(0)``, i.e. exit status 0: the output,
not the exit status, says whether the run completed.
"""

import math
import re
from dataclasses import dataclass, field

from . import ParseError

_VERSION = re.compile(r"^This is Gadget, version `([^']+)'\.", re.MULTILINE)
_RANKS = re.compile(r"^Running on (\d+) processors?\.", re.MULTILINE)
_STEP = re.compile(r"^Begin Step (\d+), Time: (\S+?),", re.MULTILINE)
_SNAPSHOT_DONE = re.compile(r"^done with snapshot\.", re.MULTILINE)
_CPU_STEP = re.compile(r"^Step (\d+), Time: (\S+), CPUs: (\d+)$")

#: Gadget-2's own words for the runs it ends (begrun.c, read_ic.c, io.c, endrun.c, run.c).
REFUSALS = [
    re.compile(p, re.MULTILINE)
    for p in (
        r"^Can't find initial conditions file\..*",
        r"^can't open file `[^']*' for reading initial conditions\.",
        r"^Parameter file .* not found\.",
        r"^Error\. I miss a value for tag .*",
        r"^Error in file .*",
        r"^NumFilesWrittenInParallel MUST be .*",
        r"^Number of processors must be larger or equal than All\.NumFilesPerSnapshot\.",
        r"^You must set `PeriodicBoundariesOn=.*",
        r"^error in opening file .*",
        r"^Error: A timestep of size zero was assigned .*",
        r"^No domain decomposition that stays within memory bounds is possible\.",
        r"^task \d+: endrun called with an error level of \d+",
        r"^reaching time-limit\. stopping\.",
    )
]


@dataclass
class Gadget2Result:
    """One run: version, ranks, the steps' times and the logs' figures."""

    version: str
    ranks: int
    step_times: list = field(default_factory=list)  # (step, time) of each "Begin Step"
    snapshot_done: bool = False

    @property
    def last_step(self):
        return self.step_times[-1] if self.step_times else (None, None)


@dataclass
class CpuLog:
    """cpu.txt's last entry: the step that began, its time, ranks, and the total timer (s)."""

    step: int
    time: float
    ranks: int
    total_s: float

    @property
    def steps_per_second(self):
        """Steps finished (``step`` of them, 0 to step-1) per second of the total timer."""
        return self.step / self.total_s


def refusal(text):
    """Gadget-2's first refusal or error line in ``text``, or None."""
    found = [(m.start(), m.group(0).strip()) for p in REFUSALS for m in p.finditer(text)]
    return min(found)[1] if found else None


def parse(stdout):
    """The run's stdout, or ParseError naming what a started run lacks."""
    version = _VERSION.search(stdout)
    if not version:
        raise ParseError("no 'This is Gadget, version' line: Gadget-2 did not start")
    ranks = _RANKS.search(stdout)
    if not ranks:
        raise ParseError("no 'Running on N processors' line")
    steps = [(int(n), float(t)) for n, t in _STEP.findall(stdout)]
    return Gadget2Result(
        version=version.group(1),
        ranks=int(ranks.group(1)),
        step_times=steps,
        snapshot_done=(
            bool(_SNAPSHOT_DONE.search(stdout[stdout.rfind("Begin Step") :])) if steps else False
        ),
    )


def parse_cpu(text):
    """cpu.txt's last complete entry (a step line and its timers)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for i in range(len(lines) - 2, -1, -1):
        head = _CPU_STEP.match(lines[i])
        if head:
            timers = lines[i + 1].split()
            if len(timers) != 18:
                continue
            step, time, ranks = head.groups()
            return CpuLog(int(step), float(time), int(ranks), float(timers[0]))
    raise ParseError("cpu.txt has no complete 'Step N, Time: t, CPUs: n' entry")


def parse_energy(text):
    """energy.txt's rows (lists of 28 floats), or ParseError for none, a short or a
    non-finite one."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        values = [float(v) for v in line.split()]
        if len(values) != 28:
            raise ParseError(f"energy.txt line {number} has {len(values)} values, not 28")
        if not all(math.isfinite(v) for v in values):
            raise ParseError(f"energy.txt line {number} (time {values[0]:g}) is not finite")
        rows.append(values)
    if not rows:
        raise ParseError("energy.txt has no energy statistics")
    return rows


def problems(stdout, cpu, energy, ranks, time_max):
    """Why a run is not a complete Gadget-2 run on ``ranks`` ranks to ``time_max`` (empty:
    none). ``cpu`` and ``energy`` are the texts of cpu.txt and energy.txt (None: absent)."""
    refused = refusal(stdout)
    if refused:
        return [f"Gadget-2: {refused}"]
    try:
        result = parse(stdout)
    except ParseError as err:
        return [str(err)]
    found = []
    if result.ranks != ranks:
        found.append(f"Gadget-2 ran on {result.ranks} processors, not {ranks}")
    step, time = result.last_step
    # "Begin Step" prints the time with %g: 6 significant digits.
    if time is None or not math.isclose(time, time_max, rel_tol=1e-5):
        found.append(f"the last step began at time {time}, not at TimeMax {time_max:g}")
    elif not result.snapshot_done:
        found.append("no 'done with snapshot.' after the last step")
    if cpu is None:
        found.append("no cpu.txt in OutputDir")
    else:
        try:
            log = parse_cpu(cpu)
            if log.step != step or log.ranks != ranks:
                found.append(
                    f"cpu.txt ends at step {log.step} on {log.ranks} CPUs, stdout at step "
                    f"{step} on {ranks}"
                )
        except ParseError as err:
            found.append(str(err))
    if energy is None:
        found.append("no energy.txt in OutputDir")
    else:
        try:
            parse_energy(energy)
        except (ParseError, ValueError) as err:
            found.append(str(err))
    return found
