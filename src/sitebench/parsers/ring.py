"""mpi_ring output (sitebench's own ring, spack-repo/.../mpi_ring/mpi_ring.c)::

mpi_ring 1.0
ranks: 2
message size: 16 B
steps: 10000 (warmup 100)
time: 0.0018 s
time per step: 0.1799 us
messages: 40400 received intact of 40400 expected: PASSED
"""

import re
from dataclasses import dataclass

from . import ParseError

_FIELDS = {
    "ranks": (r"^ranks: (\d+)$", int),
    "message_size": (r"^message size: (\d+) B$", int),
    "steps": (r"^steps: (\d+)", int),
    "time_per_step_us": (r"^time per step: (\S+) us$", float),
}
_MESSAGES = re.compile(
    r"^messages: (\d+) received intact of (\d+) expected: (PASSED|FAILED)$", re.MULTILINE
)


@dataclass
class RingResult:
    ranks: int
    message_size: int
    steps: int
    time_per_step_us: float
    received: int  # messages that arrived with the expected sender, step and direction
    expected: int  # 2 x ranks x (steps + warm-up)

    @property
    def passed(self):
        return self.received == self.expected


def parse(text):
    """A :class:`RingResult`; :class:`ParseError` names the first line missing."""
    refused = re.search(r"^mpi_ring: error: (.*)$", text, re.MULTILINE)
    if refused:
        raise ParseError(f"mpi_ring refused the run: {refused.group(1)}")
    if not re.search(r"^mpi_ring \S+$", text, re.MULTILINE):
        raise ParseError(
            "no 'mpi_ring <version>' header: not mpi_ring output, or it did not start"
        )
    values = {}
    for name, (pattern, convert) in _FIELDS.items():
        match = re.search(pattern, text, re.MULTILINE)
        if not match:
            raise ParseError(f"mpi_ring output has no {name!r} line (truncated run?)")
        values[name] = convert(match.group(1))
    match = _MESSAGES.search(text)
    if not match:
        raise ParseError("mpi_ring output has no 'messages:' line (truncated run?)")
    return RingResult(**values, received=int(match.group(1)), expected=int(match.group(2)))
