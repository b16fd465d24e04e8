"""Figures out of stored runs: one table row per performance value.

Reads ReFrame's own run report (``report.json``) of each run; columns:
site, run, started, system, partition, environ, check, params, figure, value,
unit, reference, lower, upper, result, arch, ref_keys, ref_index, case_vars,
problem, host, disturbed, foreign_cores.
``params`` is the test's display name without the check name (e.g.
``%scale=quick %threads=all``), so rows group by parameter set without parsing
test names further. ``arch`` is the run's CPU microarchitecture (provenance);
``ref_keys``/``ref_index`` (JSON lists) are the variables a check indexes its
references by and their values in this case, so references can be proposed
from the store; ``case_vars`` (a JSON object) holds the case's parameters and
those variables with their values (threads, ranks, mapping...) for plots.

``problem`` (a JSON object, keys sorted) holds the variables that size the problem and
their values (HPL ``n nb p q``, NPB ``npb_class``, STREAM ``stream_array_size``, PARSEC
``num_options frames fluid_input``, sysbench ``table_size tables``, OSU ``min_size
max_size``): the check's logged ``problem_keys``. Runs stored before the checks logged
``problem_keys`` (2026-11-24) are read as they are: the keys come from
:data:`LEGACY_PROBLEM_KEYS`, each with the value the run logged, null where it logged none
(NPB runs before ``npb_class`` was logged); STREAM's array size is read from the concrete
spec (``stream_array_size=``). A null value is a problem of its own, never equal to a known
size. Figures are compared only between equal ``problem`` values.

``host`` is the fingerprint id (:mod:`sitebench.sites.host`) of the host a figure belongs
to where the partition's references and history are per host (the check's logged
``host_fingerprint``), null where they are site-wide. Runs stored before the checks logged
it: per host for sites ``local`` and ``local-slurm`` (the id recorded in, or derived from,
the run's provenance), site-wide for every other site.

``disturbed`` says whether other work took more than ``DISTURBED_SHARE`` of the machine's
CPUs while the figure's case ran, ``foreign_cores`` how many cores it took (the case's logged
variables, :mod:`sitebench.run.disturbance`): the drift check and the proposed references
leave disturbed figures out. Runs stored before cases logged them read as not disturbed,
``foreign_cores`` null (as where it was not measured: the check logs -1 there).

On request (``job_wall=True``), every case that ran also has ``job_wall`` (s): ReFrame's
run phase, from submitting the job to seeing it finish. Compared between a site and the same
machine behind a scheduler, it is the scheduler's overhead per check.
"""

import json
import re

import pandas as pd

from sitebench.results.figures_file import LEGACY_PROBLEM_KEYS
from sitebench.sites import host

COLUMNS = [
    "site",
    "run",
    "started",
    "system",
    "partition",
    "environ",
    "check",
    "params",
    "figure",
    "value",
    "unit",
    "reference",
    "lower",
    "upper",
    "result",
    "arch",
    "ref_keys",
    "ref_index",
    "case_vars",
    "problem",
    "host",
    "disturbed",
    "foreign_cores",
]

#: Sites whose runs are per host when the run does not say (this machine, alone or through
#: its private Slurm cluster).
HOST_SITES = {"local", "local-slurm"}
_ARRAY_SIZE = re.compile(r"\bstream_array_size=(\d+)")

_PARAM = re.compile(r"%(\w+)=(\S+)")
#: json.dumps(value, sort_keys=True), without making an encoder per call (a run's refresh
#: encodes four values per case: a third of the time of its figure rows).
_sorted_json = json.JSONEncoder(sort_keys=True).encode
#: Types whose equal values always encode alike (not float: -0.0 == 0.0; a type in the key:
#: True == 1).
_PLAIN = frozenset({str, int, bool, type(None)})
#: Encoded JSON of the values met before: a site's runs repeat their cases' keys, indexes,
#: variables and problems night after night (4 encodings a case, 280 cases a run). Bounded.
_ENCODED = {}
_ENCODED_MAX = 1 << 16


def _memo(key, encode, value):
    found = _ENCODED.get(key)
    if found is None:
        if len(_ENCODED) >= _ENCODED_MAX:
            _ENCODED.clear()
        found = _ENCODED[key] = encode(value)
    return found


def _object_json(values):
    """``_sorted_json(values)`` of a dict, from the memo where its keys are text and its
    values of :data:`_PLAIN` types (else encoded as it is: an error stays the same error)."""
    kinds = tuple(map(type, values.values()))
    if not _PLAIN.issuperset(kinds) or not {str}.issuperset(map(type, values)):
        return _sorted_json(values)
    return _memo(("o", tuple(values.items()), kinds), _sorted_json, values)


def _list_json(values):
    """``json.dumps(values)`` of a list, from the memo where its items are :data:`_PLAIN`."""
    kinds = tuple(map(type, values))
    if not _PLAIN.issuperset(kinds):
        return json.dumps(values)
    return _memo(("l", tuple(values), kinds), json.dumps, values)


def _case_vars(case, params):
    values = {name: value for name, value in _PARAM.findall(params)}
    keys = case.get("reference_keys")
    for key in keys if isinstance(keys, list) else []:
        if (
            isinstance(key, str)
            and isinstance(case.get(key), (str, int, float, bool))
            or case.get(key) is None
        ):
            values[key] = case.get(key)
    return _object_json(values)


def _foreign_cores(case):
    # -1 is the check's "not measured" (jobs not started on this machine): null, as unknown.
    value = case.get("foreign_cores")
    measured = not isinstance(value, (int, float)) or isinstance(value, bool) or value >= 0
    return value if measured else None


