"""PARSEC 3.0 blackscholes and fluidanimate (pthreads): ROI time, sizes, output files.

Neither program prints a time or its thread count. Built with the PARSEC hooks
(``+hooks``) they print ``[HOOKS] Entering ROI`` / ``Leaving ROI`` around the
parallel phase and ``Total time spent in ROI: 1.234s`` at the end, and, when
``PARSEC_CPU_NUM`` is set, ``[HOOKS] Using 2 CPUs (0-1)``: the CPUs the process
was bound to. The check adds one line of its own after the program
(``[sitebench] exit status 0, started <epoch s>, ended <epoch s>``): the exit
status, and the wall time used when there is no ROI time.

:func:`parse` reads what the output says; :func:`problems` lists what is wrong
with a run, each naming its cause; :func:`check_prices` and :func:`check_fluid`
verify the output files.
"""

import math
import re
import signal
import struct
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path

from . import ParseError

BENCHMARKS = ("blackscholes", "fluidanimate")

_VERSION = re.compile(r"^PARSEC Benchmark Suite(?: Version (\S+))?\s*$", re.M)
_HOOKS = "[HOOKS] PARSEC Hooks Version"
_ROI_BEGIN = "[HOOKS] Entering ROI"
_ROI_END = "[HOOKS] Leaving ROI"
_ROI_TIME = re.compile(r"^\[HOOKS\] Total time spent in ROI: (\S+)s\s*$", re.M)
_TERMINATING = "[HOOKS] Terminating"
_CPUS = re.compile(r"^\[HOOKS\] Using (\d+) CPUs \((\d+)-(\d+)\)\s*$", re.M)
# Written by the check's job script after the program (reframe-checks/parsec.py).
_STATUS = re.compile(
    r"^\[sitebench\] exit status (\d+), started (\d+\.\d+), ended (\d+\.\d+)\s*$", re.M
)
_OPTIONS = re.compile(r"^Num of Options: (\d+)\s*$", re.M)
_DATA_SIZE = re.compile(r"^Size of data: (\d+)\s*$", re.M)
_PARTICLES = re.compile(r"^Number of particles: (\d+)\s*$", re.M)
_SAVING = re.compile(r'^Saving file "(.*)"\.\.\.\s*$', re.M)
_ERROR = re.compile(r"^(?:\[HOOKS\] )?(?:ERROR|FATAL ERROR|Error)\b.*$", re.M)
_REDUCED = "WARNING: Not enough work, reducing number of threads"
_NOT_POWER_OF_2 = "Number of threads must be a power of 2"

#: blackscholes' own check (``-DERR_CHK``) flags a price this far from DerivaGem's.
PRICE_TOLERANCE = 1e-4
#: inputgen cycles through the 1000 options of ``optionData.txt``.
INPUTGEN_PERIOD = 1000
#: fluidanimate's simulation box (``domainMin``/``domainMax`` in pthreads.cpp), metres.
FLUID_DOMAIN = ((-0.065, 0.065), (-0.08, 0.1), (-0.065, 0.065))


@dataclass
class ParsecResult:
    benchmark: str
    version: str | None
    hooks: bool
    roi_begin: bool = False
    roi_end: bool = False
    roi_s: float | None = None
    terminated: bool = False
    bound_cpus: int | None = None  # from "[HOOKS] Using N CPUs"
    options: int | None = None  # blackscholes
    particles: int | None = None  # fluidanimate
    saved_file: str | None = None  # fluidanimate
    exit_status: int | None = None  # from the check's own line
    wall_s: float | None = None
    errors: tuple = ()  # the program's own error lines
    reduced_threads: bool = False  # blackscholes: fewer options than threads
    not_power_of_2: bool = False  # fluidanimate refused the thread count

    @property
    def time_s(self):
        """The ROI time if the hooks printed one, else the wall time of the program."""
        return self.roi_s if self.roi_s is not None else self.wall_s

    @property
    def timer(self):
        return "roi" if self.roi_s is not None else "wall" if self.wall_s is not None else ""


def _seconds(text, what):
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"{what} is not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ParseError(f"{what} is not a finite non-negative number: {text}")
    return value


