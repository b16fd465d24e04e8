"""Page-size runs: sitebench's memaccess kernel and pagewatch (spack-repo/.../memaccess/).

memaccess prints, after touching its buffer, what the kernel gave it::

    memaccess 1.0
    pages asked: large
    buffer: 512 MiB
    AnonHugePages: 524288 kB of the buffer (100.0 %), Rss 525576 kB (/proc/self/smaps_rollup)
    streaming: 3 passes, 0.076 s, 21099.7 MB/s
    random: 5000000 dependent loads, 0.878 s, 175.589 ns per load
    check: streaming sum correct, chain ended at line 3676380
    pages: as asked (large)

pagewatch runs another program (an NPB rank) and prints on stderr, when it ends::

    pagewatch: pid 10656 peak AnonHugePages 65536 kB, peak Rss 66864 kB, 9 samples
"""

import re
from dataclasses import dataclass

from . import ParseError

#: The page sizes the checks compare, by the name the kernel's ``-p`` and the checks use.
PAGE_SIZES = {"small": "4 KiB", "large": "2 MiB"}

_WATCH = re.compile(
    r"^pagewatch: pid (\d+) peak AnonHugePages (\d+) kB, peak Rss (\d+) kB, (\d+) samples$",
    re.MULTILINE,
)


@dataclass
class MemaccessResult:
    pages: str  # asked: small | large
    buffer_mib: int
    huge_kb: int  # AnonHugePages gained by the buffer
    huge_percent: float  # of the buffer
    stream_mbs: float
    random_ns: float  # per dependent load
    sum_correct: bool
    pages_as_asked: bool


@dataclass
class Watched:
    pid: int
    huge_kb: int  # peak AnonHugePages of the process
    rss_kb: int  # peak Rss
    samples: int


def _find(pattern, text, what):
    match = re.search(pattern, text, re.MULTILINE)
    if not match:
        raise ParseError(f"memaccess output has no {what} line (truncated run?)")
    return match


def parse(text):
    """A :class:`MemaccessResult`; :class:`ParseError` names the refusal or missing line."""
    refused = re.search(r"^memaccess: error: (.*)$", text, re.MULTILINE)
    if refused:
        raise ParseError(f"memaccess refused the run: {refused.group(1)}")
    if not re.search(r"^memaccess \S+$", text, re.MULTILINE):
        raise ParseError(
            "no 'memaccess <version>' header: not memaccess output, or it did not start"
        )
    pages = _find(r"^pages asked: (\w+)$", text, "'pages asked'").group(1)
    buffer = _find(r"^buffer: (\d+) MiB$", text, "'buffer'")
    huge = _find(r"^AnonHugePages: (\d+) kB of the buffer \((\S+) %\)", text, "'AnonHugePages'")
    stream = _find(r"^streaming: \d+ passes, \S+ s, (\S+) MB/s$", text, "'streaming'")
    random = _find(r"^random: \d+ dependent loads, \S+ s, (\S+) ns per load$", text, "'random'")
    check = _find(r"^check: streaming sum (correct|WRONG)", text, "'check'")
    verdict = _find(r"^pages: (as asked|NOT AS ASKED)", text, "'pages:'")
    return MemaccessResult(
        pages=pages,
        buffer_mib=int(buffer.group(1)),
        huge_kb=int(huge.group(1)),
        huge_percent=float(huge.group(2)),
        stream_mbs=float(stream.group(1)),
        random_ns=float(random.group(1)),
        sum_correct=check.group(1) == "correct",
        pages_as_asked=verdict.group(1) == "as asked",
    )


def watched(text):
    """One :class:`Watched` per pagewatch line (one per rank); ParseError when there is none."""
    found = [Watched(*(int(x) for x in m.groups())) for m in _WATCH.finditer(text)]
    if not found:
        raise ParseError(
            "no 'pagewatch:' line: the program was not run under pagewatch, or "
            "pagewatch was killed"
        )
    return found


def huge_page_problem(pages, watched_ranks, min_share=0.5):
    """Why the pages were not the ones asked (None when they were): ``large`` needs at least
    ``min_share`` of every rank's peak Rss in huge pages, ``small`` none at all."""
    for rank in watched_ranks:
        share = rank.huge_kb / rank.rss_kb if rank.rss_kb > 0 else 0.0
        if pages == "large" and share < min_share:
            return (
                f"large pages asked but pid {rank.pid} had {rank.huge_kb} kB of its peak Rss "
                f"{rank.rss_kb} kB in huge pages ({100 * share:.0f} %, at least "
                f"{100 * min_share:.0f} % expected): the large pages were not used"
            )
        if pages == "small" and rank.huge_kb > 0:
            return (
                f"small pages asked but pid {rank.pid} had {rank.huge_kb} kB in huge pages "
                f"(transparent huge pages 'always' on this machine?)"
            )
    return None
