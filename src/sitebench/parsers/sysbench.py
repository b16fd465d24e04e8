"""sysbench 1.0 output: ``prepare`` (rows inserted) and an OLTP ``run`` (statistics block).

A run that lost its server prints ``FATAL:`` lines and no statistics; that is
a :class:`ParseError` naming the first FATAL line, never a result.
"""

import math
import re
from dataclasses import dataclass

from . import ParseError

_THREADS = re.compile(r"^Number of threads: (\d+)\s*$", re.MULTILINE)
# "    transactions:                        46878  (1562.20 per sec.)"
_COUNTER = re.compile(
    r"^\s+(transactions|queries|ignored errors|reconnects):\s+(\d+)\s+\((\S+) per sec\.\)\s*$",
    re.MULTILINE,
)
_TOTAL_TIME = re.compile(r"^\s+total time:\s+(\S+)s\s*$", re.MULTILINE)
# "         95th percentile:                        2.81" (the label follows --percentile)
_PERCENTILE = re.compile(r"^\s+(\d+)th percentile:\s+(\S+)\s*$", re.MULTILINE)
_LATENCY = re.compile(r"^\s+(min|avg|max):\s+(\S+)\s*$", re.MULTILINE)
_INSERTING = re.compile(r"^Inserting (\d+) records into '(\w+)'\s*$", re.MULTILINE)
_FATAL = re.compile(r"^FATAL: .*$", re.MULTILINE)

COUNTERS = ("transactions", "queries", "ignored errors", "reconnects")


@dataclass
class SysbenchResult:
    threads: int
    transactions: int
    tps: float
    queries: int
    qps: float
    ignored_errors: int
    reconnects: int
    total_time_s: float
    percentile: int  # the percentile sysbench reported (--percentile)
    latency_percentile_ms: float
    latency_min_ms: float
    latency_avg_ms: float
    latency_max_ms: float


def _number(text, what):
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"sysbench {what} is not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ParseError(f"sysbench {what} is not a finite, non-negative number: {text}")
    return value


def fatal_lines(text):
    """sysbench's ``FATAL:`` lines (lost connection, failed query, failed thread)."""
    return _FATAL.findall(text)


def parse(text):
    """Parse one ``sysbench oltp_* run``; raise ParseError unless it printed its statistics.

    The last statistics block counts, so a text holding the ``prepare``
    output before the run parses the same.
    """
    if not text.strip():
        raise ParseError("sysbench output is empty")
    fatal = fatal_lines(text)
    if fatal:
        raise ParseError(f"sysbench failed ({len(fatal)} FATAL lines), first: {fatal[0]}")
    run = text[text.rfind("SQL statistics:") :] if "SQL statistics:" in text else ""
    if not run:
        raise ParseError("sysbench output has no 'SQL statistics:' block (truncated run?)")
    threads = _THREADS.findall(text)
    if not threads:
        raise ParseError("sysbench output has no 'Number of threads: N' line")
    counters = {name: (int(count), rate) for name, count, rate in _COUNTER.findall(run)}
    missing = [name for name in COUNTERS if name not in counters]
    if missing:
        raise ParseError(f"sysbench statistics lack {', '.join(missing)} (truncated run?)")
    total = _TOTAL_TIME.search(run)
    percentile = _PERCENTILE.search(run)
    latency = dict(_LATENCY.findall(run))
    if not total:
        raise ParseError("sysbench statistics lack 'total time:' (truncated run?)")
    if not percentile:
        raise ParseError("sysbench statistics lack the 'Nth percentile:' latency line")
    if set(latency) != {"min", "avg", "max"}:
        raise ParseError("sysbench statistics lack the min/avg/max latency lines")
    result = SysbenchResult(
        threads=int(threads[-1]),
        transactions=counters["transactions"][0],
        tps=_number(counters["transactions"][1], "transactions per second"),
        queries=counters["queries"][0],
        qps=_number(counters["queries"][1], "queries per second"),
        ignored_errors=counters["ignored errors"][0],
        reconnects=counters["reconnects"][0],
        total_time_s=_number(total.group(1), "total time"),
        percentile=int(percentile.group(1)),
        latency_percentile_ms=_number(percentile.group(2), "latency percentile"),
        latency_min_ms=_number(latency["min"], "min latency"),
        latency_avg_ms=_number(latency["avg"], "avg latency"),
        latency_max_ms=_number(latency["max"], "max latency"),
    )
    if result.transactions == 0 or result.tps == 0:
        raise ParseError("sysbench completed no transaction")
    return result


def prepared_rows(text):
    """Rows ``sysbench prepare`` inserted, per table; ParseError when it inserted none."""
    if not text.strip():
        raise ParseError("sysbench prepare output is empty")
    fatal = fatal_lines(text)
    if fatal:
        raise ParseError(f"sysbench prepare failed, first FATAL line: {fatal[0]}")
    rows = {table: int(count) for count, table in _INSERTING.findall(text)}
    if not rows:
        raise ParseError("sysbench prepare output has no \"Inserting N records into '...'\" line")
    return rows
