"""A run's ``figures.json``: ReFrame's report cut down to what comparison reads.

ReFrame's ``report.json`` holds every attribute of every test case (1.4 MB for the quick
suite, 300 cases); the store, compare, regressions, references and the report read a few of
them. Every run therefore also holds ``figures.json``: the same schema (``session_info``,
``runs`` of ``testcases``), with only the fields those readers use (:data:`SESSION_FIELDS`,
:data:`CASE_FIELDS`, the variables a case names as its reference and problem keys). It is
written when the run is stored, before the run is committed, so the run's signed commit
covers it; every site takes it with the provenance, and the full report stays in the results
repository until ``./sitebench show SITE/RUN`` writes the run out (:mod:`.exchange`).

Nothing trusts it blindly: :func:`audit` derives it again from the run's own
``report.json`` and says where the two differ (a site could sign figures its report does
not hold); ``./sitebench show`` refuses a run that fails it.
"""

import json
from pathlib import Path

from sitebench.common import files

FIGURES_FILE = "figures.json"
REPORT_FILE = "report.json"
#: The problem-size variables of the checks, for runs stored before they logged them
#: (:mod:`.figures` reads them; here so that a run is written without pandas).
LEGACY_PROBLEM_KEYS = {
    "HplCheck": ["n", "nb", "p", "q"],
    "NpbCheck": ["npb_class"],
    "StreamCheck": ["stream_array_size"],
    "ParsecCheck": ["num_options", "frames", "fluid_input"],
    "SysbenchCheck": ["table_size", "tables"],
    "OsuLatencyCheck": ["min_size", "max_size"],
    "OsuBandwidthCheck": ["min_size", "max_size"],
}
#: ``session_info``: the run's times, host and counts (the store's run row, reframe_db).
SESSION_FIELDS = (
    "data_version",
    "hostname",
    "num_cases",
    "num_failures",
    "time_end",
    "time_end_unix",
    "time_start",
    "time_start_unix",
    "uuid",
    "version",
)
#: A case's fields read by figures.py, store.py, summary.py and report/cases.py (not
#: ``stagedir``: it finds the ``failed-stage/`` of runs stored before 2026-11-24 only, which
#: have no figures.json).
CASE_FIELDS = (
    "concrete_spec",
    "display_name",
    "disturbed",
    "environ",
    "fail_phase",
    "fixture",
    "foreign_cores",
    "host_fingerprint",
    "name",
    "num_cpus_per_task",
    "num_tasks",
    "outputdir",
    "partition",
    "perfvalues",
    "problem_keys",
    "reference_keys",
    "references_host",
    "result",
    "system",
    "time_run",
    "unique_name",
    # The problem sizes of runs stored before the checks logged their problem_keys.
    *sorted({key for keys in LEGACY_PROBLEM_KEYS.values() for key in keys}),
)
#: Of a case's ``env_vars``, the thread counts the report shows.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "PARSEC_CPU_NUM")


def _named_keys(case, field):
    keys = case.get(field)
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []


def _case(case):
    if not isinstance(case, dict):
        return case  # kept as it is: the readers skip what is not a case, as in the report
    wanted = [
        *CASE_FIELDS,
        *_named_keys(case, "reference_keys"),
        *_named_keys(case, "problem_keys"),
    ]
    kept = {key: case[key] for key in wanted if key in case}
    env = case.get("env_vars")
    if isinstance(env, dict):
        kept["env_vars"] = {k: env[k] for k in THREAD_VARIABLES if k in env}
    return kept


def derive(report):
    """The figures of a loaded ReFrame report (any JSON: another site's report may hold
    anything; what is not an object or list where the report has one is left out)."""
    if not isinstance(report, dict):
        return {}
    derived = {}
    info = report.get("session_info")
    if isinstance(info, dict):
        derived["session_info"] = {k: info[k] for k in SESSION_FIELDS if k in info}
    attempts = report.get("runs")
    if isinstance(attempts, list):
        derived["runs"] = [
            (
                {"testcases": [_case(c) for c in attempt["testcases"]]}
                if isinstance(attempt, dict) and isinstance(attempt.get("testcases"), list)
                else {}
            )
            for attempt in attempts
        ]
    return derived


def encode(figures):
    """``figures.json``'s bytes: compact, in the report's order (its figures come out as
    from the report, in the same order; the same report, the same bytes)."""
    return (json.dumps(figures, separators=(",", ":")) + "\n").encode()


def write(run_dir):
    """Write ``figures.json`` beside the run's ``report.json`` (a temporary name, then a
    rename: never half a file); its path. The report is the run's own, just written; one
    that is not JSON (a ReFrame killed while writing it) gets none: the run is read from
    its report, which says what is wrong with it."""
    run_dir = Path(run_dir)
    try:
        report = json.loads((run_dir / REPORT_FILE).read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    target = run_dir / FIGURES_FILE
    files.write_atomic(target, encode(derive(report)))
    return target


def audit(report, figures):
    """Why ``figures`` (the loaded ``figures.json``) is not what the loaded ``report``
    holds, or "" where it is exactly that."""
    expected = derive(report)
    if figures == expected:
        return ""
    if not isinstance(figures, dict):
        return f"{FIGURES_FILE} is not a JSON object"
    for part in ("session_info", "runs"):
        if figures.get(part) != expected.get(part):
            if part == "runs" and isinstance(figures.get("runs"), list):
                return _first_case_difference(figures["runs"], expected.get("runs") or [])
            return f"its {part} differs from {REPORT_FILE}'s"
    extra = sorted(set(figures) - set(expected))
    return f"it holds {', '.join(map(str, extra))[:200]}, which {REPORT_FILE} does not"


def audit_bytes(report, figures):
    """:func:`audit` of the two files' bytes (None: the file is not there), with why the
    report cannot back them where it is missing or not JSON."""
    if report is None:
        return f"it has no {REPORT_FILE} to back its {FIGURES_FILE}"
    loaded = []
    for name, data in ((REPORT_FILE, report), (FIGURES_FILE, figures)):
        try:
            loaded.append(json.loads(data.decode("utf-8")))
        except (UnicodeDecodeError, ValueError, RecursionError) as err:
            return f"its {name} is not JSON ({str(err)[:200]})"
    return audit(*loaded)


def _first_case_difference(taken, expected):
    if len(taken) != len(expected):
        return f"it has {len(taken)} attempt(s), {REPORT_FILE} {len(expected)}"
    for attempt, want in zip(taken, expected):
        cases = attempt.get("testcases") if isinstance(attempt, dict) else None
        wanted = want.get("testcases") or []
        if not isinstance(cases, list) or len(cases) != len(wanted):
            return f"its test cases are not {REPORT_FILE}'s ({len(wanted)} there)"
        for case, right in zip(cases, wanted):
            if case != right:
                name = right.get("display_name") if isinstance(right, dict) else None
                fields = (
                    sorted(k for k in set(case) | set(right) if case.get(k) != right.get(k))
                    if isinstance(case, dict) and isinstance(right, dict)
                    else ["the case"]
                )
                return (
                    f"case {str(name)[:120]!r}: {', '.join(map(str, fields))[:200]} "
                    f"differ(s) from {REPORT_FILE}"
                )
    return f"its test cases differ from {REPORT_FILE}'s"
