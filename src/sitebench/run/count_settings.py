"""Thread and rank counts asked for with ReFrame's ``-S``, refused before anything runs.

The checks that scale take their count from a parameter (``threads`` or ``ranks``, labels
of :data:`~sitebench.run.scales.THREAD_LABELS` resolved against the cores) and set
``num_threads``/``num_ranks`` from it at setup. ReFrame sets no parameter with ``-S``
(``-S ranks=3`` is ignored with a warning) and a ``-S num_ranks=3`` would be overwritten
by the label's count: either way the run would not be what was asked, with nothing said.
Refused here, saying which counts exist and how to pick one (``-n '%ranks=2'``).
"""

from sitebench.common.errors import SitebenchError
from sitebench.run.scales import THREAD_LABELS

#: The parameter each count comes from, and the variable set from it.
PARAMETERS = {"threads": "num_threads", "ranks": "num_ranks"}
RESOLVED = {variable: parameter for parameter, variable in PARAMETERS.items()}
#: The checks whose count comes from such a parameter (reframe-checks/). Others have a
#: plain variable of that name, which -S sets (``PagesCheck.num_ranks``,
#: ``NpbJavaCheck.threads``): only a setting that names one of those is taken.
FROM_PARAMETER = {
    "StreamCheck", "ParsecCheck", "SysbenchCheck", "NpbCheck", "NpbMessagesCheck", "Gadget2Check",
}  # fmt: skip
OWN = {"num_ranks": "PagesCheck", "threads": "NpbJavaCheck"}


def settings(reframe_args):
    """(check or "", name, value) of every ``-S [Check.]name=value`` in ``reframe_args``."""
    args, found = list(reframe_args), []
    while args:
        arg = args.pop(0)
        if arg in ("-S", "--setvar") and args:
            text = args.pop(0)
        elif arg.startswith("--setvar="):
            text = arg[len("--setvar=") :]
        elif arg.startswith("-S") and len(arg) > 2:
            text = arg[2:]
        else:
            continue
        name, _, value = text.partition("=")
        owner, _, name = name.rpartition(".")
        found.append((owner, name, value))
    return found


def check(reframe_args):
    """Raise :class:`SitebenchError` for the first count ``-S`` cannot give."""
    listed = ", ".join(THREAD_LABELS)
    for owner, name, value in settings(reframe_args):
        parameter = name if name in PARAMETERS else RESOLVED.get(name)
        if parameter is None or (owner and owner not in FROM_PARAMETER):
            continue
        pick = (
            f"run the cases of that count alone with -n '%{parameter}={value}'"
            if value in THREAD_LABELS
            else f"{value!r} is not one of them"
        )
        why = (
            f"{name} is a parameter of the checks, which ReFrame does not set with -S"
            if name in PARAMETERS
            else f"{name} is set from the {parameter} parameter at setup and would be replaced"
        )
        given = f"{owner}.{name}" if owner else name
        raise SitebenchError(
            f"-S {given}={value}: {why}; the run would not have the count asked for",
            f"the {parameter} counts are {listed} (numbers below the cores, fractions of "
            f"them, 'all' every core); {pick}"
            + (
                f" (-S {OWN[name]}.{name}={value} sets that check's own {name})"
                if not owner and name in OWN
                else ""
            ),
        )
