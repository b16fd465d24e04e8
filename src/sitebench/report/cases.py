"""What the report needs of a run's test cases beyond its figures: thread and rank counts,
the concrete Spack spec and where the case's output was stored.

Read from the run's ``figures.json`` (or its ``report.json`` where it has none): the store
keeps figures, not these. A case is keyed
like a figure row (partition, environ, check, params), so the two join.
"""

from dataclasses import dataclass
from pathlib import Path

from sitebench.results.rundirs import case_folder, case_folder_problem


@dataclass
class Case:
    system: str
    partition: str
    environ: str
    check: str
    params: str
    result: str
    threads: int | None
    ranks: int | None
    concrete_spec: str
    output: Path | None  # where the run kept the case's files (output/ or failed-stage/)
    run_path: Path | None = None  # the run: read the case's files with results.runfiles
    #: Why the folder its report names was not used (outside the run, a link), or None.
    folder_problem: str | None = None

    def file(self, name):
        """The path of the case's file ``name`` inside its run, for ``results.runfiles``."""
        return None if self.output is None else self.output.relative_to(self.run_path) / name

    @property
    def key(self):
        return (self.partition, self.environ, self.check, self.params)


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _text(value):
    return value if isinstance(value, str) else ""


def _threads(case):
    # The checks set one of these per case; num_cpus_per_task is the scheduler's view.
    env = case.get("env_vars") or {}
    for name in ("OMP_NUM_THREADS", "PARSEC_CPU_NUM"):
        if _int(env.get(name)):
            return _int(env.get(name))
    return _int(case.get("num_cpus_per_task"))


def cases_of_run(run):
    """The test cases (not fixtures) of a loaded :class:`sitebench.results.rundirs.Run`.

    ReFrame re-runs failed cases in later attempts; the last attempt wins, as in the figures.
    """
    latest = {}
    for attempt in run.report.get("runs", []):
        for case in attempt.get("testcases", []):
            if case.get("fixture"):
                continue
            name = case.get("unique_name") or case.get("display_name")
            key = (name, case.get("partition"), case.get("environ"))
            latest[tuple(k if isinstance(k, (str, type(None))) else repr(k) for k in key)] = case
    found = []
    for case in latest.values():
        label = case.get("display_name") or case.get("name")
        check, _, params = (label if isinstance(label, str) else "").partition(" ")
        found.append(
            Case(
                system=case.get("system"),
                partition=case.get("partition"),
                environ=case.get("environ"),
                check=check,
                params=params,
                result=case.get("result"),
                threads=_threads(case),
                ranks=_int(case.get("num_tasks")),
                concrete_spec=_text(case.get("concrete_spec")),
                output=case_folder(run.path, case),
                run_path=run.path,
                folder_problem=case_folder_problem(run.path, case),
            )
        )
    return found
