"""Figures out of stored runs: one table row per performance value.

Reads ReFrame's own run report (``report.json``) of each run; columns:
site, run, started, system, partition, environ, check, params, figure, value,
unit, reference, lower, upper, result, arch, ref_keys, ref_index, case_vars.
``params`` is the test's display name without the check name (e.g.
``%scale=quick %threads=all``), so rows group by parameter set without parsing
test names further. ``arch`` is the run's CPU microarchitecture (provenance);
``ref_keys``/``ref_index`` (JSON lists) are the variables a check indexes its
references by and their values in this case, so references can be proposed
from the store; ``case_vars`` (a JSON object) holds the case's parameters and
those variables with their values (threads, ranks, mapping...) for plots.

On request (``job_wall=True``), every case that ran also has ``job_wall`` (s): ReFrame's
run phase, from submitting the job to seeing it finish. Compared between a site and the same
machine behind a scheduler, it is the scheduler's overhead per check.
"""

import json
import re

import pandas as pd

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
]

_PARAM = re.compile(r"%(\w+)=(\S+)")


def _case_vars(case, params):
    values = {name: value for name, value in _PARAM.findall(params)}
    for key in case.get("reference_keys") or []:
        if isinstance(case.get(key), (str, int, float, bool)) or case.get(key) is None:
            values[key] = case.get(key)
    return json.dumps(values, sort_keys=True)


def rows_of_run(run, job_wall=False):
    started = run.report.get("session_info", {}).get("time_start")
    arch = (run.provenance or {}).get("cpu_arch")
    # ReFrame re-runs failed cases in later 'runs' (--max-retries); keep the last word.
    latest = {}
    for attempt in run.report.get("runs", []):
        for case in attempt.get("testcases", []):
            # The same test runs once per partition and environment: key by all three.
            name = case.get("unique_name") or case.get("display_name")
            latest[name, case.get("system"), case.get("partition"), case.get("environ")] = case
    for case in latest.values():
        if case.get("fixture"):
            continue
        check, _, params = (case.get("display_name") or case["name"]).partition(" ")
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
            "ref_keys": None if keys is None else json.dumps(keys),
            "ref_index": None if keys is None else json.dumps([case.get(k) for k in keys]),
            "case_vars": _case_vars(case, params),
        }
        ran = case.get("result") in ("pass", "fail")
        if job_wall and ran and case.get("time_run") is not None:
            yield {
                **base,
                "figure": "job_wall",
                "value": case["time_run"],
                "unit": "s",
                "reference": None,
                "lower": None,
                "upper": None,
                "result": "info",
            }
        for key, entry in (case.get("perfvalues") or {}).items():
            if not isinstance(entry, (list, tuple)) or len(entry) < 5:
                continue
            value, ref, lower, upper, unit = entry[:5]
            yield {
                **base,
                "figure": key.rsplit(":", 1)[-1],
                "value": value,
                "unit": unit,
                "reference": ref or None,
                "lower": lower,
                "upper": upper,
                "result": entry[5] if len(entry) > 5 else case.get("result"),
            }


def frame(runs, job_wall=False):
    """All figures of ``runs`` as a DataFrame (empty, with the columns, if none)."""
    data = [row for run in runs for row in rows_of_run(run, job_wall)]
    df = pd.DataFrame(data, columns=COLUMNS)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df
