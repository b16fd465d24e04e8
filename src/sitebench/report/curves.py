"""Ping-pong curves: latency and bandwidth per message size, from the stored OSU outputs.

The figures keep only a few points of each curve (smallest, largest, peak); the whole curve
is in the case's ``rfm_job.out``, read with the same parser the checks use.
"""

from sitebench.parsers import ParseError, osu

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


def curve_rows(case):
    """Rows (size, value, unit, kind, mapping, transport, ...) of one OSU case's curve;
    [] when its output is missing or does not parse (a failed run keeps no curve)."""
    if case.check not in CHECKS or case.output is None:
        return []
    try:
        result = osu.parse((case.output / "rfm_job.out").read_text(errors="replace"))
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
