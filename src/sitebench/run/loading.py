"""Loading the checks without ReFrame's per-instance costs (issue 19, measured in
perf/README.md, "Loading the checks").

References. ReFrame 4.10's external references (``reference = {'$ref': file}``) re-read
and re-parse the YAML file for every test instance: 186 parses, 7.9 of 12.8 s of loading
the checks (issue 19). :func:`check_reference` builds, from one cached parse, the same
``$index`` structure ReFrame's ``_ReferenceDict._read_ref_file`` builds from the file (the
same tuples, ``xfail`` entries and errors, the same "no block: no reference"), and the base
check (:mod:`sitebench.run.benchmark`) assigns it inline. The cache is keyed by the file's
path, modification time and size: a file changed during a process is read again.
:func:`parsed` is the cached document itself, also read by the base check's host rule.

Deprecation walks. ReFrame's ``RegressionTest.variables`` is a deprecated alias of
``env_vars``; injecting it into every test instance calls ``user_deprecation_warning``
twice (inside ``suppress_deprecations``, so nothing is shown), and each call walks
``inspect.stack()`` with source context first: 628 walks, 3.5 s under cProfile, for the
302 instances of 2026-11-24 (perf/README.md). No sitebench code
reads or sets ``variables``. :func:`without_deprecated_aliases` makes the alias a plain
alias in the variable space of sitebench's base classes (their checks and fixtures inherit
it): the same field, value and name, without the walk. The only loss: a sitebench check
that set ``variables`` would not be warned that it is deprecated (none does; use
``env_vars``).
"""

import os

import yaml
from reframe.core.builtins import xfail
from reframe.core.exceptions import ReferenceParseError
from reframe.core.fields import DeprecatedField

_parsed = {}


def parsed(filename):
    """The YAML document of ``filename``, parsed once per (path, mtime, size)."""
    stat = os.stat(filename)
    key = (os.path.abspath(filename), stat.st_mtime_ns, stat.st_size)
    if key not in _parsed:
        with open(filename) as fp:
            document = yaml.safe_load(fp)
        _parsed.clear()  # one file a process; a changed one replaces it
        _parsed[key] = document
    return _parsed[key]


def check_reference(filename, entry_name):
    """ReFrame's reference dictionary of the check class ``entry_name`` in ``filename``
    (its ``$index`` kept as the dictionary's ``$index`` key), new on every call.

    The conversion follows ReFrame 4.10.4's ``_ReferenceDict._read_ref_file`` line for
    line, so a check gets the values and tolerances ``$ref`` gave it, and a bad entry
    raises the same :class:`ReferenceParseError`."""

    def _parse_ref_entry(key_path, val):
        key = ".".join(str(k) for k in key_path)
        try:
            first = val[0]
        except (TypeError, IndexError):
            raise ReferenceParseError(
                f"{filename}: invalid reference entry {key!r}: {val}"
            ) from None

        if first == "$xfail":
            return xfail(*val[1:-1], tuple(val[-1]))
        elif isinstance(first, str):
            raise ReferenceParseError(
                f"{filename}: unknown modifier {first!r} in " f"entry {key!r}: {val}"
            )
        else:
            return tuple(val)

    def _entry(key, val, key_path, max_depth):
        level = len(key_path) - 2
        if level == 0 and key == "$index":
            return tuple(val)

        if level < max_depth and isinstance(val, dict):
            return {k: _entry(k, v, key_path + [k], max_depth) for k, v in val.items()}

        if level == max_depth:
            return _parse_ref_entry(key_path, val)

        return val

    ref_entries = parsed(filename)
    try:
        ref_yaml = ref_entries[entry_name]
    except KeyError:
        return {}

    mkref = {}
    if "$index" in ref_yaml:
        index = tuple(ref_yaml["$index"])
        mkref["$index"] = index
        max_level = len(index)
    else:
        max_level = 1

    for key, val in ref_yaml.items():
        mkref[key] = _entry(key, val, [entry_name, key], max_level)

    return mkref


def without_deprecated_aliases(cls):
    """Make the deprecated alias variables of ``cls`` (ReFrame's ``variables`` of
    ``env_vars``) plain aliases of their target in ``cls``'s variable space, which its
    subclasses copy; return ``cls``. A ReFrame whose variable space differs is left as
    it is (then only the walks come back)."""
    space = getattr(cls, "_rfm_var_space", None)
    for var in getattr(space, "vars", {}).values():
        if isinstance(getattr(var, "field", None), DeprecatedField) and var.is_alias():
            var._p_field = var.target.field
    return cls
