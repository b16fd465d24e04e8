"""NASA's NPB 3.0 Java version (NPB3.0-JAV, threads), the substitute for NPB-MPJ::

    CG.A: Verification Successful
    ***** NAS Parallel Benchmarks Java version (NPB3_0_JAV) CG *****
    * Class             = A                                        *
    * Size              = 14000                                    *
    * Iterations        = 15                                       *
    * Time in seconds   = 1.097                                    *
    * Mops total        = 1364.139                                 *
    * Verification      = Successful                               *
    * Threads requested = 2                                        *

A class it does not know is refused with "classes allowed are A,B,C,W and S." (exit 1);
``bin/npb-java`` without a JVM says "npb-java: no JVM at ..." (exit 2).
"""

import re
from dataclasses import dataclass

from . import ParseError

_BANNER = re.compile(
    r"^\*+ NAS Parallel Benchmarks Java version \(NPB3_0_JAV\) (\w+) \*+\s*$", re.MULTILINE
)
_FIELD = re.compile(r"^\* ([A-Za-z ]+?)\s*=\s*(.*?)\s*\*\s*$", re.MULTILINE)
_REFUSED = re.compile(r"^(classes allowed are .*|npb-java: .*)$", re.MULTILINE)


@dataclass
class NpbJavaResult:
    benchmark: str  # CG, FT, IS, MG, LU, BT, SP
    npb_class: str
    threads: int
    time: float  # s
    mops_total: float
    verified: bool


def parse(text):
    """An :class:`NpbJavaResult`; :class:`ParseError` names what is missing."""
    refused = _REFUSED.search(text)
    if refused:
        raise ParseError(f"NPB Java refused the run: {refused.group(1)}")
    banner = _BANNER.search(text)
    if not banner:
        raise ParseError("no NPB3_0_JAV result banner: the run did not finish (truncated?)")
    fields = dict(_FIELD.findall(text, banner.end()))
    try:
        return NpbJavaResult(
            benchmark=banner.group(1),
            npb_class=fields["Class"],
            threads=int(fields["Threads requested"]),
            time=float(fields["Time in seconds"]),
            mops_total=float(fields["Mops total"]),
            verified=fields["Verification"] == "Successful",
        )
    except KeyError as err:
        raise ParseError(f"NPB Java banner has no {err.args[0]!r} line (truncated?)")
    except ValueError as err:
        raise ParseError(f"NPB Java banner: {err}")
