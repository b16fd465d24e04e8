"""Runs with two toolchains, made from a committed run of results/local/.

A site's toolchains run as ReFrame programming environments named after them (``gcc-mpich``,
``gcc-openmpi``); committed runs older than toolchains have the one environment ``gnu``. A
copy of such a run in which every case ran once per toolchain is what a two-toolchain run
looks like to the store and the report: each test case of ReFrame's report
(``runs[].testcases[]``) once per toolchain with its ``environ`` and output folder renamed,
its output folder (``output/<system>/<partition>/<environ>/<test>/``, where the OSU curves
are read) copied per toolchain, and each perflog line once per toolchain with its ``environ``
column renamed. The figure values of a toolchain (and its OSU curves) are the real run's
times a factor.
"""

import json
import shutil
from pathlib import Path

from conftest import ROOT

RESULTS = ROOT / "results"
#: The checks whose report sections draw a series per toolchain.
MPI_CHECKS = {"OsuLatencyCheck", "OsuBandwidthCheck", "HplCheck", "NpbCheck"}
TOOLCHAINS = ("gcc-mpich", "gcc-openmpi")


def _cases(report):
    return [case for attempt in report.get("runs", []) for case in attempt.get("testcases", [])]


def _checks(report):
    return {(c.get("display_name") or c.get("name") or "").split(" ")[0] for c in _cases(report)}


def _environs(report):
    return {c.get("environ") for c in _cases(report) if not c.get("fixture")}


def source_run():
    """The newest committed run of results/local/ with one environment and OSU, HPL and NPB
    cases, or None."""
    for path in sorted((RESULTS / "local").glob("*/report.json"), reverse=True):
        report = json.loads(path.read_text())
        if len(_environs(report)) == 1 and MPI_CHECKS <= _checks(report):
            return path.parent
    return None


def real_two_toolchain_runs(site="local"):
    """Committed runs of ``site`` whose cases ran in more than one environment."""
    found = []
    for path in sorted((RESULTS / site).glob("*/report.json")):
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if len(_environs(report) - {None}) > 1:
            found.append(path.parent)
    return found


def _renamed(path, environ):
    """``…/output/<system>/<partition>/<environ>/<test>`` with the environment renamed."""
    parts = list(Path(path).parts)
    if len(parts) >= 4:
        parts[-2] = environ
    return str(Path(*parts))


def _scaled(entry, factor):
    entry = list(entry)
    if isinstance(entry[0], (int, float)):
        entry[0] *= factor
    return entry


def two_toolchain_run(source, site_dir, name, factors, started=None, site=None):
    """Copy run ``source`` to ``site_dir/name``, every case run once per toolchain of
    ``factors`` ({toolchain: factor of its figure values}); return the new run's path."""
    dest = Path(site_dir) / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("output"))
    report = json.loads((source / "report.json").read_text())
    for attempt in report.get("runs", []):
        cases = attempt.get("testcases", [])
        attempt["testcases"] = []
        for environ, factor in factors.items():
            for case in json.loads(json.dumps(cases)):
                old = case.get("environ")
                case["environ"] = environ
                for key in ("outputdir", "stagedir"):
                    if case.get(key):
                        case[key] = _renamed(case[key], environ)
                for key in ("name", "display_name"):  # fixtures: "OsuBuild ~local:default+gnu"
                    if isinstance(case.get(key), str) and old:
                        case[key] = case[key].replace(f"+{old}", f"+{environ}")
                values = case.get("perfvalues") or {}
                for key, entry in values.items():
                    values[key] = _scaled(entry, factor)
                attempt["testcases"].append(case)
    if started:
        report.setdefault("session_info", {})["time_start"] = started
    (dest / "report.json").write_text(json.dumps(report))
    # The case folders: output/<system>/<partition>/<environ>/ once per toolchain.
    for env_dir in sorted((source / "output").glob("*/*/*")):
        for environ, factor in factors.items():
            target = dest / env_dir.relative_to(source).parent / environ
            shutil.copytree(env_dir, target)
            for out in target.glob("Osu*Check_*/rfm_job.out"):
                out.write_text(_osu_curve(out.read_text(errors="replace"), factor))
    for log in sorted((dest / "perflogs").rglob("*.log")):
        log.write_text(_perflog(log.read_text(), factors))
    if site:
        prov_path = dest / "provenance" / "provenance.json"
        prov = json.loads(prov_path.read_text())
        prov["site"] = site
        prov_path.write_text(json.dumps(prov))
    return dest


def _osu_curve(text, factor):
    """An OSU output (``<size> <value>`` lines under ``#`` comments), its values scaled."""
    lines = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit():
            try:
                line = f"{fields[0]:<10}{float(fields[1]) * factor:>18.6g}"
            except ValueError:
                pass
        lines.append(line)
    return "\n".join(lines) + "\n"


def _perflog(text, factors):
    """Each line once per toolchain: its ``environ`` renamed, its ``*_value`` scaled."""
    out, header = [], None
    for line in text.splitlines():
        fields = line.split("|")
        if "environ" in fields:
            header = fields
            out.append(line)
            continue
        if header is None or len(fields) != len(header):
            out.append(line)
            continue
        for environ, factor in factors.items():
            row = list(fields)
            for i, column in enumerate(header):
                if column == "environ":
                    row[i] = environ
                elif column.endswith("_value"):
                    try:
                        row[i] = repr(float(row[i]) * factor)
                    except ValueError:
                        pass
            out.append("|".join(row))
    return "\n".join(out) + "\n"
