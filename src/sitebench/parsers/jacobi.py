"""jacobi3d output (sitebench's own 3D Jacobi, spack-repo/.../jacobi3d/jacobi3d.c)::

    jacobi3d 1.0
    grid: 128 128 128
    ranks: 2
    dims: 2 1 1
    local grid: 64 128 128
    iterations: 100 (warmup 5)
    neighbours k: 1
    halo per process per iteration: 0.131072 MB
    time: 0.2 s
    time per iteration: 0.002 s
    MLUP/s: 1000.0
    check: max error 1.7e-13 against the known solution (...): PASSED

A rank count whose decomposition does not divide the grid, or leaves fewer than two points
per rank, prints ``jacobi3d: error: ...`` on stderr and no block.
"""

import re
from dataclasses import dataclass

from . import ParseError

_ERROR = re.compile(r"^jacobi3d: error: (.*)$", re.MULTILINE)
_FIELDS = {
    "grid": (r"^grid: (\d+) (\d+) (\d+)$", lambda m: tuple(int(x) for x in m.groups())),
    "ranks": (r"^ranks: (\d+)$", lambda m: int(m.group(1))),
    "dims": (r"^dims: (\d+) (\d+) (\d+)$", lambda m: tuple(int(x) for x in m.groups())),
    "iterations": (r"^iterations: (\d+)", lambda m: int(m.group(1))),
    "neighbours": (r"^neighbours k: (\d+)$", lambda m: int(m.group(1))),
    "halo_mb": (r"^halo per process per iteration: (\S+) MB$", lambda m: float(m.group(1))),
    "time_per_iteration": (r"^time per iteration: (\S+) s$", lambda m: float(m.group(1))),
    "mlups": (r"^MLUP/s: (\S+)$", lambda m: float(m.group(1))),
    "check": (r"^check: (.*): (PASSED|FAILED)$", lambda m: (m.group(2), m.group(1))),
}


@dataclass
class JacobiResult:
    grid: tuple
    ranks: int
    dims: tuple
    iterations: int
    neighbours: int  # k, the most face neighbours of any rank
    halo_mb: float  # C, the most MB (1e6 bytes) any rank sends per iteration
    time_per_iteration: float  # s, the slowest rank's
    mlups: float  # million lattice updates per second, whole grid
    check: tuple  # ("PASSED" | "FAILED", detail)

    @property
    def passed(self):
        return self.check[0] == "PASSED"


def errors(text):
    """The program's own refusals (``jacobi3d: error: ...``), in order."""
    return _ERROR.findall(text)


def parse(text, stderr=""):
    """A :class:`JacobiResult`; :class:`ParseError` names the program's refusal or the
    first line missing."""
    refused = errors(text + "\n" + stderr)
    if refused:
        raise ParseError(f"jacobi3d refused the run: {refused[0]}")
    if not re.search(r"^jacobi3d \S+$", text, re.MULTILINE):
        raise ParseError(
            "no 'jacobi3d <version>' header: not jacobi3d output, or it did not start"
        )
    values = {}
    for name, (pattern, convert) in _FIELDS.items():
        match = re.search(pattern, text, re.MULTILINE)
        if not match:
            raise ParseError(f"jacobi3d output has no {name!r} line (truncated run?)")
        values[name] = convert(match)
    if values["time_per_iteration"] <= 0 or values["mlups"] <= 0:
        raise ParseError("jacobi3d reported a non-positive time or rate")
    return JacobiResult(**values)


def _prime_factors(n):
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors + ([n] if n > 1 else [])


def dims(ranks):
    """The 3D process grid of ``ranks`` as MPI_Dims_create balances it (largest prime
    factor first onto the smallest dimension; Open MPI's result for the counts tried)."""
    out = [1, 1, 1]
    for p in sorted(_prime_factors(ranks), reverse=True):
        out[out.index(min(out))] *= p
    return tuple(sorted(out, reverse=True))


def refused_ranks(ranks, edge):
    """Why jacobi3d cannot run ``ranks`` ranks on an ``edge``^3 grid (None when it can)."""
    grid = dims(ranks)
    for size in grid:
        if edge % size:
            return (
                f"{ranks} ranks decompose as {' x '.join(map(str, grid))}, which does not "
                f"divide the {edge}^3 grid"
            )
        if edge // size < 2:
            return f"domain too small for {ranks} ranks: {edge} points over {size} ranks"
    return None
