"""One parser per benchmark output format: plain functions from text to figures.

They have no dependency on ReFrame, so they are tested directly on real
captured outputs and used unchanged by the checks in ``reframe-checks/``.
Each raises :class:`ParseError` naming what is missing or wrong, instead of
returning a partial result.
"""


class ParseError(ValueError):
    """The output does not hold what a complete, verified run prints."""


def printed_resolution(raw):
    """One unit of the last digit a benchmark printed: 0.01 for ``0.00``, 1 for ``0``."""
    decimals = raw.partition(".")[2]
    return 10.0 ** -len(decimals)


def at_resolution_note(what, unit, below):
    """One sentence for figures printed as zero: {size: resolution} ``below``, or None.

    A value under a benchmark's printed resolution (OSU and the Java ping-pong print two
    decimals: a slow 1-byte bandwidth prints 0.00) is a figure at the resolution limit,
    not a failed run: on a busy machine a 1-byte bandwidth drops under 0.005 MB/s.
    """
    if not below:
        return None
    sizes = ", ".join(f"{s} B" for s in sorted(below))
    resolution = max(below.values())
    return (
        f"{what} printed 0 at {sizes}: under its printed resolution of {resolution:g} {unit}, "
        f"kept as a figure at the resolution limit (a slow run: was the machine busy?)"
    )
