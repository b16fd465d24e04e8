"""Ping-pong curves: latency and bandwidth per message size, from the stored OSU outputs.

The figures keep only a few points of each curve (smallest, largest, peak); the whole curve
is in the case's ``rfm_job.out``, read with the same parser the checks use.
"""

from sitebench.parsers import ParseError, osu
from sitebench.results import runfiles

#: The OSU checks and the figure each one's curve is.
CHECKS = {"OsuLatencyCheck": "latency", "OsuBandwidthCheck": "bandwidth"}
CURVE_COLUMNS = [
    "partition",
    "environ",
    "check",
    "params",
    "kind",
    "mapping",
    "transport",
    "size",
    "value",
    "unit",
    "result",
]


def curve_rows(case, note=None):
    """Rows (size, value, unit, kind, mapping, transport, ...) of one OSU case's curve;
    [] when its output is missing or does not parse (a failed run keeps no curve). The
    output is read only as a plain file inside the run (:mod:`sitebench.results.runfiles`);
    one that is not (a link, a FIFO, too large) is left out and ``note``d."""
    if case.check not in CHECKS or case.output is None:
        return []
    try:
        result = osu.parse(runfiles.read_text(case.run_path, case.file("rfm_job.out")))
    except runfiles.MissingFile:
        return []
    except runfiles.UnsafeFile as err:
        if note:
            note(f"{err}; not read")
        return []
    except (OSError, ParseError):
        return []
    params = dict(p.split("=", 1) for p in case.params.replace("%", "").split() if "=" in p)
    return [
        {
            "partition": case.partition,
            "environ": case.environ,
            "check": case.check,
            "params": case.params,
            "kind": CHECKS[case.check],
            "mapping": str(params.get("mapping", "?")),
            "transport": str(params.get("transport", "?")),
            "size": size,
            "value": value,
            "unit": result.unit,
            "result": case.result,
        }
        for size, value in sorted(result.values.items())
    ]
