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
"""

import math

import yaml

from sitebench.errors import SitebenchError

FIX = "see site-configs/README.md for the format of references.yaml"


def _fail(path, where, problem):
    raise SitebenchError(f"{path}: {where}: {problem}", FIX)


def _check_entry(path, where, value):
    if not isinstance(value, list) or len(value) not in (3, 4):
        _fail(path, where, f"expected [value, lower, upper, unit], got {value!r}")
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
            _fail(path, where, f"{name} must be a finite number, got {number!r}")
    if lower is not None and upper is not None and lower > upper:
        _fail(path, where, f"lower tolerance {lower} is greater than upper tolerance {upper}")
    if (lower is not None and lower > 0) or (upper is not None and upper < 0):
        _fail(
            path,
            where,
            f"tolerances are fractions around the value: need lower <= 0 <= upper, "
            f"got {lower}, {upper}",
        )
    if len(value) == 4 and not isinstance(value[3], str):
        _fail(path, where, f"unit must be a string, got {value[3]!r}")


def _walk(path, where, node, depth):
    if depth == 0:
        if not isinstance(node, dict) or not node:
            _fail(path, where, "expected a mapping of figure names to [value, lower, upper, unit]")
        for figure, entry in node.items():
            _check_entry(path, f"{where}.{figure}", entry)
        return
    if not isinstance(node, dict):
        _fail(path, where, f"expected a mapping (one more index level), got {node!r}")
    for key, child in node.items():
        _walk(path, f"{where}.{key}", child, depth - 1)


def validate(path):
    """Load and check ``path``; return the parsed mapping or raise SitebenchError."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SitebenchError(
            f"{path} is missing",
            "create it (an empty mapping `{}` is valid: figures are then logged without "
            "references)",
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SitebenchError(f"{path} is not valid YAML: {err}", FIX) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        _fail(path, "top level", "expected a mapping of check names")
    for check, refs in data.items():
        if not isinstance(refs, dict):
            _fail(path, check, "expected a mapping")
        index = refs.get("$index", [])
        if not isinstance(index, list) or not all(isinstance(i, str) for i in index):
            _fail(path, f"{check}.$index", "expected a list of attribute names")
        body = {k: v for k, v in refs.items() if k != "$index"}
        # Without $index, the first level is ReFrame's 'system:partition' key.
        _walk(path, check, body, len(index) if index else 1)
    return data
