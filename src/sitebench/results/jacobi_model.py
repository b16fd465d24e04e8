"""The seed report's performance model of the 3D Jacobi solver, from the site's own ping-pong.

Derivation (also in reframe-checks/README.md, "Jacobi against its model"). One Jacobi
iteration on N processes is a computation on the process's share of the grid followed by
(or, without overlap, added to) a halo exchange with its k face neighbours:

* computation: with P1 the single-process rate (MLUP/s, measured by the N = 1 run of the
  same grid) and U the lattice updates of one iteration (the grid's points), a perfect split
  takes T_comp = U / (N * P1 * 1e6) seconds;
* communication: each of the k messages pays the latency once, and the C MB the process
  sends stream at the ping-pong bandwidth: T_c = C / B + k * lambda, with lambda the OSU
  1-byte latency (s) and B the OSU peak bandwidth (MB/s) measured by the same site with the
  same mapping and transport (the nearest earlier run);
* estimated rate: MLUP/s est = U / (T_comp + T_c) / 1e6; difference = (real - est) / est.

The seed's row (THIN node, core mapping): lambda = 0.22 us, B = 6450.36 MB/s, N = 4, k = 4,
C = 92.16 MB gives T_c = 92.16 / 6450.36 + 4 * 0.22e-6 = 0.0143 s.

k and C are the largest over the ranks (the slowest rank sets the pace), as jacobi3d prints
them.
"""

import json
from dataclasses import dataclass

import pandas as pd

from sitebench.common.errors import SitebenchError

JACOBI = "JacobiCheck"
LATENCY = ("OsuLatencyCheck", "latency_small")  # us at 1 B
BANDWIDTH = ("OsuBandwidthCheck", "bandwidth_peak")  # MB/s

#: The columns of the seed's table, in order, and :func:`model_table`'s extras.
TABLE_COLUMNS = ["N", "k", "C[MB]", "Tc/s", "MLUP/s est", "MLUP/s real", "diff"]


class NoOsuFigures(SitebenchError):
    """The site has no OSU ping-pong figures to build the model from."""


def comm_time(c_mb, k, latency_s, bandwidth_mbs):
    """T_c = C/B + k*lambda (s): C in MB, lambda in s, B in MB/s."""
    if bandwidth_mbs <= 0:
        raise ValueError(f"bandwidth must be positive, not {bandwidth_mbs} MB/s")
    return c_mb / bandwidth_mbs + k * latency_s


def estimated_mlups(single_mlups, updates, n, c_mb, k, latency_s, bandwidth_mbs):
    """MLUP/s of N processes predicted from the single-process rate and T_c."""
    t_comp = updates / (n * single_mlups * 1e6)
    return updates / (t_comp + comm_time(c_mb, k, latency_s, bandwidth_mbs)) / 1e6


@dataclass
class PingPong:
    run: str  # the OSU run the figures come from
    latency_s: float
    bandwidth_mbs: float


def _vars(frame):
    return [json.loads(v) if isinstance(v, str) else {} for v in frame["case_vars"]]


def _osu_rows(figures, site, check, figure, mapping, transport):
    rows = figures[
        (figures["site"] == site) & (figures["check"] == check) & (figures["figure"] == figure)
    ]
    keep = [v.get("mapping") == mapping and v.get("transport") == transport for v in _vars(rows)]
    return rows[pd.Series(keep, index=rows.index, dtype=bool)] if len(rows) else rows


def pingpong(figures, site, mapping, transport, before):
    """lambda and B of ``site`` for ``mapping``/``transport`` from the nearest run that
    started no later than ``before`` and has both figures; :class:`NoOsuFigures` says which
    run to make when there is none."""
    lat = _osu_rows(figures, site, *LATENCY, mapping, transport)
    bw = _osu_rows(figures, site, *BANDWIDTH, mapping, transport)
    both = lat.merge(bw, on=["site", "run", "started"], suffixes=("_lat", "_bw"))
    both = both[pd.to_datetime(both["started"], utc=True) <= pd.to_datetime(before, utc=True)]
    if both.empty:
        raise NoOsuFigures(
            f"no OSU ping-pong figures of site {site} for mapping {mapping}, transport "
            f"{transport} from before {before}, so the Jacobi model has no latency and "
            f"bandwidth: run them first, e.g. ./sitebench run (the quick suite holds them) or "
            f"reframe -C site-configs/{site}/reframe.py -c reframe-checks/osu.py -n "
            f"'OsuLatencyCheck|OsuBandwidthCheck' -r"
        )
    best = both.sort_values("started").iloc[-1]
    return PingPong(best["run"], best["value_lat"] * 1e-6, best["value_bw"])


def model_table(figures):
    """The seed's table for every Jacobi case in ``figures`` (the store's figure rows):
    one row per site, run, scale, mapping and N, with :data:`TABLE_COLUMNS` plus site, run,
    mapping, transport, scale, osu_run and ``missing`` (why a row has no estimate)."""
    jac = figures[figures["check"] == JACOBI]
    out = []
    if jac.empty:
        return pd.DataFrame(
            columns=["site", "run", "scale", "mapping", "transport", *TABLE_COLUMNS]
        )
    wide = jac.pivot_table(
        index=["site", "run", "started", "case_vars"], columns="figure", values="value"
    ).reset_index()
    wide["vars"] = _vars(wide)
    for key in ("scale", "mapping", "transport", "num_ranks"):
        wide[key] = [v.get(key) for v in wide["vars"]]
    wide["num_ranks"] = wide["num_ranks"].astype(int)
    for (site, run, scale), group in wide.groupby(["site", "run", "scale"]):
        single = group[group["num_ranks"] == 1]
        for _, row in group.sort_values(["mapping", "num_ranks"]).iterrows():
            entry = {
                "site": site,
                "run": run,
                "scale": scale,
                "mapping": row["mapping"],
                "transport": row["transport"],
                "N": row["num_ranks"],
                "k": int(row["neighbours"]),
                "C[MB]": row["halo_mb"],
                "Tc/s": None,
                "MLUP/s est": None,
                "MLUP/s real": row["mlups"],
                "diff": None,
                "osu_run": None,
                "missing": None,
            }
            out.append(entry)
            if row["num_ranks"] == 1:
                entry.update({"Tc/s": 0.0, "MLUP/s est": row["mlups"], "diff": 0.0})
                continue
            if single.empty:
                entry["missing"] = f"run {run} has no 1-rank Jacobi case at scale {scale}"
                continue
            try:
                pp = pingpong(figures, site, row["mapping"], row["transport"], row["started"])
            except NoOsuFigures as err:
                entry["missing"] = str(err)
                continue
            updates = row["mlups"] * 1e6 * row["time_per_iteration"]
            est = estimated_mlups(
                single["mlups"].median(),
                updates,
                row["num_ranks"],
                row["halo_mb"],
                row["neighbours"],
                pp.latency_s,
                pp.bandwidth_mbs,
            )
            entry.update(
                {
                    "Tc/s": comm_time(
                        row["halo_mb"], row["neighbours"], pp.latency_s, pp.bandwidth_mbs
                    ),
                    "MLUP/s est": est,
                    "diff": (row["mlups"] - est) / est,
                    "osu_run": pp.run,
                }
            )
    return pd.DataFrame(out)
