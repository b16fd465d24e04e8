"""Validate a site's ``references.yaml`` before ReFrame reads it.

The file is ReFrame's external reference format (``reference = {'$ref': ...}``)::

    StreamCheck:                              # check class
      $index: [$processor.arch, scale, num_threads]
      x86_64_v4:                              # one level per index entry
        quick:
          1:
            Triad: [22100, -0.4, null, MB/s] # value, lower, upper, unit

Lower and upper are fractions of the value (lower <= 0 <= upper); null means
no bound on that side. Keys that
do not match (another microarchitecture, an unknown scale) mean "no
reference": the figure is logged and does not fail.

``$host`` (optional, written by ``./sitebench references SITE --write`` where the site's
references are per host) is the fingerprint of the host the references were made on
(:mod:`sitebench.sites.host`); on another host none of them applies.

:func:`problems` lists every problem of a file; given the checks (name -> their
figures and variables, :func:`sitebench.onboarding.validate.known_checks`) it also flags
references to checks, figures or index variables that no check has.
:func:`validate` raises the first.
"""

import math

import yaml

from sitebench.common.errors import SitebenchError
from sitebench.sites import host

FIX = "see site-configs/README.md for the format of references.yaml"


class _Found(Exception):
    """Stops the walk of one branch; the problem is already recorded."""


class _Problems:
    def __init__(self, path, checks):
        self.path, self.checks, self.found = path, checks, []

    def add(self, where, problem, fix=FIX):
        self.found.append((where, f"{self.path}: {where}: {problem}", fix))

    def fail(self, where, problem, fix=FIX):
        self.add(where, problem, fix)
        raise _Found()

    def entry(self, where, value, figure=None, check=None):
        if not isinstance(value, list) or len(value) not in (3, 4):
            self.fail(where, f"expected [value, lower, upper, unit], got {value!r}")
        if value and value[0] == "$xfail":
            return  # ReFrame's expected-failure form: [$xfail, reason, [v, l, u, unit]]
        ref, lower, upper = value[:3]
        for name, number in (("value", ref), ("lower", lower), ("upper", upper)):
            if number is None and name != "value":
                continue  # null: no bound on that side
            if (
                isinstance(number, bool)
                or not isinstance(number, (int, float))
                or not math.isfinite(number)
            ):
                self.fail(where, f"{name} must be a finite number, got {number!r}")
        if ref < 0:
            self.fail(
                where,
                f"value {ref} is negative; figures are rates, times or counts",
                "give the figure's expected value (>= 0); tolerances carry the sign",
            )
        if lower is not None and upper is not None and lower > upper:
            self.fail(where, f"lower tolerance {lower} is greater than upper tolerance {upper}")
        if (lower is not None and lower > 0) or (upper is not None and upper < 0):
            self.fail(
                where,
                f"tolerances are fractions around the value: need lower <= 0 <= upper, "
                f"got {lower}, {upper}",
            )
        if len(value) == 4 and not isinstance(value[3], str):
            self.fail(where, f"unit must be a string, got {value[3]!r}")
        known = (self.checks or {}).get(check)
        if known and figure not in known["figures"]:
            self.fail(
                where,
                f"no figure {figure!r}: {check} produces {', '.join(sorted(known['figures']))}",
                "rename the figure to one of these or remove it (reframe-checks/README.md)",
            )

    def walk(self, where, node, depth, check):
        if depth == 0:
            if not isinstance(node, dict) or not node:
                self.fail(
                    where, "expected a mapping of figure names to [value, lower, upper, unit]"
                )
            for figure, entry in node.items():
                self.guarded(self.entry, f"{where}.{figure}", entry, figure, check)
            return
        if not isinstance(node, dict):
            self.fail(where, f"expected a mapping (one more index level), got {node!r}")
        for key, child in node.items():
            self.guarded(self.walk, f"{where}.{key}", child, depth - 1, check)

    def guarded(self, step, *args):
        try:
            step(*args)
        except _Found:
            pass

    def check(self, name, refs):
        if not isinstance(refs, dict):
            self.fail(name, "expected a mapping")
        known = None
        if self.checks is not None:
            known = self.checks.get(name)
            if known is None:
                self.fail(
                    name,
                    f"no check is named {name!r}",
                    f"use one of {', '.join(sorted(self.checks))} or remove the block",
                )
        index = refs.get("$index", [])
        if not isinstance(index, list) or not all(isinstance(i, str) for i in index):
            self.fail(f"{name}.$index", "expected a list of attribute names")
        for key in index:
            if known and not key.startswith("$") and key not in known["variables"]:
                self.fail(
                    f"{name}.$index",
                    f"{name} has no variable or parameter {key!r}",
                    f"index by $processor.arch and {name}'s reference_keys "
                    f"({', '.join(known['reference_keys'])})",
                )
        body = {k: v for k, v in refs.items() if k != "$index"}
        # Without $index, the first level is ReFrame's 'system:partition' key.
        self.walk(name, body, len(index) if index else 1, name)


def problems(path, checks=None, shown=None):
    """(data, [(key, problem, fix), ...]) of the references file ``path``.

    ``checks``: name -> {"figures", "variables", "reference_keys"}; None skips those rules.
    ``shown``: how messages name the file (default: ``path`` as given).
    """
    shown = shown or path
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, [
            (
                "(file)",
                f"{shown} is missing",
                "create it (an empty mapping `{}` is valid: figures are then logged without "
                "references)",
            )
        ]
    found = _Problems(shown, checks)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        return None, [("(syntax)", f"{shown} is not valid YAML: {err}", FIX)]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        found.add("top level", "expected a mapping of check names")
        return None, found.found
    for check, refs in data.items():
        if check == host.REFERENCES_KEY:
            problem = host.host_entry_problem(refs)
            if problem:
                found.add(check, problem, host.HOST_ENTRY_FIX)
            continue
        found.guarded(found.check, check, refs)
    return data, found.found


def validate(path, checks=None):
    """Load and check ``path``; return the parsed mapping or raise SitebenchError."""
    data, found = problems(path, checks)
    if found:
        _key, problem, fix = found[0]
        raise SitebenchError(problem, fix)
    return data
