"""The HPL tuner (issue 19): its search on a fake trial function, HPL.dat with every tuned
line, the site's hpl.yaml validated, the HPL check reading it, and one short real tuning."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, sitebench
from sitebench.common.errors import SitebenchError
from sitebench.run import hpl_tune
from sitebench.run.hpl_input import hpl_dat
from sitebench.sites import hpl_settings

# --- the search, on a deterministic fake ------------------------------------------------

#: The fake machine's best input: every factor away from it costs Gflop/s.
OPTIMUM = {"nb": 256, "grid": (1, 4), "depth": 0, "bcast": "2rM", "pfact": "crout"}


class FakeMachine:
    """Gflop/s as a function of the input; each trial takes 2 s of a fake clock."""

    def __init__(self, seconds=2.0, flukes=None):
        self.now = 0.0
        self.seconds = seconds
        self.calls = []
        self.flukes = dict(flukes or {})  # (key, value) -> Gflop/s of its first run only

    def clock(self):
        return self.now

    def gflops(self, settings):
        value = 100.0
        for key, best in OPTIMUM.items():
            if settings[key] != best:
                value -= 4.0 if key != "nb" else abs(settings["nb"] - best) / 16
        return value

    def trial(self, settings, timeout):
        self.now += self.seconds
        self.calls.append(dict(settings))
        for fluke in list(self.flukes):
            if settings[fluke[0]] == fluke[1]:
                return {"gflops": self.flukes.pop(fluke), "time_s": 1.0, "phases": {}}
        if settings["nb"] == 64:
            return {"gflops": None, "error": "residual check failed or test skipped"}
        return {"gflops": self.gflops(settings), "time_s": 1.0, "phases": {}}


def tune(machine, budget, **kwargs):
    return hpl_tune.search(
        machine.trial,
        hpl_tune.space(4, 2000),
        hpl_tune.baseline(4),
        budget,
        clock=machine.clock,
        log=lambda line: None,
        **kwargs,
    )


def test_search_finds_the_optimum_and_keeps_every_trial():
    machine = FakeMachine()
    result = tune(machine, budget=1000)
    assert result["stopped"] == "converged"
    expected = hpl_tune.as_file_settings({**hpl_tune.baseline(4), **OPTIMUM})
    assert result["best"] == expected
    assert result["best_gflops"] == 100.0 and result["baseline_gflops"] < 100.0
    # Every trial kept, numbered, in the order run, phases in the method's order.
    assert len(result["trials"]) == len(machine.calls)
    assert [t["number"] for t in result["trials"]] == list(range(1, len(machine.calls) + 1))
    phases = [t["phase"] for t in result["trials"]]
    assert phases[0] == "baseline"
    order = ["baseline", "one-factor", "local", "confirm-best", "confirm-baseline"]
    ranks = [min(order.index(p), 3) for p in phases if p != "recheck"]
    assert ranks == sorted(ranks)
    # NB=64 failed its residual check: kept as failed, never chosen.
    failed = [t for t in result["trials"] if t["gflops"] is None]
    assert failed and all(t["settings"]["nb"] == 64 and t["error"] for t in failed)
    # Before the confirmation no input is run twice except to recheck an adoption.
    searched = [
        json.dumps(t["settings"], sort_keys=True)
        for t in result["trials"]
        if t["phase"] in ("baseline", "one-factor", "local")
    ]
    assert len(searched) == len(set(searched))
    # Every factor of HPL.dat was tried away from its default.
    tried = {
        k
        for t in result["trials"]
        for k, v in t["settings"].items()
        if k in hpl_settings.DEFAULTS and v != hpl_settings.DEFAULTS[k]
    }
    assert tried == set(hpl_settings.DEFAULTS)


def test_search_is_deterministic():
    first, second = tune(FakeMachine(), 1000), tune(FakeMachine(), 1000)
    assert first == second


def test_budget_is_kept_with_the_confirmation_reserved():
    machine = FakeMachine()
    result = tune(machine, budget=40, confirm=2)
    assert result["stopped"] == "budget"
    assert result["seconds"] <= 40
    confirm = [t for t in result["trials"] if t["phase"].startswith("confirm")]
    assert len(confirm) == 4  # best and baseline, twice each
    assert result["best"]["nb"] == 256  # NB is searched first


def test_a_lucky_run_is_not_adopted():
    # The first run with bcast=Lng beats everything; its recheck does not.
    machine = FakeMachine(flukes={("bcast", "Lng"): 500.0})
    result = tune(machine, budget=1000)
    assert result["best"]["bcast"] == "2rM"
    rechecks = [
        t for t in result["trials"] if t["phase"] == "recheck" and t["settings"]["bcast"] == "Lng"
    ]
    assert len(rechecks) == 1  # remembered at its lower run: the local search does not rerun it


def test_a_best_within_noise_keeps_hpls_recommended_input():
    class Flat(FakeMachine):
        def gflops(self, settings):
            return 100.0

    base = hpl_tune.describe(hpl_tune.baseline(4))
    machine = Flat(flukes={})
    result = tune(machine, budget=1000)
    assert result["best"] == hpl_tune.as_file_settings(hpl_tune.baseline(4)), base


def test_loss_against_dgemm_sums_to_the_lost_time():
    phases = {"rfact": 0.5, "pfact": 0.3, "mxswp": 0.1, "update": 8.0, "laswp": 0.4, "uptrsv": 0.1}
    n, dgemm = 10000, 100.0
    ideal = hpl_tune.hpl_flops(n) / 1e11
    loss = hpl_tune.loss_against_dgemm(n, 9.0, phases, dgemm)
    assert loss["dgemm_time_s"] == pytest.approx(ideal)
    assert sum(loss["parts"].values()) == pytest.approx(9.0 - ideal)
    assert loss["ratio"] == pytest.approx(ideal / 9.0)
    assert loss["largest"] in loss["parts"]
    assert hpl_tune.loss_against_dgemm(n, 9.0, {}, dgemm) is None


# --- HPL.dat ----------------------------------------------------------------------------

#: HPL 2.3's documented input (its TUNING file): line number -> (setting, its label).
HPL_LINES = {
    6: ("n", "Ns"),
    8: ("nb", "NBs"),
    9: ("pmap", "PMAP"),
    11: ("p", "Ps"),
    12: ("q", "Qs"),
    15: ("pfact", "PFACTs"),
    17: ("nbmin", "NBMINs"),
    19: ("ndiv", "NDIVs"),
    21: ("rfact", "RFACTs"),
    23: ("bcast", "BCASTs"),
    25: ("depth", "DEPTHs"),
    26: ("swap", "SWAP"),
    27: ("swap_threshold", "swapping threshold"),
    28: ("l1", "L1 in"),
    29: ("u", "U  in"),
    30: ("equilibration", "Equilibration"),
}


def test_hpl_dat_writes_every_tuned_field_on_its_documented_line():
    settings = {
        "pmap": "column",
        "pfact": "left",
        "nbmin": 8,
        "ndiv": 3,
        "rfact": "right",
        "bcast": "LnM",
        "depth": 2,
        "swap": "long",
        "swap_threshold": 128,
        "l1": "no-transposed",
        "u": "no-transposed",
        "equilibration": False,
    }
    lines = hpl_dat(6000, 224, 2, 3, settings).splitlines()
    assert len(lines) == 31
    expected = {
        "n": 6000,
        "nb": 224,
        "p": 2,
        "q": 3,
        "pmap": 1,
        "pfact": 0,
        "nbmin": 8,
        "ndiv": 3,
        "rfact": 2,
        "bcast": 5,
        "depth": 2,
        "swap": 1,
        "swap_threshold": 128,
        "l1": 1,
        "u": 1,
        "equilibration": 0,
    }
    for number, (key, label) in HPL_LINES.items():
        line = lines[number - 1]
        assert label in line, (number, line)
        assert int(line.split()[0]) == expected[key], (key, line)
    # Every "# of ..." count stays 1: one value per line.
    for number in (5, 7, 10, 14, 16, 18, 20, 22, 24):
        assert lines[number - 1].split()[0] == "1"


def test_hpl_dat_defaults_are_hpls_recommended_input():
    assert hpl_dat(5000, 192, 1, 2) == hpl_dat(5000, 192, 1, 2, hpl_settings.DEFAULTS)


# --- hpl.yaml ---------------------------------------------------------------------------


def test_settings_file_round_trips(tmp_path):
    settings = {**hpl_settings.DEFAULTS, "nb": 256, "p": 1, "q": 2, "bcast": "2rM"}
    path = tmp_path / "hpl.yaml"
    path.write_text(hpl_settings.render(settings, {"n": 2000, "gflops": 50.0}))
    assert hpl_settings.load(path) == settings
    assert hpl_settings.load(tmp_path / "none.yaml") == hpl_settings.DEFAULTS


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "text, problem, fix",
    [
        (
            "pfact: middle\n",
            "pfact is 'middle', expected one of left, crout, right",
            "pfact: left | crout | right",
        ),
        ("bcast: 1\n", "bcast is 1, expected one of 1rg", "bcast: 1rg | 1rM"),
        ("nb: 0\n", "nb is 0, expected a whole number >= 1", "nb: 192"),
        ("nb: 19.5\n", "nb is 19.5", "a whole number >= 1"),
        ("depth: -1\n", "depth is -1, expected a whole number >= 0", "depth: 1"),
        ("ndiv: 1\n", "ndiv is 1, expected a whole number >= 2", "ndiv: 2"),
        ("equilibration: yes please\n", "expected true or false", "equilibration: true"),
        ("p: 2\n", "p and q go together, only p is set", "p: 1 and q: 2"),
        ("nb: 8\nnbmin: 16\n", "nbmin 16 is larger than nb 8", "nbmin: 4"),
        ("block: 192\n", "unknown key 'block'", "keys: nb, p, q"),
        ("- nb\n", "must be a mapping", "keys: nb"),
        ("nb: [\n", "is not valid YAML", "fix the syntax"),
    ],
)
def test_bad_settings_are_refused_naming_the_fix(tmp_path, text, problem, fix):
    path = tmp_path / "hpl.yaml"
    path.write_text(text)
    with pytest.raises(SitebenchError) as err:
        hpl_settings.load(path)
    assert problem in err.value.problem and "hpl.yaml" in err.value.problem
    assert fix in err.value.fix


@pytest.mark.reliability_input
@pytest.mark.spack
def test_validate_reports_a_bad_hpl_yaml(detected, tmp_path):
    sites = tmp_path / "sites"
    (sites / "site-configs").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(ROOT / "site-configs/local"), str(sites / "site-configs")])
    (sites / "environments").symlink_to(ROOT / "environments")
    (sites / "site-configs/local/hpl.yaml").write_text("swap: sometimes\n")
    proc = sitebench("validate", "local", env={"SITEBENCH_SITES_ROOT": str(sites)})
    assert proc.returncode != 0
    assert "hpl.yaml: swap is 'sometimes'" in proc.stdout + proc.stderr


# --- the HPL check reads the site's settings -------------------------------------------


@pytest.fixture(scope="module")
def detected(spack):
    """The local site detected (its topology sizes the HPL grid), as a first run does."""
    from sitebench.discovery import local_site

    local_site.detect(spack)


def dry_run_check(tmp_path, hpl_yaml):
    """HplCheck under `reframe --dry-run` on the local site with ``hpl_yaml`` as its
    site-configs/local/hpl.yaml (no Spack: the build is listed as installed)."""
    sites = tmp_path / "sites"
    (sites / "site-configs/local").mkdir(parents=True)
    if hpl_yaml is not None:
        (sites / "site-configs/local/hpl.yaml").write_text(hpl_yaml)
    prefix = tmp_path / "hpl-prefix"
    (prefix / "bin").mkdir(parents=True)
    roots = tmp_path / "roots.txt"
    roots.write_text(
        f"# {os.path.realpath(ROOT / 'environments/local')}\n"
        f"{prefix}\thpl@2.3+openmp level=tuned arch=linux-debian12-x86_64 /abcdefg\n"
    )
    stage = tmp_path / "rfm"
    proc = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "reframe"),
            "-C",
            str(ROOT / "site-configs/local/reframe.py"),
            "-c",
            str(ROOT / "reframe-checks/hpl.py"),
            "-n",
            "HplCheck",
            "-S",
            "HplCheck.n=4000",
            "--dry-run",
            "--prefix",
            str(stage),
        ],
        env={
            **os.environ,
            "SITEBENCH_SITES_ROOT": str(sites),
            "SITEBENCH_INSTALLED_ROOTS": str(roots),
        },
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    dats = list(stage.glob("stage/**/HplCheck_*/HPL.dat"))
    return proc, dats[0].read_text().splitlines() if dats else None


def ranks_here():
    topology = json.loads((ROOT / "site-configs/local/topology.json").read_text())
    return topology["num_cpus"] // topology.get("num_cpus_per_core", 1)


@pytest.mark.spack
def test_hpl_check_writes_the_tuned_input(detected, tmp_path):
    ranks = ranks_here()
    tuned = (
        f"nb: 128\np: {ranks}\nq: 1\npmap: column\npfact: left\nnbmin: 2\nndiv: 3\n"
        "rfact: right\nbcast: 2rM\ndepth: 0\nswap: long\nswap_threshold: 32\n"
        "l1: no-transposed\nu: no-transposed\nequilibration: false\ntuned: {n: 2000}\n"
    )
    proc, lines = dry_run_check(tmp_path, tuned)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    values = {key: lines[number - 1].split()[0] for number, (key, _l) in HPL_LINES.items()}
    assert values == {
        "n": "4000",
        "nb": "128",
        "p": str(ranks),
        "q": "1",
        "pmap": "1",
        "pfact": "0",
        "nbmin": "2",
        "ndiv": "3",
        "rfact": "2",
        "bcast": "3",
        "depth": "0",
        "swap": "1",
        "swap_threshold": "32",
        "l1": "1",
        "u": "1",
        "equilibration": "0",
    }


@pytest.mark.spack
def test_hpl_check_without_settings_keeps_hpls_recommended_input(detected, tmp_path):
    proc, lines = dry_run_check(tmp_path, None)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "\n".join(lines) + "\n" == hpl_dat(4000, 192, *hpl_tune.process_grid(ranks_here()))


@pytest.mark.reliability_input
@pytest.mark.spack
@pytest.mark.parametrize(
    "text, message",
    [
        ("bcast: fast\n", "bcast is 'fast'"),
        ("p: 3\nq: 5\n", "HPL grid 3 x 5 is not the"),
    ],
)
def test_hpl_check_refuses_a_bad_settings_file(detected, tmp_path, text, message):
    proc, lines = dry_run_check(tmp_path, text)
    assert proc.returncode != 0 and lines is None
    assert message in proc.stdout + proc.stderr


# --- one real short tuning run ----------------------------------------------------------


@pytest.mark.spack
@pytest.mark.slow
def test_short_tuning_run_on_the_built_hpl(spack):
    from sitebench.run import runner
    from sitebench.sites.site import Site

    env = spack.environ()
    # The local site's HPL, built as a first run builds it (shared with the other tests).
    prepared = runner.prepare(Site.resolve("local"))
    built = spack.run("-e", prepared.env_dir, "install", "hpl", capture=True, check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    proc = sitebench(
        "tune",
        "hpl",
        "--site",
        "local",
        "--n",
        "2000",
        "--budget",
        "40",
        "--confirm",
        "1",
        "--no-write",
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    kept = re.search(r"trials kept in (\S+)", proc.stdout).group(1)
    result = json.loads((ROOT / kept).read_text())
    assert result["n"] == 2000 and result["trials"][0]["phase"] == "baseline"
    # The search stops before a trial would overrun; the confirmation's reserve is an
    # estimate from the last trials, so a loaded machine may stretch it a little.
    assert result["seconds"] <= 60
    good = [t for t in result["trials"] if t["gflops"]]
    assert len(good) >= 5
    assert all(t["phases"].get("update") is not None for t in good)  # Spack's detailed timing
    assert "best: NB=" in proc.stdout
    assert not hpl_settings.problems(result["best"])  # the chosen input is a valid hpl.yaml
    if result["dgemm_gflops"]:
        assert result["loss"]["largest"] in result["loss"]["parts"]
