"""Figures out of stored runs: one table row per performance value.

Reads ReFrame's own run report (``report.json``) of each run; columns:
site, run, started, check, params, figure, value, unit, reference, lower,
upper, result. ``params`` is the test's display name without the check
name (e.g. ``%scale=quick %threads=all``), so rows group by parameter set
without parsing test names further.

On request (``job_wall=True``), every case that ran also has ``job_wall`` (s): ReFrame's
run phase, from submitting the job to seeing it finish. Compared between a site and the same
machine behind a scheduler, it is the scheduler's overhead per check.
"""

import pandas as pd

COLUMNS = [
    "site",
    "run",
    "started",
    "check",
    "params",
    "figure",
    "value",
    "unit",
    "reference",
    "lower",
    "upper",
    "result",
]


def rows_of_run(run, job_wall=False):
    started = run.report.get("session_info", {}).get("time_start")
    # ReFrame re-runs failed cases in later 'runs' (--max-retries); keep the last word.
    latest = {}
    for attempt in run.report.get("runs", []):
        for case in attempt.get("testcases", []):
            latest[case.get("unique_name") or case.get("display_name")] = case
    for case in latest.values():
        if case.get("fixture"):
            continue
        check, _, params = (case.get("display_name") or case["name"]).partition(" ")
        base = {
            "site": run.site,
            "run": run.name,
            "started": started,
            "check": check,
            "params": params,
        }
        if (
            job_wall
            and case.get("time_run") is not None
            and case.get("result")
            in (
                "pass",
                "fail",
            )
        ):
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
                "site": run.site,
                "run": run.name,
                "started": started,
                "check": check,
                "params": params,
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
