"""Progress bars for long work (indexing many runs, building a report), on stderr.

Shown only on a terminal, so logs and CI output stay clean; ``show`` forces it on or off.
"""

import sys

from tqdm import tqdm


def progress_bar(items, what, show=None):
    """``items`` wrapped in a progress bar labelled ``what``."""
    if show is None:
        show = sys.stderr.isatty()
    return tqdm(items, desc=what, unit="run", disable=not show, file=sys.stderr, leave=False)
