"""``site-configs/<site>/hpl.yaml``: the site's HPL input, as ``./sitebench tune hpl`` found it.

Optional; every key is optional and a missing key keeps HPL's recommended value (the
``DEFAULTS`` below, HPL 2.3's ``TUNING`` file and the input the check always wrote)::

    nb: 224               # block size NB (HPL.dat line 8)
    p: 1                  # process grid P x Q (lines 11-12): both or neither; P x Q must
    q: 2                  #   be the check's rank count (one rank per core)
    pmap: row             # process mapping (line 9): row | column
    pfact: right          # panel factorisation (line 15): left | crout | right
    nbmin: 4              # recursive stopping criterion (line 17), 1 <= NBMIN <= NB
    ndiv: 2               # panels in recursion (line 19), >= 2
    rfact: crout          # recursive panel factorisation (line 21): left | crout | right
    bcast: 1rM            # broadcast (line 23): 1rg | 1rM | 2rg | 2rM | Lng | LnM
    depth: 1              # look-ahead depth (line 25), >= 0
    swap: mix             # swapping (line 26): binary-exchange | long | mix
    swap_threshold: 64    # swapping threshold (line 27), >= 0
    l1: transposed        # L1 form (line 28): transposed | no-transposed
    u: transposed         # U form (line 29): transposed | no-transposed
    equilibration: true   # equilibration (line 30)
    tuned:                # written by the tuner, not read by the check: how it was found
      n: 10000
      gflops: 97.1
      trials: .sitebench/tune/local/hpl-20261124T061500Z.json

The HPL check (reframe-checks/hpl.py) writes these values into HPL.dat on every run; N stays
the check's own (from memory, capped at the quick scale). ``load`` refuses a bad file with
the key, the value and the fix.
"""

import yaml

from sitebench.common import paths
from sitebench.common.errors import SitebenchError

FILE = "hpl.yaml"

#: HPL's codes of the named choices (the values HPL.dat takes on each line).
CHOICES = {
    "pmap": {"row": 0, "column": 1},
    "pfact": {"left": 0, "crout": 1, "right": 2},
    "rfact": {"left": 0, "crout": 1, "right": 2},
    "bcast": {"1rg": 0, "1rM": 1, "2rg": 2, "2rM": 3, "Lng": 4, "LnM": 5},
    "swap": {"binary-exchange": 0, "long": 1, "mix": 2},
    "l1": {"transposed": 0, "no-transposed": 1},
    "u": {"transposed": 0, "no-transposed": 1},
}

#: Whole-number keys -> smallest value allowed.
MINIMUM = {"nb": 1, "p": 1, "q": 1, "nbmin": 1, "ndiv": 2, "depth": 0, "swap_threshold": 0}

#: HPL's recommended input (the check's input before tuning; p and q: from the rank count).
DEFAULTS = {
    "nb": 192,
    "pmap": "row",
    "pfact": "right",
    "nbmin": 4,
    "ndiv": 2,
    "rfact": "crout",
    "bcast": "1rM",
    "depth": 1,
    "swap": "mix",
    "swap_threshold": 64,
    "l1": "transposed",
    "u": "transposed",
    "equilibration": True,
}

#: Every key the file may hold, in HPL.dat's order.
KEYS = ("nb", "p", "q", *(k for k in DEFAULTS if k != "nb"), "tuned")


def path_of(site):
    return paths.site_config_dir(site) / FILE


def _example(key):
    if key in CHOICES:
        return f"{key}: {' | '.join(CHOICES[key])}"
    if key == "equilibration":
        return "equilibration: true"
    if key in ("p", "q"):
        return "p: 1 and q: 2 (P x Q = the ranks, one per core)"
    if key == "tuned":
        return "tuned: {n: 10000, gflops: 97.1} (or remove it)"
    return f"{key}: {DEFAULTS.get(key, MINIMUM[key])} (a whole number >= {MINIMUM[key]})"


def problems(data, shown="hpl.yaml"):
    """[(key, problem, fix)] of the parsed file ``data``."""
    if data is None:
        return []
    if not isinstance(data, dict):
        return [("(top level)", f"{shown} must be a mapping of keys", f"keys: {', '.join(KEYS)}")]
    found = []

    def bad(key, expected):
        found.append((key, f"{shown}: {key} is {data[key]!r}, expected {expected}", _example(key)))

    for key, value in data.items():
        if key not in KEYS:
            found.append((str(key), f"{shown}: unknown key {key!r}", f"keys: {', '.join(KEYS)}"))
        elif key in CHOICES:
            if value not in CHOICES[key]:
                bad(key, f"one of {', '.join(CHOICES[key])}")
        elif key == "equilibration":
            if not isinstance(value, bool):
                bad(key, "true or false")
        elif key == "tuned":
            if not isinstance(value, dict):
                bad(key, "a mapping")
        elif isinstance(value, bool) or not isinstance(value, int) or value < MINIMUM[key]:
            bad(key, f"a whole number >= {MINIMUM[key]}")
    if found:
        return found
    if ("p" in data) != ("q" in data):
        found.append(
            (
                "p",
                f"{shown}: p and q go together, only {'p' if 'p' in data else 'q'} is set",
                _example("p"),
            )
        )
    nb = data.get("nb", DEFAULTS["nb"])
    if data.get("nbmin", DEFAULTS["nbmin"]) > nb:
        found.append(
            (
                "nbmin",
                f"{shown}: nbmin {data.get('nbmin')} is larger than nb {nb}",
                f"nbmin: {min(DEFAULTS['nbmin'], nb)} (1 <= nbmin <= nb)",
            )
        )
    return found


def read(path):
    """(settings, [(key, problem, fix)]) of ``path``: HPL's defaults filled in, plus ``p`` and
    ``q`` where set; no file: the defaults."""
    settings = dict(DEFAULTS)
    if not path.is_file():
        return settings, []
    shown = paths.shown(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        return settings, [("(syntax)", f"{shown} is not valid YAML: {err}", "fix the syntax")]
    found = problems(data, shown)
    if found:
        return settings, found
    settings.update({k: v for k, v in (data or {}).items() if k != "tuned"})
    return settings, []


def load(path):
    """The settings of ``path`` (HPL's defaults where it has no key or does not exist); a
    SitebenchError naming the key and the fix when it is wrong."""
    settings, found = read(path)
    if found:
        _key, problem, fix = found[0]
        raise SitebenchError(problem, f"e.g. {fix}")
    return settings


def render(settings, tuned=None):
    """The file's text: every tuned key in HPL.dat's order, then how they were found."""
    lines = [
        "# HPL input of this site, written by `./sitebench tune hpl` (every key optional;",
        "# src/sitebench/sites/hpl_settings.py says what each means). The HPL check writes",
        "# them into HPL.dat; N stays the check's own.",
    ]
    data = {k: settings[k] for k in KEYS if k in settings and k != "tuned"}
    found = problems(data)
    if found:
        raise SitebenchError(found[0][1], found[0][2])
    text = "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False)
    if tuned:
        text += yaml.safe_dump({"tuned": tuned}, sort_keys=False)
    return text
