"""The suite run, stored, summarized and judged against history, as ``./sitebench run``
does it; ``run`` and ``nightly run`` both call :func:`run_once`."""

from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError


@dataclass
class Outcome:
    run_dir: Path
    code: int  # ReFrame's exit code, or 128 + the signal that interrupted the run
    summary: str
    drift: str
    worse: int  # figures that drifted worse than the site's history
    #: The cases other work disturbed, "name (cores)": left out of the drift check.
    disturbed: list = field(default_factory=list)


def judge_drift(run_dir, warn=None):
    """(the drift of the stored run against its site's history as text, how many figures
    drifted worse); never fails the run."""
    from sitebench.results import regress

    try:
        site, run = run_dir.parent.name, run_dir.name
        _, earlier, df = regress.check_site(site, run, warn=warn)
        return regress.render(site, run, earlier, df), int((df["drift"] == "worse").sum())
    except SitebenchError as err:
        return f"drift from history: not judged ({err})", 0


def run_once(site, scale="quick", reframe_args=(), warn=None):
    """Build, run and store the suite on ``site``; print the stored run, its summary and its
    drift; return the :class:`Outcome`."""
    from sitebench.results import record, summary
    from sitebench.results.rundirs import load_run

    run_dir, code = record.run_and_store(site, scale, reframe_args)
    print("\n==> stored " + paths.shown(run_dir))
    text = summary.summarize(run_dir)
    print(text)
    drift, worse = judge_drift(run_dir, warn)
    print(drift)
    disturbed = summary.disturbed_cases(load_run(run_dir))
    return Outcome(Path(run_dir), code, text, drift, worse, disturbed)
