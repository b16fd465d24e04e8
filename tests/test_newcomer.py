"""A newcomer's first run: a fresh clone on another machine passes on its own.

The other machine is played by the test hook of sitebench/sites/host.py
(``SITEBENCH_TEST_HOST_FINGERPRINT``: fields replacing the detected fingerprint's), with the
committed runs of ``local`` copied in as a fresh clone has them. Subset: STREAM and HPL
(``-n StreamCheck -n HplCheck``), built already by test_loop.py's run in the same Spack store.
"""

import json
import shutil

import pytest

from conftest import ROOT, sitebench
from sitebench.results import regress, summary
from sitebench.sites import host

NEWCOMER = {"cpu_model": "Newcomer CPU (test)", "memory_gib": 7}


def test_the_hook_plays_another_host(monkeypatch):
    here = host.detect()
    monkeypatch.setenv(host.TEST_HOOK, json.dumps(NEWCOMER))
    other = host.detect()
    assert other["cpu_model"] == NEWCOMER["cpu_model"] and other["cores"] == here["cores"]
    assert other["id"] != here["id"]


@pytest.mark.reliability_input
@pytest.mark.parametrize("text", ["{not json", '{"hostname": "x"}', "[1]"])
def test_a_bad_test_hook_is_refused(monkeypatch, text):
    monkeypatch.setenv(host.TEST_HOOK, text)
    with pytest.raises(host.SitebenchError, match=host.TEST_HOOK):
        host.detect()


@pytest.mark.spack
@pytest.mark.slow
def test_a_newcomers_first_run_passes_and_says_why(results_root, spack):
    committed = ROOT / "results" / "local"
    shutil.copytree(committed, results_root / "local")
    # HPL at a small N: what is under test is what the run says, not its figure (at the
    # memory-sized N in both toolchains the test took 154 s).
    proc = sitebench(
        "run", "--", "-n", "StreamCheck", "-n", "HplCheck", "-S", "HplCheck.n=2048",
        env={host.TEST_HOOK: json.dumps(NEWCOMER)},
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    new = sorted(
        p for p in (results_root / "local").iterdir() if not (committed / p.name).exists()
    )
    assert len(new) == 1, new
    prov = json.loads((new[0] / "provenance/provenance.json").read_text())
    assert prov["host_fingerprint"]["cpu_model"] == NEWCOMER["cpu_model"]
    assert prov["references_made_on"]["id"] != prov["host_fingerprint"]["id"]
    # One line says why no reference applied and how to make this machine's.
    lines = [line for line in proc.stdout.splitlines() if "no static reference applied" in line]
    assert len(lines) == 1 and "./sitebench references local --write" in lines[0], out[-4000:]
    # No history of this host: the committed runs are another machine's.
    assert "0 earlier run(s) of local of this host" in proc.stdout
    assert "against its 0 earlier run(s) of the same host" in proc.stdout
    report = json.loads((new[0] / "report.json").read_text())
    measured = [c for r in report["runs"] for c in r["testcases"] if c.get("perfvalues")]
    assert {c["name"].split()[0] for c in measured} == {"StreamCheck", "HplCheck"}
    for case in measured:
        assert case["result"] == "pass", case
        assert case["host_fingerprint"] == prov["host_fingerprint"]["id"]
        for value, ref, *_ in case["perfvalues"].values():
            assert value > 0 and not ref  # logged, no reference
    # The same, read back from the store as later commands see it.
    assert "no static reference applied" in summary.summarize(new[0], results_root)
    _, earlier, _ = regress.check_site("local", new[0].name, results_root=results_root)
    assert earlier == []
