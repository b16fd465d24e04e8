"""Taking the samples around a run and turning the stage's files into joules and watts.

RAPL and IPMI: ``sampler.sh`` (copied into the stage) takes one sample before
the benchmark, one every ``interval_s`` in the background, and one after, all
appended to ``energy-samples.txt`` in the stage. They see the node that runs
the job script, so they measure single-node runs.

Slurm: after the job, ``sacct`` is asked for the job's ``ConsumedEnergyRaw``
and ``ElapsedRaw`` (the whole allocation, every node, from start to end), its
answers kept in ``energy-sacct.txt``.
"""

import os
import shlex
import shutil
import subprocess
import time

from . import EnergyError, readers

SAMPLER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sampler.sh")
SAMPLER_COPY = "energy-sampler.sh"
SAMPLES_FILE = "energy-samples.txt"
SACCT_FILE = "energy-sacct.txt"

# The loop's pid lives in a shell variable of the job script, from prerun to postrun.
_PID = "sitebench_power_sampler"


def _sample_args(config):
    if config.source == "rapl":
        return ["rapl", config.sysfs_root]
    return ["ipmi", *config.command]


def sampler_commands(config, stagedir):
    """(prerun, postrun) commands that sample around the run; none for Slurm."""
    if config.source == "slurm":
        return [], []
    shutil.copy(SAMPLER, os.path.join(stagedir, SAMPLER_COPY))
    args = " ".join(shlex.quote(a) for a in _sample_args(config))
    sample = f"sh {SAMPLER_COPY} sample {args} >> {SAMPLES_FILE}"
    prerun = [
        f": > {SAMPLES_FILE}",
        sample,
        f"sh {SAMPLER_COPY} loop {config.interval_s:g} {args} >> {SAMPLES_FILE} &",
        f"{_PID}=$!",
    ]
    # The benchmark's exit status passes through, for the checks' own postrun commands
    # (parsec reads $?) and for the job's exit code.
    postrun = [
        f"{_PID}_status=$?",
        f'kill "${_PID}" 2>/dev/null',
        f'wait "${_PID}" 2>/dev/null',
        sample,
        f"(exit ${_PID}_status)",
    ]
    return prerun, postrun


def read_samples(config, stagedir):
    """Energy of the run from the sampler's file in ``stagedir``."""
    path = os.path.join(stagedir, SAMPLES_FILE)
    try:
        with open(path) as fp:
            text = fp.read()
    except FileNotFoundError:
        raise EnergyError(f"{path} is missing: the sampler did not run") from None
    samples = readers.parse_samples(text, path)
    if config.source == "rapl":
        return readers.rapl_energy(samples, config.sysfs_root, config.zones)
    return readers.ipmi_energy(samples)


def sacct_command(config, jobid):
    return [
        *config.command,
        "-j",
        str(jobid),
        "-X",
        "-n",
        "-P",
        "-o",
        "JobID,ConsumedEnergyRaw,ElapsedRaw",
    ]


def read_sacct(config, jobid, stagedir, poll_s=2.0):
    """Energy of job ``jobid`` from sacct, asked again until ``config.wait_s``.

    slurmdbd stores a finished job's energy a little after the job ends, so an
    empty or zero answer is asked again; the last error is raised.
    """
    if not jobid:
        raise EnergyError("the job has no id: Slurm energy needs a job run by Slurm")
    command = sacct_command(config, jobid)
    deadline = time.monotonic() + config.wait_s
    with open(os.path.join(stagedir, SACCT_FILE), "w") as log:
        while True:
            try:
                proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as err:
                raise EnergyError(f"cannot run {shlex.join(command)}: {err}") from None
            log.write(f"$ {shlex.join(command)}\n{proc.stdout}{proc.stderr}")
            if proc.returncode != 0:
                raise EnergyError(
                    f"{shlex.join(command)} failed (exit {proc.returncode}): "
                    f"{proc.stderr.strip()[:300]}"
                )
            try:
                return readers.sacct_energy(proc.stdout, jobid)
            except EnergyError:
                if time.monotonic() >= deadline:
                    raise
            time.sleep(poll_s)


def measure(config, stagedir, jobid):
    """The run's :class:`~sitebench.run.energy.readers.Energy` from ``config``'s source."""
    if config.source == "slurm":
        return read_sacct(config, jobid, stagedir)
    return read_samples(config, stagedir)
