"""HPL 2.x output: one result line per test, residual checks, summary counts.

Accepts both plain builds and builds with -DHPL_PROGRESS_REPORT and
-DHPL_DETAILED_TIMING (Spack's default), whose extra lines are ignored.
"""

import math
import re
from dataclasses import dataclass

from . import ParseError

# T/V  N  NB  P  Q  Time  Gflops, e.g. "WR11C2R4   5000  192  1  2   0.88   9.4217e+01"
_RESULT = re.compile(
    r"^(W[RC]\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s*$", re.MULTILINE
)
_RESIDUAL = re.compile(r"^\|\|Ax-b\|\|_oo/.*=\s*(\S+)\s+\.+\s+(PASSED|FAILED)\s*$", re.MULTILINE)
_SUMMARY = re.compile(
    r"(\d+) tests completed and passed residual checks,\s*"
    r"(\d+) tests completed and failed residual checks,\s*"
    r"(\d+) tests skipped because of illegal input values",
)


@dataclass
class HplTest:
    variant: str
    n: int
    nb: int
    p: int
    q: int
    time_s: float
    gflops: float
    residual: float | None = None
    passed: bool | None = None


@dataclass
class HplResult:
    tests: list
    passed: int
    failed: int
    skipped: int

    @property
    def all_passed(self):
        """Every test ran and passed its residual check (HPL's own verification)."""
        return (
            self.tests
            and self.failed == 0
            and self.skipped == 0
            and self.passed == len(self.tests)
            and all(t.passed for t in self.tests)
        )

    @property
    def best_gflops(self):
        return max(t.gflops for t in self.tests)


def _number(text, what):
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"HPL {what} is not a number: {text!r}") from None
    if not math.isfinite(value):
        raise ParseError(f"HPL {what} is not finite: {text}")
    return value


def parse(text):
    """Parse one HPL run; raise ParseError when it did not finish."""
    if not text.strip():
        raise ParseError("HPL output is empty")
    tests = [
        HplTest(v, int(n), int(nb), int(p), int(q), _number(t, "time"), _number(g, "Gflops"))
        for v, n, nb, p, q, t, g in _RESULT.findall(text)
    ]
    if not tests:
        raise ParseError("HPL output has no result line (T/V N NB P Q Time Gflops)")
    residuals = _RESIDUAL.findall(text)
    for test, (value, verdict) in zip(tests, residuals):
        test.residual = _number(value, "residual")
        test.passed = verdict == "PASSED"
    summary = _SUMMARY.search(text)
    if not summary:
        raise ParseError("HPL output has no 'Finished ... tests' summary (truncated run?)")
    passed, failed, skipped = (int(x) for x in summary.groups())
    return HplResult(tests=tests, passed=passed, failed=failed, skipped=skipped)


#: HPL_DETAILED_TIMING's lines (Spack builds HPL with it): the name HPL prints -> our key.
#: ``pfact`` and ``mxswp`` are part of ``rfact``; ``laswp`` is part of ``update``.
PHASES = {
    "rfact": "rfact",
    "pfact": "pfact",
    "mxswp": "mxswp",
    "update": "update",
    "laswp": "laswp",
    "up tr sv": "uptrsv",
}
_PHASE = re.compile(
    r"^\+?\s*Max aggregated wall time (rfact|pfact|mxswp|update|laswp|up tr sv)"
    r"[\s.]*:\s*(\S+)\s*$",
    re.MULTILINE,
)


def detailed_timing(text):
    """{phase: seconds} of the first test of a run built with -DHPL_DETAILED_TIMING (the
    slowest rank's sum per phase, as HPL prints it); {} where the build prints none."""
    found = {}
    for name, value in _PHASE.findall(text):
        found.setdefault(PHASES[name], _number(value, f"{name} time"))
    return found
