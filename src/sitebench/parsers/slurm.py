"""What Slurm says when it ends a job: its job state, or the line slurmstepd writes into
the job's error file (the only word a backend that cannot see finished jobs, ReFrame's
``squeue``, gets)::

    *** JOB 1 ON vm CANCELLED AT 2026-11-22T19:24:40 DUE TO TIME LIMIT ***
    *** JOB 1 ON sbnode1 CANCELLED AT ... DUE TO NODE FAILURE, SEE SLURMCTLD LOG ... ***
"""

import re

#: Job states in which the scheduler, not the program, ended the job.
ENDED = {
    "NODE_FAIL": "a node of the job failed (Slurm NODE_FAIL)",
    "TIMEOUT": "the job reached its time limit (Slurm TIMEOUT)",
    "BOOT_FAIL": "a node of the job failed to boot (Slurm BOOT_FAIL)",
    "DEADLINE": "the job reached its deadline (Slurm DEADLINE)",
    "OUT_OF_MEMORY": "the job ran out of memory (Slurm OUT_OF_MEMORY)",
    "PREEMPTED": "the job was preempted (Slurm PREEMPTED)",
    "CANCELLED": "the job was cancelled (Slurm CANCELLED)",
}

#: slurmstepd's "DUE TO ..." -> the job state it stands for.
_DUE_TO = {
    "TIME LIMIT": "TIMEOUT",
    "NODE FAILURE": "NODE_FAIL",
    "PREEMPTION": "PREEMPTED",
    "JOB REQUEUE": "CANCELLED",
}

_CANCELLED = re.compile(
    r"\*\*\* (?:JOB|STEP) (\S+) ON (\S+) CANCELLED AT (\S+)"
    r"(?: DUE TO ([A-Z ]+?))?(?:,[^*]*)? \*\*\*"
)


def state_word(state):
    """The state of a job (``CANCELLED by 0`` -> ``CANCELLED``); empty if none."""
    words = (state or "").split(",")[0].split()
    return words[0] if words else ""


def cancelled_in(stderr):
    """(state, job id, node) from slurmstepd's cancel line in ``stderr``; None without one."""
    match = _CANCELLED.search(stderr or "")
    if not match:
        return None
    jobid, node, _when, due = match.groups()
    return _DUE_TO.get(due or "", "CANCELLED"), jobid.split(".")[0], node


def verdict(state, jobid, nodes, stderr="", time_limit=None):
    """Why the scheduler ended a job, in a sentence with its id and nodes; None when the
    program ended on its own (or nothing says otherwise)."""
    word = state_word(state)
    if word not in ENDED:
        found = cancelled_in(stderr)
        if found is None:
            return None
        word, said_jobid, node = found
        jobid, nodes = jobid or said_jobid, nodes or [node]
    where = ", ".join(nodes or []) or "unknown nodes"
    limit = f"; time limit {time_limit}" if word == "TIMEOUT" and time_limit else ""
    return f"{ENDED[word]}: job {jobid} on {where}{limit}"
