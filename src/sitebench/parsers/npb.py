"""NPB 3.4 MPI output: the report block each benchmark prints, and the process counts it takes.

Every benchmark (CG, EP, FT, IS, LU, MG) ends with the same block::

     CG Benchmark Completed.
     Class           =                        A
     ...
     Total processes =                        2
     Active processes=                        2
     Mop/s total     =                  7621.78
     Mop/s/process   =                  3810.89
     Verification    =               SUCCESSFUL

(IS prints "IS Benchmark Completed" without the dot). A run NPB refused
(wrong process count, subdomain too small) prints an error and no block.
"""

import math
import re
from dataclasses import dataclass, field

from . import ParseError

#: The NPB-MPI benchmarks the site's ``npb`` builds (the sitebench recipe's ``names``).
BENCHMARKS = ("cg", "ep", "ft", "is", "lu", "mg")

#: Problem classes NPB 3.4 defines; the site builds the ones its recipe lists.
CLASSES = ("S", "W", "A", "B", "C", "D", "E", "F")

_COMPLETED = re.compile(r"^\s*([A-Z]{2}) Benchmark Completed\.?\s*$", re.MULTILINE)
_BANNER = re.compile(r"NAS Parallel Benchmarks \S+ -- ([A-Z]{2}) Benchmark")
_FIELD = re.compile(r"^\s*([A-Za-z/ ]+?)\s*=\s*(.*?)\s*$")
# The report keys a complete run prints, and the attribute each fills.
_KEYS = {
    "Class": "npb_class",
    "Time in seconds": "time_s",
    "Total processes": "total_processes",
    "Active processes": "active_processes",
    "Mop/s total": "mops_total",
    "Mop/s/process": "mops_per_process",
    "Verification": "verification",
}
# NPB's own lines about a failed verification or a refused process count
# (cg.f90, mg.f90, ft.f90, lu/verify.f90, is.c, common/get_active_nprocs.f90, lu/subdomain.f90).
_DETAIL = re.compile(
    r"VERIFICATION FAILED|The correct|Zeta is|L2 Norm is|Error is|verification failed|"
    r"Verification failed|FAILURE:|NO VERIFICATION|No verification|Failed partial verification|"
    r"WARNING|\*\*\* ERROR|ERROR:|Expecting a|TOO SMALL|THEY ARE CURRENTLY|Too many nodes",
)
# Problem size per class (setparams.c): LU's grid edge, EP's log2 of random pairs.
_LU_EDGE = {"S": 12, "W": 33, "A": 64, "B": 102, "C": 162, "D": 408, "E": 1020, "F": 2560}
_EP_M = {"S": 24, "W": 25, "A": 28, "B": 30, "C": 32, "D": 36, "E": 40, "F": 44}


@dataclass
class NpbResult:
    benchmark: str  # "CG", as NPB prints it
    npb_class: str
    time_s: float
    total_processes: int
    active_processes: int
    mops_total: float
    mops_per_process: float
    verification: str  # "SUCCESSFUL" or "UNSUCCESSFUL"
    version: str = ""
    details: list = field(default_factory=list)  # NPB's own failure/warning lines

    @property
    def verified(self):
        return self.verification == "SUCCESSFUL"


def details(text):
    """NPB's own lines about verification, warnings and errors, stripped, once each, in order."""
    found = [" ".join(line.split()) for line in text.splitlines() if _DETAIL.search(line)]
    return list(dict.fromkeys(found))  # every rank of LU prints the same subdomain error


