"""``./sitebench validate SITE``: malformed site files are rejected naming file, key and fix.

The malformed files and what each message must hold are in tests/fixtures/bad-sites/
(``cases.yaml``). Each replaces one file of a valid site 'good', onboarded from the recorded
detection of tests/fixtures/onboarding/vm into a temporary copy of the sites
(``$SITEBENCH_SITES_ROOT``), so the checkout is never written to.
"""

import argparse
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, ROOT, sitebench

from sitebench.sites.site import Site
from sitebench.onboarding import onboard

from sitebench.common import paths

from sitebench.onboarding import validate
from sitebench.common.errors import SitebenchError

BAD = FIXTURES / "bad-sites"
TABLE = yaml.safe_load((BAD / "cases.yaml").read_text())
CASES = TABLE["cases"]
NAMES = TABLE["names"]

#: Until cli.py has the command: the same cli.main with it added (test-only shim).
_SHIM = """
import argparse, sys
from sitebench import cli
from sitebench.onboarding import onboard
from sitebench.onboarding import validate
make = cli.parser
def parser():
    p = make()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    for mod in (onboard, validate):
        mod.add_parser(sub)
    return p
cli.parser = parser
sys.exit(cli.main(sys.argv[1:]))
"""


def _wired():
    from sitebench import cli

    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return "validate" in sub.choices and "onboard" in sub.choices


def cli(*args, env=None):
    """``./sitebench ARGS`` (through cli.main, with the commands added if not wired yet)."""
    if _wired():
        return sitebench(*args, env=env)
    return subprocess.run(
        [sys.executable, "-c", _SHIM, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})},
        capture_output=True,
        text=True,
    )


def mpi_prefix(where, mpi):
    """A prefix of ``mpi`` with its launcher and wrappers (scripts that say which MPI they
    are), as an MPI external of the recorded detection points at on the recording machine."""
    bindir = Path(where) / mpi / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    for program in ("mpicc", "mpicxx", "mpifort", "mpirun"):
        (bindir / program).write_text(f"#!/bin/sh\necho {mpi} {program}\n")
        (bindir / program).chmod(0o755)
    return bindir.parent


def recorded_vm(where, mpis=("openmpi",)):
    """The recorded detection of tests/fixtures/onboarding/vm (Open MPI), its MPI externals in
    prefixes of their own under ``where`` (so no test depends on this machine's MPI); an MPI
    of ``mpis`` it lacks (mpich) is added as a second external."""
    detection = onboard.Detection.load(FIXTURES / "onboarding" / "vm")
    for mpi in mpis:
        entry = detection.packages.setdefault(
            mpi, {"buildable": False, "externals": [{"spec": f"{mpi}@4.1.0"}]}
        )
        entry["externals"][0]["prefix"] = str(mpi_prefix(where, mpi))
    return detection


def local_toolchains(root, text="toolchains: [{name: gcc-openmpi, c: gcc, mpi: openmpi}]\n"):
    """The local site's detected toolchains, in a sites root (its reframe.py reads them)."""
    (root / "site-configs/local/toolchains.yaml").write_text(text)


def make_sites_root(root):
    """A sites root with the local site's reframe.py, environment and detected toolchains,
    and a valid site 'good' (one toolchain, gcc-openmpi)."""
    (root / "site-configs" / "local").mkdir(parents=True)
    (root / "environments" / "local").mkdir(parents=True)
    shutil.copy(ROOT / "site-configs/local/reframe.py", root / "site-configs/local/reframe.py")
    shutil.copy(ROOT / "environments/local/spack.yaml", root / "environments/local/spack.yaml")
    local_toolchains(root)
    old = os.environ.get("SITEBENCH_SITES_ROOT")
    os.environ["SITEBENCH_SITES_ROOT"] = str(root)
    try:
        detection = recorded_vm(root.parent / "mpi")
        onboard.onboard("good", detection=detection, mirror="file:///mirror")
    finally:
        if old is None:
            del os.environ["SITEBENCH_SITES_ROOT"]
        else:
            os.environ["SITEBENCH_SITES_ROOT"] = old
    return root


@pytest.fixture(scope="module")
def good_root(tmp_path_factory):
    return make_sites_root(tmp_path_factory.mktemp("sites") / "root")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, good_root):
    """Every case through the CLI, in parallel (each loads ReFrame once)."""

    def one(case):
        root = tmp_path_factory.mktemp("bad") / "root"
        shutil.copytree(good_root, root, symlinks=True)
        if "file" in case:
            target = root / case["target"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(BAD / case["file"], target)
        name = case.get("name", "good")
        return cli("validate", name, env={"SITEBENCH_SITES_ROOT": str(root)})

    cases = CASES + NAMES
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(one, cases))
    return {_id(c): r for c, r in zip(cases, results)}


def _id(case):
    return case.get("file") or repr(case["name"])


def test_there_are_enough_malformed_files():
    files = [c["file"] for c in CASES]
    assert len(set(files)) == len(files) >= 24
    assert set(files) == {p.name for p in BAD.iterdir() if p.name != "cases.yaml"}
    assert len(CASES) + len(NAMES) >= 30


@pytest.mark.parametrize("case", CASES + NAMES, ids=_id)
def test_malformed_site_is_rejected_naming_file_key_and_fix(case, outcomes):
    proc = outcomes[_id(case)]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.startswith("sitebench: error: ")
    assert "fix: " in proc.stderr
    for fragment in case["expect"]:
        assert fragment in proc.stderr, f"{fragment!r} not in:\n{proc.stderr}"


