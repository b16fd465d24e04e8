"""A run of the suite, recorded: the run stage's ReFrame session becomes a new run under
``results/<site>/`` with its provenance, atomically (:class:`~.rundirs.Incoming`).

An interrupted run (Ctrl-C, SIGTERM, SIGHUP) is stored with what completed, marked
``"partial": true`` in its provenance; a failed write leaves no visible run.
"""

import json
import shutil
import signal
import sys
from functools import partial
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.results import figures_file
from sitebench.results.rundirs import Incoming, copy_into, keep_case_files, report_cases
from sitebench.run import count_settings, provenance, runner


def store(incoming, work, report, write_provenance):
    """ReFrame's output, the figures of its report and the provenance into the run, then
    the run committed.

    A write that fails (a full disk) leaves no visible run: the assembly stays hidden and
    marked, and the error says what to free; ReFrame's own output stays in ``work``.
    """
    try:
        copy_into(work / "perflogs", incoming.path / "perflogs")
        copy_into(work / "output", incoming.path / "output")
        # One folder per case, whatever became of it: the stages ReFrame kept (failed
        # cases, fixtures it never cleaned up) go into their case's folder.
        keep_case_files(report, incoming.path)
        # What every other site takes of the run, inside it: its signed commit covers it.
        figures_file.write(incoming.path)
        write_provenance(incoming.path / "provenance")
        return incoming.commit()
    except OSError as err:
        raise incoming.failed(err, kept=work) from err


def run_and_store(site, scale="quick", reframe_args=()):
    """Run the suite on ``site`` (a :class:`~sitebench.sites.site.Site`) at ``scale`` and
    store it; return (run directory, ReFrame exit code, 128 + signal if interrupted)."""
    runner.check_scale(scale)
    count_settings.check(reframe_args)
    prepared = runner.prepare(site)
    cluster = runner.slurm_cluster(site)
    incoming = Incoming(site.name)
    work = paths.state_dir() / "reframe-runs" / incoming.name
    work.mkdir(parents=True)
    report = incoming.path / "report.json"
    session = runner.run_suite(site, prepared, scale, work, report, reframe_args, cluster)
    code, interrupted = session.code, session.interrupted
    if interrupted and not report.is_file():
        # Stopped before ReFrame wrote anything: kept all the same, with an empty report.
        note = f"sitebench: ReFrame was interrupted ({interrupted}) before it wrote its report"
        report.write_text(json.dumps({"session_info": {"note": note}, "runs": []}) + "\n")
    if not report.is_file():
        # E.g. no check selected (-n nomatch): the empty assembly goes, nothing was stored.
        incoming.discard(f"ReFrame exited with {code} and wrote no report")
        if code == 0:  # ReFrame writes no report when its options select no test
            raise SitebenchError(
                "ReFrame selected no test case and wrote no report; nothing was stored",
                "check the options given to ReFrame after `--` (-n, -x, -t select checks "
                "by name and tag)",
            )
        raise SitebenchError(
            f"ReFrame exited with {code} and wrote no report; nothing was stored "
            f"(its output is kept in {work})",
            "read ReFrame's message above",
        )
    if code == 0 and not interrupted and not report_cases(report):
        # ReFrame skips checks it cannot load (e.g. a bad reference) and still exits 0.
        print(
            "sitebench: error: ReFrame ran no test case; see its warnings above", file=sys.stderr
        )
        code = 1
    write_provenance = partial(
        provenance.collect,
        site=site,
        spack=prepared.spack,
        spack_version=prepared.version,
        builtin_repo=prepared.builtin,
        env_dir=prepared.env_dir,
        topology=runner.site_topology(site),
        command=session.command,
        started=session.started,
        finished=session.finished,
        reframe_exit=code,
        scheduler=cluster,
        # ReFrame's own report times its session only, not its start-up and wind-down.
        extra={
            "reframe_process": {
                "launched_unix": session.launched,
                "exited_unix": session.exited,
            }
        }
        | ({"partial": True, "interrupted": interrupted} if interrupted else {}),
    )
    final = store(incoming, work, report, write_provenance)
    shutil.rmtree(work, ignore_errors=True)  # stage dirs; everything kept is in the run
    if interrupted:
        print(
            f"sitebench: interrupted ({interrupted}); the partial run is stored in {final}",
            file=sys.stderr,
        )
        return Path(final), 128 + signal.Signals[interrupted].value
    return Path(final), code
