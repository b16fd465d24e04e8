"""One parser per benchmark output format: plain functions from text to figures.

They have no dependency on ReFrame, so they are tested directly on real
captured outputs and used unchanged by the checks in ``reframe-checks/``.
Each raises :class:`ParseError` naming what is missing or wrong, instead of
returning a partial result.
"""


class ParseError(ValueError):
    """The output does not hold what a complete, verified run prints."""