def test_the_onboarded_and_committed_sites_are_valid(good_root):
    proc = cli("validate", "good", env={"SITEBENCH_SITES_ROOT": str(good_root)})
    assert proc.returncode == 0, proc.stderr
    assert "site 'good' is valid" in proc.stdout
    for site in ("local", "local-slurm"):
        proc = cli("validate", site)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr


def test_all_problems_of_a_site_are_listed_at_once(good_root, tmp_path, monkeypatch):
    root = tmp_path / "root"
    shutil.copytree(good_root, root, symlinks=True)
    for name, target in (
        ("refs-lower-gt-upper.yaml", "site-configs/good/references.yaml"),
        ("env-no-specs.yaml", "environments/good/spack.yaml"),
        ("site-wrong-type.yaml", "site-configs/good/site.yaml"),
    ):
        shutil.copy(BAD / name, root / target)
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(root))
    with pytest.raises(SitebenchError) as err:
        validate.validate_site("good", load_reframe=False)
    text = str(err.value)
    # site.yaml replaced: it declares no toolchains any more, the fourth problem.
    assert "site 'good': 4 problems" in text
    for fragment in ("lower tolerance", "spack.specs", "slurm_cluster", "declares no toolchains"):
        assert fragment in text
    assert "./sitebench validate good" in err.value.fix


def test_references_in_one_file_are_all_reported(tmp_path):
    from sitebench.sites import references

    path = tmp_path / "references.yaml"
    path.write_text(
        "HplCheck:\n  $index: [$processor.arch, scale]\n  zen3:\n"
        "    quick: {gflops: [80, 0.3, -0.3, G], gflopz: [1, -0.1, null, G]}\n"
        "Nope: {}\n"
    )
    _data, found = references.problems(path, validate.known_checks())
    keys = [key for key, _problem, _fix in found]
    assert keys == ["HplCheck.zen3.quick.gflops", "HplCheck.zen3.quick.gflopz", "Nope"]


def test_the_figures_come_from_the_checks():
    checks = validate.known_checks()
    assert {"StreamCheck", "HplCheck", "NpbCheck", "SysbenchCheck"} <= set(checks)
    assert {"OsuLatencyCheck", "OsuBandwidthCheck", "ParsecCheck"} <= set(checks)
    assert checks["StreamCheck"]["figures"] >= {"Copy", "Scale", "Add", "Triad", "energy_j"}
    assert "gflops_per_watt" in checks["HplCheck"]["figures"]
    assert "num_threads" in checks["StreamCheck"]["variables"]
    assert checks["NpbCheck"]["reference_keys"][0] == "$processor.arch"
    # The committed references use only figures the checks produce.
    assert not validate.site_problems("local", load_reframe=False)[1]


def test_runner_prepare_validates_first(good_root, tmp_path, monkeypatch):
    from sitebench.run import runner

    root = tmp_path / "root"
    shutil.copytree(good_root, root, symlinks=True)
    shutil.copy(BAD / "refs-unknown-figure.yaml", root / "site-configs/good/references.yaml")
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(root))
    monkeypatch.setattr(runner.pinned, "setup", lambda: pytest.fail("validated after setup"))
    with pytest.raises(SitebenchError, match="no figure 'Traid'"):
        runner.prepare(Site.resolve("good"))
    assert paths.site_config_dir("good") == root / "site-configs" / "good"


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "text, key, message",
    [
        ("nightly: {keep: 0}\n", "nightly.keep", "expected a positive whole number"),
        ("nightly: {keep: true}\n", "nightly.keep", "expected a positive whole number"),
        ("nightly: {alert: ''}\n", "nightly.alert", "expected a non-empty string"),
        ("nightly: {when: '02:00'}\n", "nightly.when", "unknown key 'when'"),
        ("results: {remote: 5}\n", "results.remote", "expected a non-empty string"),
        ("results: {branch: ''}\n", "results.branch", "expected a non-empty string"),
        ("results: {keep_days: -1}\n", "results.keep_days", "expected a positive whole number"),
        ("results: {limits: 5}\n", "results.limits", "expected a mapping"),
        (
            "results: {limits: {runs_per_night: 0}}\n",
            "results.limits.runs_per_night",
            "expected a positive whole number",
        ),
        ("results: {limits: {bytes_total: lots}}\n", "results.limits.bytes_total", "a size"),
        ("results: {limits: {runs: 3}}\n", "results.limits.runs", "unknown key 'runs'"),
        (
            "results: {limits: {sites: {beta: {files_total: x}}}}\n",
            "results.limits.sites.beta.files_total",
            "expected a positive whole number",
        ),
    ],
)
def test_bad_nightly_and_results_settings_are_named_with_their_fix(
    tmp_path, monkeypatch, text, key, message
):
    from sitebench.sites import site_settings

    site = tmp_path / "site-configs" / "x"
    site.mkdir(parents=True)
    (site / "site.yaml").write_text(text)
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(tmp_path))
    _settings, found = site_settings.problems("x")
    assert [f[0] for f in found] == [key]
    fix = "keys: " if "unknown" in message else "e.g. "
    assert message in found[0][1] and found[0][2].startswith(fix)
