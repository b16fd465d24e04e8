"""Progress bars for long work (indexing many runs, building a report), on stderr.

Shown only on a terminal, so logs and CI output stay clean; ``show`` forces it on or off.
"""

import sys


def progress_bar(items, what, show=None):
    """``items`` wrapped in a progress bar labelled ``what``."""
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        return iter(items)  # no bar: tqdm's import (0.05 s) is not worth a plain loop
    from tqdm import tqdm

    return tqdm(items, desc=what, unit="run", file=sys.stderr, leave=False)