def _number(name, value, kind):
    try:
        number = kind(value)
    except ValueError:
        raise ParseError(f"NPB '{name}' is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise ParseError(f"NPB '{name}' is not finite: {value}")
    return number


def parse(text):
    """Parse one NPB run; raise ParseError naming what NPB printed when there is no report."""
    if not text.strip():
        raise ParseError("NPB output is empty")
    completed = _COMPLETED.search(text)
    if not completed:
        banner = _BANNER.search(text)
        name = banner.group(1) if banner else "NPB"
        said = details(text)
        if said:
            raise ParseError(f"{name} stopped before its report; NPB printed: {' | '.join(said)}")
        raise ParseError(f"{name} output has no 'Benchmark Completed' report (truncated run?)")
    values = {}
    for line in text[completed.end() :].splitlines():
        match = _FIELD.match(line)
        if match and match.group(1) in _KEYS and match.group(1) not in values:
            values[match.group(1)] = match.group(2)
        elif match and match.group(1) == "Version":
            values["Version"] = match.group(2)
    missing = [key for key in _KEYS if key not in values]
    if missing:
        raise ParseError(
            f"{completed.group(1)} report lacks {', '.join(repr(k) for k in missing)} "
            f"(truncated run?)"
        )
    return NpbResult(
        benchmark=completed.group(1),
        npb_class=values["Class"],
        time_s=_number("Time in seconds", values["Time in seconds"], float),
        total_processes=_number("Total processes", values["Total processes"], int),
        active_processes=_number("Active processes", values["Active processes"], int),
        mops_total=_number("Mop/s total", values["Mop/s total"], float),
        mops_per_process=_number("Mop/s/process", values["Mop/s/process"], float),
        verification=values["Verification"],
        version=values.get("Version", ""),
        details=details(text[: completed.start()]),
    )


def problems(result, benchmark, npb_class, processes):
    """Why ``result`` is not a verified run of ``benchmark`` class ``npb_class`` on
    ``processes`` ranks, one message per cause; empty when it is."""
    found = []
    name = benchmark.upper()
    if result.benchmark != name:
        found.append(f"NPB ran {result.benchmark}, expected {name}")
    if result.npb_class != npb_class:
        found.append(f"NPB {name} ran class {result.npb_class}, expected class {npb_class}")
    if result.total_processes != processes or result.active_processes != processes:
        found.append(
            f"NPB {name} class {result.npb_class}: Total processes = {result.total_processes}, "
            f"Active processes = {result.active_processes}, expected {processes} and {processes}"
        )
    if not result.verified:
        said = f"; NPB printed: {' | '.join(result.details)}" if result.details else ""
        found.append(
            f"NPB {name} class {result.npb_class} on {result.total_processes} processes: "
            f"Verification = {result.verification}{said}"
        )
    return found


def _is_power_of_two(n):
    return n >= 1 and n & (n - 1) == 0


def _lu_grid(n):
    """LU's process grid (xdim >= ydim) for ``n`` ranks, or None when LU refuses ``n``.

    A port of get_active_nprocs(pkind=2) in common/get_active_nprocs.f90 and
    of proc_grid in LU/proc_grid.f90 (NPB 3.4.3).
    """
    # Power-of-two grid first.
    np1 = int(math.log(n + 1.0e-3) / math.log(2.0))
    np2 = np1 // 2
    np1, np2 = 2 ** (np1 - np2), 2**np2
    npa = np1 * np2
    if npa < n:
        for div in range(int(math.sqrt(n + 1.0e-3)), int(math.sqrt(n * 2 + 1.0e-3)) + 1):
            npaw = n // div * div
            if div == 1 and n == 3:
                npaw = 2
            npa = max(npa, npaw)
    if npa != n:
        return None
    ydim = int(math.sqrt(n) + 0.001)
    xdim = n // ydim
    while xdim * ydim != n:
        ydim -= 1
        xdim = n // ydim
    if 2 * ydim < xdim:
        return None
    return xdim, ydim


def refused_processes(benchmark, npb_class, processes):
    """Why NPB 3.4.3 refuses ``processes`` ranks for ``benchmark`` class ``npb_class``,
    or None when it runs them (README.install and the sources named below)."""
    name = benchmark.upper()
    if processes < 1:
        return f"{name} needs at least one process"
    if benchmark in ("cg", "ft", "is", "mg") and not _is_power_of_two(processes):
        return f"{name} needs a power-of-two number of processes, not {processes}"
    if benchmark == "is" and processes > (128 if npb_class == "S" else 1024):
        return (
            f"IS class {npb_class} runs on at most {128 if npb_class == 'S' else 1024} processes"
        )
    if benchmark == "ep":
        batches = 2 ** (_EP_M[npb_class] - 16)  # EP/ep_data.f90: nn = 2**(m - mk), mk = 16
        if processes > batches:
            return f"EP class {npb_class} has {batches} batches, fewer than {processes} processes"
    if benchmark == "lu":
        grid = _lu_grid(processes)
        if grid is None:
            return f"LU needs an n1 x n2 process grid with n1/2 <= n2 <= n1, not {processes}"
        # LU/subdomain.f90: every subdomain at least 3 points wide.
        edge = _LU_EDGE[npb_class]
        if edge // grid[0] < 3:
            return (
                f"LU class {npb_class} ({edge}^3) on a {grid[0]} x {grid[1]} grid leaves "
                f"subdomains narrower than 3 points"
            )
    return None
