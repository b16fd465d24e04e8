"""STREAM 5.x output: best rate per kernel, array size, threads, validation."""

import math
import re
from dataclasses import dataclass, field

from . import ParseError

KERNELS = ("Copy", "Scale", "Add", "Triad")

_RATE = re.compile(r"^(Copy|Scale|Add|Triad):\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", re.MULTILINE)
_ARRAY = re.compile(r"^Array size = (\d+) \(elements\)", re.MULTILINE)
_BYTES = re.compile(r"^This system uses (\d+) bytes per array element", re.MULTILINE)
_THREADS = re.compile(r"^Number of Threads counted = (\d+)", re.MULTILINE)
_VALID = "Solution Validates"


@dataclass
class StreamResult:
    array_elements: int
    bytes_per_element: int
    threads: int | None
    best_rate_mbs: dict = field(default_factory=dict)  # kernel -> MB/s (1e6 B/s)

    @property
    def array_bytes(self):
        return self.array_elements * self.bytes_per_element


def validates(text):
    """True when STREAM printed its own validation line for all three arrays."""
    return _VALID in text and "Failed Validation" not in text


def parse(text):
    """Parse one STREAM run; raise ParseError unless every kernel has a finite rate."""
    if not text.strip():
        raise ParseError("STREAM output is empty")
    array = _ARRAY.search(text)
    if not array:
        raise ParseError("STREAM output has no 'Array size = N (elements)' line")
    nbytes = _BYTES.search(text)
    threads = _THREADS.search(text)
    rates = {}
    for kernel, rate, *_ in _RATE.findall(text):
        try:
            value = float(rate)
        except ValueError:
            raise ParseError(f"STREAM {kernel} rate is not a number: {rate!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise ParseError(f"STREAM {kernel} rate is not a positive finite number: {rate}")
        rates[kernel] = value
    missing = [k for k in KERNELS if k not in rates]
    if missing:
        raise ParseError(f"STREAM output lacks the rate of {', '.join(missing)} (truncated run?)")
    return StreamResult(
        array_elements=int(array.group(1)),
        bytes_per_element=int(nbytes.group(1)) if nbytes else 8,
        threads=int(threads.group(1)) if threads else None,
        best_rate_mbs=rates,
    )
