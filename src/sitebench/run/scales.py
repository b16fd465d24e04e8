"""The fixed vocabulary of scales and thread counts the checks use.

A scale is a ReFrame parameter and tag of every check; a partition runs the
scales listed in its features as ``scale_<name>`` (``+scale_quick``), so a
site says which scales it runs and CI picks the small one.
"""

#: quick: the whole suite in minutes on a 2-core machine; full: sizes from memory.
SCALES = ("quick", "full")

#: Thread/rank counts as labels resolved against the partition's cores, so one
#: parameter list serves a laptop and a 128-core node alike.
THREAD_LABELS = ("1", "2", "4", "8", "16", "quarter", "half", "all")

_FRACTIONS = {"quarter": 4, "half": 2, "all": 1}


def resolve_threads(label, num_cores):
    """The thread count of ``label`` on ``num_cores`` cores, or None to skip it.

    Numbers run when below the core count ('all' covers the core count
    itself); fractions run unless they round to below one or coincide with a
    number that already runs, so every count runs once and 'all' always runs.
    """
    if label in _FRACTIONS:
        count = num_cores // _FRACTIONS[label]
        if label == "all":
            return count if count >= 1 else None
        numeric = {int(x) for x in THREAD_LABELS if x.isdigit() and int(x) < num_cores}
        if count < 1 or count == num_cores or count in numeric:
            return None
        return count
    count = int(label)
    return count if count < num_cores else None