def parse(text, benchmark, stderr=""):
    """What one run printed (stdout, and stderr for the errors fluidanimate writes there).

    Raises ParseError only when this is not the output of a PARSEC program; what
    is missing from an incomplete run is reported by :func:`problems`.
    """
    if benchmark not in BENCHMARKS:
        raise ParseError(f"unknown PARSEC benchmark {benchmark!r}: one of {', '.join(BENCHMARKS)}")
    if not text.strip():
        raise ParseError(f"{benchmark} output is empty")
    version = _VERSION.search(text)
    if not version:
        raise ParseError(
            f"{benchmark} output has no 'PARSEC Benchmark Suite' line (not a PARSEC program?)"
        )
    result = ParsecResult(benchmark=benchmark, version=version.group(1), hooks=_HOOKS in text)
    lines = text.splitlines()
    result.roi_begin = _ROI_BEGIN in lines
    result.roi_end = result.roi_begin and _ROI_END in lines[lines.index(_ROI_BEGIN) :]
    roi = _ROI_TIME.search(text)
    if roi:
        result.roi_s = _seconds(roi.group(1), f"{benchmark} ROI time")
    result.terminated = _TERMINATING in lines
    cpus = _CPUS.search(text)
    if cpus:
        result.bound_cpus = int(cpus.group(1))
    status = _STATUS.search(text)
    if status:
        result.exit_status = int(status.group(1))
        start, end = (_seconds(status.group(i), "wall clock") for i in (2, 3))
        result.wall_s = end - start
    result.errors = tuple(
        m.group(0).strip() for source in (text, stderr) for m in _ERROR.finditer(source)
    )
    if benchmark == "blackscholes":
        options = _OPTIONS.search(text)
        result.options = int(options.group(1)) if options else None
        result.reduced_threads = _REDUCED in text
    else:
        particles = _PARTICLES.search(text)
        result.particles = int(particles.group(1)) if particles else None
        saved = _SAVING.search(text)
        result.saved_file = saved.group(1) if saved else None
        result.not_power_of_2 = _NOT_POWER_OF_2 in text + stderr
    return result


def _status_text(status):
    if status > 128 and status - 128 in signal.Signals._value2member_map_:
        return f"was killed by {signal.Signals(status - 128).name} (exit status {status})"
    return f"exited with status {status}"


def problems(result, threads, hooks, bound_cpus=None, options=None, stderr=""):
    """Every reason this run is not a complete, verified run with ``threads`` threads.

    ``hooks``: the binary was built with the hooks (ROI lines required);
    ``bound_cpus``: the CPU count set in PARSEC_CPU_NUM (None: not bound);
    ``options``: the option count of the blackscholes input.
    An empty list means the run is good.
    """
    name = result.benchmark
    found = []
    if result.exit_status is None:
        found.append(
            f"{name}: no exit status line after the program: the job was killed "
            f"before it ended (time limit?)"
        )
    elif result.exit_status != 0:
        last = [line.strip() for line in stderr.splitlines() if line.strip()]
        detail = f" ({last[-1]})" if last else ""
        found.append(f"{name} {_status_text(result.exit_status)}{detail}")
    if result.errors:
        found.append(f"{name} reported: {' / '.join(result.errors)}")
    if result.not_power_of_2:
        found.append("fluidanimate refused its thread count: it needs a power of 2")
    if result.reduced_threads:
        found.append(
            f"blackscholes ran fewer than {threads} threads: the input has only "
            f"{result.options} options"
        )
    if hooks:
        if not result.hooks:
            found.append(f"{name} printed no '{_HOOKS}' line: not the +hooks build, or it died")
        elif not result.roi_begin:
            found.append(f"{name} never entered the ROI (no '{_ROI_BEGIN}')")
        elif not result.roi_end:
            found.append(
                f"{name} entered the ROI but never left it (no '{_ROI_END}'): "
                f"it crashed or was killed during the run"
            )
        elif result.roi_s is None:
            found.append(f"{name} left the ROI but printed no ROI time (truncated output)")
        elif not result.terminated:
            found.append(f"{name} did not finish after the ROI (no '{_TERMINATING}')")
    if result.time_s is not None and result.time_s <= 0:
        found.append(
            f"{name} took {result.time_s:.3f} s ({result.timer}): too short to time, "
            f"enlarge the input"
        )
    if bound_cpus is not None and result.bound_cpus != bound_cpus:
        if result.bound_cpus is None:
            found.append(f"{name}: the hooks did not report binding to {bound_cpus} CPUs")
        else:
            found.append(
                f"{name} ran on {result.bound_cpus} CPUs, expected {bound_cpus} "
                f"(PARSEC_CPU_NUM)"
            )
    if name == "blackscholes":
        if result.options is None:
            found.append("blackscholes printed no 'Num of Options' (it did not read its input)")
        elif options is not None and result.options != options:
            found.append(f"blackscholes read {result.options} options, expected {options}")
        if result.options and threads and result.options % threads:
            found.append(
                f"blackscholes splits {result.options} options unevenly over {threads} "
                f"threads: it would skip the last {result.options % threads}"
            )
    else:
        if result.particles is None:
            found.append("fluidanimate printed no 'Number of particles' (input not loaded)")
        if result.saved_file is None:
            found.append("fluidanimate did not save its output file (no 'Saving file')")
    return found


