"""Figures under a benchmark's printed resolution (OSU's and the Java ping-pong's 0.00):
logged as figures at the resolution limit, never a failed check by themselves (issue 38).
A check mixes :class:`ResolutionLimited` in and calls ``log_resolution_limit`` with its
parsed result (``at_resolution``: {size: resolution}, ``resolution_note()``) once its
sanity found nothing else wrong."""

from reframe.core.builtins import variable
from reframe.core.pipeline import RegressionTestPlugin


class ResolutionLimited(RegressionTestPlugin):
    #: Message sizes whose figure the benchmark printed as zero (0.00: a slow 1-byte
    #: bandwidth on a busy machine), under its printed resolution: figures at the
    #: resolution limit. Logged.
    #:
    #: :type: :class:`str`
    at_resolution = variable(str, value="", loggable=True)

    def log_resolution_limit(self, result):
        """Record the sizes ``result`` printed as zero and warn of them, naming the case."""
        self.at_resolution = " ".join(f"{s}B" for s in sorted(result.at_resolution))
        note = result.resolution_note()
        if note:
            self.logger.warning(f"{self.name}: {note}")