def problem_of(case, check):
    """The JSON object of the case's problem-size variables (see the module's docstring)."""
    keys = case.get("problem_keys")
    if not isinstance(keys, list):
        keys = LEGACY_PROBLEM_KEYS.get(check, []) if isinstance(check, str) else []
    values = {}
    for key in (k for k in keys if isinstance(k, str)):
        value = case.get(key)
        if key == "stream_array_size" and not value:
            spec = case.get("concrete_spec")
            found = _ARRAY_SIZE.search(spec if isinstance(spec, str) else "")
            value = int(found.group(1)) if found else None
        values[key] = value if isinstance(value, (str, int, float, bool)) else None
    return _object_json(values)


def shown_problem(problem):
    """``n=9984 nb=192 p=1 q=2`` from a ``problem`` JSON object ('' for none)."""
    values = json.loads(problem) if isinstance(problem, str) and problem else {}
    return " ".join(f"{k}={'?' if v is None else v}" for k, v in values.items())


def run_host(provenance, topology):
    """The host fingerprint of a stored run: recorded in its provenance, else derived from
    its topology (both as :func:`sitebench.results.rundirs.load_run` read them), else the
    unknown host. The run's files are never opened here: that reader is the defensive one."""
    recorded = host.of_run(provenance if isinstance(provenance, dict) else {}, None)
    if recorded.get("id") != host.UNKNOWN:
        return recorded
    try:
        return host.from_topology(topology) or recorded
    except (TypeError, ValueError, ArithmeticError):
        return recorded  # a topology of the wrong types says nothing of the host


_TEXT_OR_NULL = frozenset({str, type(None)})


def _hashable(value):
    return value if isinstance(value, (str, int, float, type(None))) else repr(value)


def split_label(case):
    """(check, parameters) of a case's ``display_name`` ("StreamCheck %threads=4"); a label
    of the wrong type (another site's report may hold anything) is passed on as the check,
    for the store to keep as null and name the run, never to skip it."""
    label = case.get("display_name") or case.get("name")
    if not isinstance(label, str):
        return label, ""
    check, _, params = label.partition(" ")
    return check, params


#: A figure's own columns (the rest of :data:`COLUMNS` are its case's).
_FIGURE_KEYS = ["figure", "value", "unit", "reference", "lower", "upper", "result"]


def rows_of_run(run, job_wall=False):
    """One dict per figure of ``run`` (the module's columns)."""
    for base, found in _cases(run, job_wall):
        for figure in found:
            yield {**base, **dict(zip(_FIGURE_KEYS, figure))}


def columns_of_run(run, job_wall=False):
    """:func:`rows_of_run` as {column: values}: each case's values are written once for
    all its figures, with no dict per figure (the store indexes a run's 445 figures so)."""
    columns = {name: [] for name in COLUMNS}
    for base, found in _cases(run, job_wall):
        if not found:
            continue
        for name, value in base.items():
            columns[name] += [value] * len(found)
        for name, values in zip(_FIGURE_KEYS, zip(*found)):
            columns[name] += values
    return columns


def _cases(run, job_wall):
    """(the case's values, [(figure, value, unit, reference, lower, upper, result)]) of each
    case of ``run`` that is not a fixture."""
    started = run.report.get("session_info", {}).get("time_start")
    arch = (run.provenance or {}).get("cpu_arch")
    legacy_host = None
    if run.site in HOST_SITES:
        legacy_host = run_host(run.provenance, getattr(run, "topology", None))["id"]
    # ReFrame re-runs failed cases in later 'runs' (--max-retries); keep the last word.
    latest = {}
    for attempt in run.report.get("runs", []):
        for case in attempt.get("testcases", []):
            # The same test runs once per partition and environment: key by all three.
            name = case.get("unique_name") or case.get("display_name")
            key = (name, case.get("system"), case.get("partition"), case.get("environ"))
            if not _TEXT_OR_NULL.issuperset(map(type, key)):
                key = tuple(map(_hashable, key))  # as it is where it is text or null
            latest[key] = case
    for case in latest.values():
        if case.get("fixture"):
            continue
        check, params = split_label(case)
        keys = case.get("reference_keys")
        keys = keys if isinstance(keys, list) else None
        base = {
            "site": run.site,
            "run": run.name,
            "started": started,
            "system": case.get("system"),
            "partition": case.get("partition"),
            "environ": case.get("environ"),
            "check": check,
            "params": params,
            "arch": arch,
            "ref_keys": None if keys is None else _list_json(keys),
            "ref_index": None if keys is None else _list_json([case.get(k) for k in keys]),
            "case_vars": _case_vars(case, params),
            "problem": problem_of(case, check),
            "host": (
                (case.get("host_fingerprint") or None)
                if "host_fingerprint" in case
                else legacy_host
            ),
            # Older runs lack the mark: their cases were not measured, so not disturbed.
            "disturbed": False if case.get("disturbed") is None else case.get("disturbed"),
            "foreign_cores": _foreign_cores(case),
        }
        found = []
        ran = case.get("result") in ("pass", "fail")
        if job_wall and ran and case.get("time_run") is not None:
            found.append(("job_wall", case["time_run"], "s", None, None, None, "info"))
        for key, entry in (case.get("perfvalues") or {}).items():
            if not isinstance(entry, (list, tuple)) or len(entry) < 5:
                continue
            value, ref, lower, upper, unit = entry[:5]
            result = entry[5] if len(entry) > 5 else case.get("result")
            found.append((key.rsplit(":", 1)[-1], value, unit, ref or None, lower, upper, result))
        yield base, found


def frame(runs, job_wall=False):
    """All figures of ``runs`` as a DataFrame (empty, with the columns, if none)."""
    data = [row for run in runs for row in rows_of_run(run, job_wall)]
    df = pd.DataFrame(data, columns=COLUMNS)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df