def check_prices(prices_path, options, input_path):
    """Verify a blackscholes prices file against the DerivaGem values of its input.

    The file must hold the option count and one finite price per option, each
    within :data:`PRICE_TOLERANCE` of the reference value the input carries
    (blackscholes' own ERR_CHK test). Raises ParseError naming the first fault.
    """
    prices_path, input_path = Path(prices_path), Path(input_path)
    if not prices_path.is_file():
        raise ParseError(f"blackscholes wrote no prices file {prices_path.name}")
    reference = []
    with open(input_path) as fp:
        header = fp.readline().strip()
        for line in fp:
            fields = line.split()
            if len(fields) != 9:
                raise ParseError(f"{input_path.name}: option line {len(reference) + 1} is broken")
            reference.append(float(fields[8]))
            if len(reference) == INPUTGEN_PERIOD:
                break
    if header != str(options) or len(reference) < min(options, INPUTGEN_PERIOD):
        raise ParseError(f"{input_path.name} does not hold {options} options")
    count = 0
    with open(prices_path) as fp:
        first = fp.readline().strip()
        if first != str(options):
            raise ParseError(
                f"{prices_path.name} starts with {first!r}, not the option count {options}"
            )
        for line in fp:
            try:
                price = float(line)
            except ValueError:
                raise ParseError(
                    f"{prices_path.name}: price {count + 1} is not a number: {line.strip()!r}"
                ) from None
            want = reference[count % INPUTGEN_PERIOD]
            if not abs(price - want) < PRICE_TOLERANCE:
                raise ParseError(
                    f"{prices_path.name}: option {count + 1} priced {price}, DerivaGem's "
                    f"reference is {want} (off by >= {PRICE_TOLERANCE})"
                )
            count += 1
    if count != options:
        raise ParseError(f"{prices_path.name} holds {count} prices, expected {options}")
    return count


def check_fluid(path, particles):
    """Verify a fluidanimate output file: every particle written, finite, inside the box.

    Raises ParseError naming the fault; returns the particle count.
    """
    path = Path(path)
    if not path.is_file():
        raise ParseError(f"fluidanimate wrote no output file {path.name}")
    data = path.read_bytes()
    if len(data) < 8:
        raise ParseError(f"{path.name} is {len(data)} bytes: no header")
    _, count = struct.unpack("<fi", data[:8])
    if count != particles:
        raise ParseError(f"{path.name} holds {count} particles, the run had {particles}")
    if len(data) != 8 + 36 * count:
        raise ParseError(
            f"{path.name} is {len(data)} bytes, {8 + 36 * count} expected for {count} "
            f"particles (truncated)"
        )
    values = array("f")
    values.frombytes(data[8:])
    if sys.byteorder == "big":  # the file is little-endian on every machine
        values.byteswap()
    if values.itemsize != 4 or not all(map(math.isfinite, values)):
        raise ParseError(f"{path.name} holds non-finite values (the simulation diverged)")
    for axis, (low, high) in enumerate(FLUID_DOMAIN):
        coords = values[axis::9]
        if count and not (low - 1e-6 <= min(coords) and max(coords) <= high + 1e-6):
            raise ParseError(
                f"{path.name}: particles left the simulation box along axis {'xyz'[axis]} "
                f"({min(coords)} .. {max(coords)} m)"
            )
    return count
