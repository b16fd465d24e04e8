"""Gadget-2 input: the run's parameter file, made from a shipped (or a site's) one.

A Gadget-2 parameter file is one ``Tag value`` pair a line; ``%`` starts a comment and every
tag must appear exactly once (begrun.c, read_parameter_file). The run's copy changes only
the tags named here: the files it reads become absolute paths, its outputs go to the run's
directory, and the scale may end it earlier (``TimeMax``).
"""

import os
import re
from dataclasses import dataclass, field

#: Tags whose values are files the run reads; relative paths are resolved against the
#: directory the parameter file's paths are written for (the shipped ones: Gadget2/).
INPUT_TAGS = ("InitCondFile", "OutputListFilename")

#: Tags whose values are file names (allvars.h: char[MAXLEN_FILENAME]).
FILE_TAGS = INPUT_TAGS + (
    "OutputDir",
    "SnapshotFileBase",
    "EnergyFile",
    "CpuFile",
    "InfoFile",
    "TimingsFile",
    "RestartFile",
    "ResubmitCommand",
)
MAXLEN_FILENAME = 100

_LINE = re.compile(r"^(\s*)([A-Za-z]\w*)(\s+)(\S+)(.*)$")


def read_params(text):
    """Tag -> value (the first word after the tag) of a parameter file's text."""
    params = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and not line.lstrip().startswith("%"):
            params[match.group(2)] = match.group(4)
    return params


def write_params(text, changes):
    """``text`` with the values of the tags in ``changes`` replaced, everything else kept.

    A tag the file lacks is an error: Gadget-2 takes no tag twice and needs every one."""
    missing = sorted(set(changes) - set(read_params(text)))
    if missing:
        raise ValueError(f"the parameter file has no {', '.join(missing)}")
    lines = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match and not line.lstrip().startswith("%") and match.group(2) in changes:
            head, tag, gap, _, rest = match.groups()
            line = f"{head}{tag}{gap}{changes[tag]}{rest}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def ic_files(path):
    """The initial-conditions files Gadget-2 reads for ``path``: the file itself, or its
    parts ``path.0``, ``path.1``, ... (read_ic.c); empty when neither exists."""
    if os.path.isfile(path):
        return [path]
    parts = []
    while os.path.isfile(f"{path}.{len(parts)}"):
        parts.append(f"{path}.{len(parts)}")
    return parts


@dataclass
class RunInput:
    """A run's parameter file and the links its run directory needs."""

    text: str  # the parameter file of the run
    params: dict  # its tag values
    sources: dict  # input tag -> the file it stands for (absolute)
    links: dict = field(default_factory=dict)  # name in the run directory -> file


def run_params(text, input_dir, output_dir="output", time_max=None):
    """The run's parameter file: inputs linked into the run directory under their base
    names (Gadget-2 keeps file names in MAXLEN_FILENAME = 100 characters, and a Spack
    prefix is longer), OutputDir the run's, TimeMax the given one (None: the file's)."""
    params = read_params(text)
    changes = {"OutputDir": output_dir.rstrip("/") + "/"}
    sources, links = {}, {}
    for tag in INPUT_TAGS:
        if tag in params:
            source = os.path.join(input_dir, params[tag])
            sources[tag] = source
            changes[tag] = os.path.basename(source)
            parts = ic_files(source) if tag == "InitCondFile" else [source]
            links.update({os.path.basename(p): p for p in parts if os.path.isfile(p)})
    if time_max is not None:
        changes["TimeMax"] = repr(float(time_max))
    new = write_params(text, changes)
    return RunInput(new, read_params(new), sources, links)


def refusal(run, ranks):
    """Why Gadget-2 would refuse ``run`` (a RunInput) on ``ranks`` before its first step, or
    None. Gadget-2 ends such runs with exit status 0 (endrun(0)), so the check says it first."""
    params = run.params
    ic = run.sources.get("InitCondFile", "")
    if not ic_files(ic):
        return f"initial conditions {ic} not found (nor {ic}.0): check InitCondFile"
    listed = run.sources.get("OutputListFilename", "")
    if params.get("OutputListOn", "0") != "0" and not os.path.isfile(listed):
        return f"output list {listed} not found: check OutputListFilename"
    long = [t for t, v in params.items() if t in FILE_TAGS and len(v) >= MAXLEN_FILENAME]
    if long:
        return f"{', '.join(long)}: Gadget-2 keeps file names under {MAXLEN_FILENAME} characters"
    for tag, said in (
        ("NumFilesWrittenInParallel", "MUST be smaller than number of processors', begrun.c"),
        ("NumFilesPerSnapshot", "Number of processors must be larger or equal', io.c"),
    ):
        if int(params.get(tag, "1")) > ranks:
            return f"Gadget-2 refuses {tag}={params[tag]} on {ranks} rank(s) ('{said})"
    if float(params.get("TimeMax", "0")) <= float(params.get("TimeBegin", "0")):
        return f"TimeMax {params.get('TimeMax')} is not after TimeBegin {params.get('TimeBegin')}"
    return None
