"""The nightly operation: one night of a site (lock, exit codes, log, rotation, alerts,
publishing, signals), its schedule with cron, systemd and scrontab, and the schedule fired
for real by a cron daemon and by the private Slurm cluster's scrontab.

Fast tests give ``run_night`` their own suite (its ``suite`` parameter) in place of Spack
and ReFrame; the end-to-end test (markers ``spack``, ``slow``) has a real cron daemon start
the real ``./sitebench nightly run`` of one cheap check.
"""

import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, first_local_toolchain, sitebench
from sitebench.common.errors import SitebenchError
from sitebench.common import paths
from sitebench.nightly import codes, cron, lock, logs, schedule, scrontab, status, systemd, when
from sitebench.nightly.night import run_night
from sitebench.nightly.suite import Outcome
from sitebench.results.exchange import RESTORE_HINT, Published
from sitebench.sites import toolchains
from sitebench.sites.site import Site

SITE = "nightsite"


def make_site(root, nightly=None, results=None, references=True, name=SITE):
    """A site of its own under ``root`` (SITEBENCH_SITES_ROOT): the local site's ReFrame
    configuration and references, the local environment, the given ``nightly:``."""
    config = root / "site-configs" / name
    config.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "site-configs/local/reframe.py", config / "reframe.py")
    if references:
        shutil.copy(ROOT / "site-configs/local/references.yaml", config / "references.yaml")
    envs = root / "environments"
    if not envs.exists():
        envs.symlink_to(ROOT / "environments")
    settings = {"environment": "local"}
    if nightly:
        settings["nightly"] = nightly
    if results:
        settings["results"] = results
    (config / "site.yaml").write_text(json.dumps(settings) + "\n")
    return config


@pytest.fixture
def night_env(tmp_path, monkeypatch):
    """A private state, results and sites root; the site ``nightsite`` with its logs and an
    alert command writing to files of the test."""
    monkeypatch.setenv("SITEBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SITEBENCH_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(tmp_path / "sites"))
    env = {
        "tmp": tmp_path,
        "logs": tmp_path / "logs",
        "alerts": tmp_path / "alerts.txt",
    }
    env["nightly"] = {
        "logs": str(env["logs"]),
        "keep": 30,
        "alert": f"cat >> {env['alerts']}; echo '--- for {{site}}' >> {env['alerts']}",
    }
    make_site(tmp_path / "sites", env["nightly"])
    return env


def outcome(tmp_path, code=0, worse=0):
    run = tmp_path / "results" / SITE / "20261124T010000Z-abcdef"
    run.mkdir(parents=True, exist_ok=True)
    return Outcome(run, code, f"summary: ReFrame exit {code}", f"drift: {worse} worse", worse)


def suite_returning(tmp_path, code=0, worse=0, calls=None):
    def suite(site, scale, reframe_args):
        if calls is not None:
            calls.append((site.name, scale, tuple(reframe_args)))
        print("the suite ran")
        return outcome(tmp_path, code, worse)

    return suite


def log_of(env):
    found = logs.night_logs(env["logs"])
    assert found, f"no night log in {env['logs']}"
    return found[-1].read_text()


# -- one night ---------------------------------------------------------------------------


def test_exit_codes_are_distinct_and_documented():
    from sitebench.cli import nightly as cli

    named = [codes.PASSED, codes.FAILED, codes.NOT_RUN, codes.ALREADY_RUNNING]
    named += [
        codes.NOT_PUBLISHED,
        codes.CRASHED,
        codes.interrupted("SIGINT"),
        codes.interrupted("SIGTERM"),
    ]
    assert len(set(named)) == len(named) and 2 not in named  # 2: the CLI's argument errors
    assert named[-2:] == [130, 143]
    for code in named:
        assert f"{code} " in cli.__doc__.replace("\n", " "), code
    assert codes.verdict(143) == "interrupted (SIGTERM)"


def test_a_passing_night_logs_its_verdict_and_alerts_no_one(night_env):
    calls = []
    code = run_night(
        SITE, "quick", ["-n", "StreamCheck"], suite=suite_returning(night_env["tmp"], 0, 0, calls)
    )
    assert code == codes.PASSED
    assert calls == [(SITE, "quick", ("-n", "StreamCheck"))]
    text = log_of(night_env)
    assert "the suite ran" in text and "lock: held (pid " in text
    assert "not published: no results remote configured" in text
    assert text.rstrip().endswith("sitebench nightly: verdict: passed (exit 0)")
    assert not night_env["alerts"].exists()


@pytest.mark.parametrize(
    "code, worse, why", [(1, 0, "a check failed"), (0, 2, "2 figure(s) drifted worse")]
)
def test_a_failed_check_or_a_worse_drift_fails_and_alerts(night_env, code, worse, why):
    assert run_night(SITE, suite=suite_returning(night_env["tmp"], code, worse)) == 1
    alert = night_env["alerts"].read_text()
    assert f"sitebench nightly: {SITE} on " in alert and ": failed (exit 1)" in alert
    assert why in alert and f"summary: ReFrame exit {code}" in alert
    assert f"--- for {SITE}" in alert  # {site} replaced in the command
    assert str(logs.night_logs(night_env["logs"])[-1]) in alert
    assert "alert sent" in log_of(night_env)


def test_could_not_run_exits_3_and_alerts(night_env):
    def suite(site, scale, reframe_args):
        raise SitebenchError("Spack 0.9 found, 1.1.0 needed", "install Spack 1.1.0")

    assert run_night(SITE, suite=suite) == codes.NOT_RUN
    alert = night_env["alerts"].read_text()
    assert "could not run (exit 3)" in alert and "Spack 0.9 found" in alert
    assert "install Spack 1.1.0" in alert


@pytest.mark.reliability_input
def test_a_night_naming_a_toolchain_the_site_lacks_could_not_run(night_env, monkeypatch):
    # The local site, detected by the tests' conftest: its toolchains are known.
    monkeypatch.delenv("SITEBENCH_SITES_ROOT")
    monkeypatch.setenv(toolchains.SELECTED, "")  # the night sets it; restored after the test
    # The real suite: the name is refused before Spack is set up or anything built or run.
    assert run_night("local", toolchains=["nope"], echo=False) == codes.NOT_RUN
    (log,) = logs.night_logs(night_env["tmp"] / "state" / "nightly" / "local" / "logs")
    text = log.read_text()
    assert ", toolchains nope" in text.splitlines()[0]
    assert "could not run: toolchain 'nope' is not one of the site's" in text
    assert f"use one of: {first_local_toolchain()}" in text and "==> " not in text
    # Refused when the schedule is installed, not only when it fires.
    proc = sitebench(
        "nightly", "install", "--site", "local", "--at", "02:00", "--toolchain", "nope"
    )
    assert proc.returncode == 2 and "toolchain 'nope' is not one of the site's" in proc.stderr


def test_a_crash_of_sitebench_itself_is_a_verdict_with_its_traceback(night_env):
    def suite(site, scale, reframe_args):
        raise ValueError("a bug in the store")

    assert run_night(SITE, suite=suite) == codes.CRASHED
    text = log_of(night_env)
    assert "Traceback (most recent call last)" in text and "ValueError: a bug" in text
    assert text.rstrip().endswith("verdict: sitebench failed (exit 6)")
    assert "sitebench failed: ValueError: a bug in the store" in night_env["alerts"].read_text()
    assert lock_is_free(SITE)


@pytest.mark.reliability_input
def test_an_alert_command_that_fails_never_hides_the_verdict(night_env):
    make_site(
        night_env["tmp"] / "sites", {**night_env["nightly"], "alert": "echo nope >&2; exit 7"}
    )
    assert run_night(SITE, suite=suite_returning(night_env["tmp"], 1)) == codes.FAILED
    text = log_of(night_env)
    assert "alert FAILED: `echo nope >&2; exit 7` exited 7: nope" in text
    assert text.rstrip().endswith("verdict: failed (exit 1)")
    # A missing program is the same: logged, the verdict kept.
    make_site(night_env["tmp"] / "sites", {**night_env["nightly"], "alert": "no-such-mailer x"})
    assert run_night(SITE, suite=suite_returning(night_env["tmp"], 0, 1)) == codes.FAILED
    assert "alert FAILED: `no-such-mailer x` exited 127" in log_of(night_env)


def test_no_alert_configured_logs_and_exit_code_only(night_env):
    make_site(night_env["tmp"] / "sites", {"logs": night_env["nightly"]["logs"]})
    assert run_night(SITE, suite=suite_returning(night_env["tmp"], 1)) == codes.FAILED
    assert "alert: none configured" in log_of(night_env)


def alive(pid):
    """The process exists and is not a zombie (a killed orphan this machine's init has not
    reaped yet is gone for the test's purpose)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.reliability_fault
def test_a_hanging_alert_is_stopped_with_every_process_it_started(night_env, monkeypatch):
    """The alert's shell, a command it forked into the background and one that ignores
    SIGTERM are all stopped at the timeout ($SITEBENCH_ALERT_TIMEOUT), not the shell alone."""
    pids = night_env["tmp"] / "alert-pids"
    record = f"echo $$ >> {pids}"
    command = (
        f"{record}; sh -c '{record}; exec sleep 1000' & "
        f"sh -c 'trap \"\" TERM; {record}; exec sleep 1000' & exec sleep 1000"
    )
    make_site(night_env["tmp"] / "sites", {**night_env["nightly"], "alert": command})
    monkeypatch.setenv("SITEBENCH_ALERT_TIMEOUT", "1")
    start = time.time()
    try:
        assert run_night(SITE, suite=suite_returning(night_env["tmp"], 1)) == codes.FAILED
        took = time.time() - start
        started = [int(p) for p in pids.read_text().split()]
        assert len(started) == 3, started  # the shell (then a sleep) and its two forks
        deadline = time.time() + 10
        while any(alive(p) for p in started) and time.time() < deadline:
            time.sleep(0.1)
        assert [p for p in started if alive(p)] == []
        assert took < 30, took  # 1 s, and 1 s more for the one that ignores SIGTERM
        text = log_of(night_env)
        assert f"alert FAILED: `{command}` did not end within 1 s (stopped" in text
        assert "SIGTERM, then SIGKILL after 1 s, to its process group" in text  # the trap
        assert text.rstrip().endswith("verdict: failed (exit 1)")
    finally:
        for pid in map(int, pids.read_text().split() if pids.exists() else []):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.reliability_input
def test_a_bad_alert_timeout_is_said_and_the_default_used(night_env, monkeypatch):
    monkeypatch.setenv("SITEBENCH_ALERT_TIMEOUT", "soon")
    assert run_night(SITE, suite=suite_returning(night_env["tmp"], 1)) == codes.FAILED
    text = log_of(night_env)
    assert "$SITEBENCH_ALERT_TIMEOUT='soon' is not a positive number of seconds" in text
    assert "alert sent" in text


def test_publishing(night_env):
    tmp = night_env["tmp"]
    make_site(tmp / "sites", night_env["nightly"], results={"remote": str(tmp / "shared.git")})
    published = []

    def publisher(site):
        published.append(site)
        return Published(True, ["20261124T010000Z-abcdef"], "", "0123abc")

    assert run_night(SITE, suite=suite_returning(tmp), publisher=publisher) == codes.PASSED
    assert published == [SITE]
    assert "published: 20261124T010000Z-abcdef (commit 0123abc)" in log_of(night_env)

    def unreachable(site):
        return Published(False, ["20261124T010000Z-abcdef"], "Could not resolve host", None)

    assert run_night(SITE, suite=suite_returning(tmp), publisher=unreachable) == 5
    assert "not published: Could not resolve host" in night_env["alerts"].read_text()
    # A failed check keeps its own code; the publishing failure is in the alert.
    assert run_night(SITE, suite=suite_returning(tmp, 1), publisher=unreachable) == 1

    def misconfigured(site):
        raise SitebenchError("the results remote is not a git repository", "fix results.remote")

    assert run_night(SITE, suite=suite_returning(tmp), publisher=misconfigured) == 5
    assert "not published: the results remote is not a git repository" in log_of(night_env)
    assert run_night(SITE, suite=suite_returning(tmp), publish=False) == codes.PASSED
    assert "not published: --no-publish" in log_of(night_env)


def store_disturbed_run(cores):
    """A stored run of the night's site: the real quick report, HPL beside other work that
    took ``cores``; returns its directory and the name of the disturbed case."""
    from sitebench.results.rundirs import Incoming

    report = json.loads((FIXTURES / "reframe/report-local-quick.json").read_text())
    hpl = next(c for c in report["runs"][0]["testcases"] if c["name"].startswith("HplCheck"))
    hpl.update(disturbed=True, foreign_cores=cores)
    incoming = Incoming(SITE)
    (incoming.path / "report.json").write_text(json.dumps(report))
    (incoming.path / "provenance").mkdir()
    (incoming.path / "provenance/provenance.json").write_text('{"cpu_arch": "zen3"}')
    return incoming.commit(), hpl["name"]


def test_the_alert_names_the_cases_other_work_disturbed(night_env, monkeypatch):
    # The night's own suite (./sitebench run's), ReFrame replaced by a run stored as it
    # stores one, whose check failed: the alert goes, naming the disturbed case once.
    from sitebench.nightly import suite
    from sitebench.results import record

    cores = 1.617
    run_dir, name = store_disturbed_run(cores)
    monkeypatch.setattr(record, "run_and_store", lambda *args, **kwargs: (run_dir, 1))
    assert run_night(SITE, suite=suite.run_once) == codes.FAILED
    alert = night_env["alerts"].read_text()
    said = [line for line in alert.splitlines() if line.startswith("disturbed: ")]
    assert said == [
        f"disturbed: 1 case(s) ran while other work took the machine's CPU, their figures "
        f"not judged for drift: {name} ({cores:.2f} cores)"
    ]


@pytest.mark.reliability_fault
def test_incoming_runs_refused_by_the_publish_are_in_the_alert(night_env):
    tmp = night_env["tmp"]
    make_site(tmp / "sites", night_env["nightly"], results={"remote": str(tmp / "shared.git")})
    refused = [
        "1a2b3c4 from othersite: touches code outside results/othersite/",
        "5d6e7f8 from thirdsite: results/thirdsite/x/report.json is not JSON",
    ]

    def publisher(site):
        result = Published(True, ["20261124T010000Z-abcdef"], "", "0123abc")
        result.refused = refused  # set as an attribute: before or after the field exists
        return result

    assert run_night(SITE, suite=suite_returning(tmp), publisher=publisher) == codes.PASSED
    alert = night_env["alerts"].read_text()
    assert "published: 20261124T010000Z-abcdef (commit 0123abc)" in alert
    assert "the publish refused 2 incoming commit(s), one line per site" in alert
    for line in refused:
        assert f"  refused: {line}" in alert and f"  refused: {line}" in log_of(night_env)
    assert log_of(night_env).rstrip().endswith("verdict: passed (exit 0)")


@pytest.mark.reliability_fault
def test_many_commits_refused_from_one_site_are_one_alert_line(night_env):
    """A site that pushed 40 unsigned commits costs the alert one line (its count and first
    reason), another site's one refused commit one more; the quarantine listing the alert
    names has every one of them."""
    from exchange_world import World

    tmp = night_env["tmp"]
    (tmp / "world").mkdir()
    world = World(tmp / "world")
    world.make_remote()
    receiver = world.site("beta")
    clone = world.hostile_clone("delta")
    sent = [("delta", f"20261126T0303{i:02d}Z-unsgnd") for i in range(40)]
    sent.append(("omega", "20261126T040404Z-unsgnd"))
    for site, run in sent:
        (clone / site / run).mkdir(parents=True)
        (clone / site / run / "report.json").write_text("{}")
        assert world.push_as(clone, f"results: {site} {run}").returncode == 0
    make_site(tmp / "sites", night_env["nightly"], results={"remote": str(world.bare)})

    night = run_night(SITE, suite=suite_returning(tmp), publisher=lambda site: receiver.publish())
    assert night == codes.PASSED  # refusals alert, and leave the verdict as it is
    alert = night_env["alerts"].read_text()
    assert "the publish refused 41 incoming commit(s), one line per site" in alert
    assert "./sitebench exchange quarantine" in alert
    said = [line for line in alert.splitlines() if line.startswith("  refused: ")]
    assert len(said) == 2, said
    assert said[0].startswith("  refused: delta: 40 commits refused, the first: commit ")
    assert said[1].startswith("  refused: omega: commit ")
    assert all("signed" in line for line in said), said  # the reason: no trusted signature
    assert [line for line in log_of(night_env).splitlines() if line in said] == said
    listed = receiver.cli("exchange", "quarantine")
    assert listed.returncode == 0, listed.stderr
    sites = [line.split()[2] for line in listed.stdout.splitlines()]  # time, commit, site
    assert (sites.count("delta"), sites.count("omega"), len(sites)) == (40, 1, 41), sites


def test_a_rewritten_remote_is_in_the_alert_with_the_way_back(night_env):
    tmp = night_env["tmp"]
    make_site(tmp / "sites", night_env["nightly"], results={"remote": str(tmp / "shared.git")})
    reason = "commit 0123456789ab refused: history rewrite: the branch no longer contains x"

    def publisher(site):
        return Published(False, [], reason, None, [reason], rewritten=True)

    assert run_night(SITE, suite=suite_returning(tmp), publisher=publisher) == codes.NOT_PUBLISHED
    alert = night_env["alerts"].read_text()
    assert f"not published: {reason}\n{RESTORE_HINT}" in alert


def test_publishing_for_real_to_a_bare_repository(night_env):
    """The night's run reaches a shared bare repository through the results exchange."""
    tmp = night_env["tmp"]
    shared = tmp / "shared.git"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(shared)], check=True)
    seed = tmp / "seed"
    subprocess.run(["git", "clone", "-q", str(shared), str(seed)], check=True)
    subprocess.run([*git, "-C", str(seed), "commit", "-q", "--allow-empty", "-m", "start"])
    subprocess.run(["git", "-C", str(seed), "push", "-q", "origin", "HEAD:main"], check=True)
    subprocess.run(["git", "clone", "-q", str(shared), str(tmp / "results")], check=True)
    for key, value in (("user.name", "t"), ("user.email", "t@t")):
        subprocess.run(["git", "-C", str(tmp / "results"), "config", key, value], check=True)
    make_site(tmp / "sites", night_env["nightly"], results={"remote": str(shared)})

    def suite(site, scale, reframe_args):
        run = tmp / "results" / SITE / "20261124T010000Z-abcdef"
        run.mkdir(parents=True)
        (run / "report.json").write_text('{"runs": []}\n')
        return Outcome(run, 0, "summary", "drift", 0)

    assert run_night(SITE, suite=suite) == codes.PASSED, log_of(night_env)
    assert "published: 20261124T010000Z-abcdef" in log_of(night_env)
    files = subprocess.run(
        ["git", "-C", str(shared), "ls-tree", "-r", "--name-only", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert any(f.endswith(f"{SITE}/20261124T010000Z-abcdef/report.json") for f in files), files


def test_log_rotation_keeps_the_last_n(night_env):
    make_site(night_env["tmp"] / "sites", {**night_env["nightly"], "keep": 3})
    made = []
    for code in (0, 1, 0, 1, 0):
        assert run_night(SITE, suite=suite_returning(night_env["tmp"], code)) == code
        made.append(logs.night_logs(night_env["logs"])[-1])
    left = logs.night_logs(night_env["logs"])
    assert left == made[-3:]
    nights = logs.last_nights(night_env["logs"])
    assert [n.code for n in nights] == [0, 1, 0]
    assert [n.verdict for n in nights] == ["passed", "failed", "passed"]


@pytest.mark.reliability_input
@pytest.mark.parametrize("name", ["nowhere", "../../etc"])
def test_unknown_site_could_not_run(night_env, name):
    proc = sitebench("nightly", "run", "--site", name)
    assert proc.returncode == codes.NOT_RUN, proc.stderr
    assert "could not run" in proc.stderr
    assert ("unknown site 'nowhere'" if name == "nowhere" else "invalid site name") in proc.stderr
    for action in (["install", "--at", "02:00"], ["status"], ["remove"]):
        proc = sitebench("nightly", action[0], "--site", name, *action[1:])
        assert proc.returncode == 2 and "site" in proc.stderr, proc.stderr


@pytest.mark.reliability_input
def test_a_broken_site_yaml_could_not_run_with_a_log(night_env):
    config = night_env["tmp"] / "sites" / "site-configs" / SITE
    (config / "site.yaml").write_text("nightly: {keep: -1}\n")
    proc = sitebench("nightly", "run", "--site", SITE)
    assert proc.returncode == codes.NOT_RUN
    assert "keep is -1, expected a positive whole number" in proc.stderr
    default = night_env["tmp"] / "state" / "nightly" / SITE / "logs"
    assert logs.last_nights(default)[-1].code == codes.NOT_RUN


#: A site.yaml broken three ways -> what the night's alert says about it.
BROKEN = {
    "not YAML": ("environment: local\nnightly: {logs: [unclosed\n", "is not valid YAML"),
    "an unknown environment": (
        {"environment": "nosuch"},
        "environment 'nosuch' does not exist",
    ),
    "toolchains that are not a list": (
        {"toolchains": "gcc-mpich"},
        "toolchains is 'gcc-mpich', expected a list",
    ),
}


def break_site_yaml(env, how):
    """Break the site's site.yaml ``how`` (a key of :data:`BROKEN`); its problem in words."""
    config = env["tmp"] / "sites" / "site-configs" / SITE / "site.yaml"
    text, problem = BROKEN[how]
    if isinstance(text, dict):
        text = json.dumps({**json.loads(config.read_text()), **text}) + "\n"
    config.write_text(text)
    return problem


@pytest.mark.reliability_fault
@pytest.mark.parametrize("how", BROKEN)
def test_a_broken_configuration_alerts_and_logs_with_the_sites_nights(night_env, how):
    """The night that could not start alerts with the site's alert command and logs in its
    log folder, rotated with its nights: from the file's own nightly: keys, else (the file
    is not YAML) from the last night that could read it."""
    make_site(night_env["tmp"] / "sites", {**night_env["nightly"], "keep": 2})
    assert run_night(SITE, suite=suite_returning(night_env["tmp"])) == codes.PASSED
    problem = break_site_yaml(night_env, how)
    for _ in range(3):
        proc = sitebench("nightly", "run", "--site", SITE)
        assert proc.returncode == codes.NOT_RUN, proc.stdout + proc.stderr
        assert problem in proc.stderr
    alert = night_env["alerts"].read_text()
    assert alert.count(": could not run (exit 3)") == 3 and problem in alert
    assert f"--- for {SITE}" in alert
    nights = logs.last_nights(night_env["logs"])
    assert [n.code for n in nights] == [codes.NOT_RUN] * 2  # keep: 2
    assert problem in nights[-1].log.read_text()
    assert logs.night_logs(night_env["tmp"] / "state" / "nightly" / SITE / "logs") == []


@pytest.mark.reliability_fault
def test_a_broken_configuration_never_read_before_alerts_from_its_own_nightly_keys(night_env):
    problem = break_site_yaml(night_env, "an unknown environment")
    assert run_night(SITE, suite=suite_returning(night_env["tmp"])) == codes.NOT_RUN
    assert problem in night_env["alerts"].read_text()
    assert logs.last_nights(night_env["logs"])[-1].code == codes.NOT_RUN


@pytest.mark.reliability_fault
def test_a_site_yaml_broken_between_install_and_the_first_night_still_alerts(night_env):
    """nightly install records the nightly: settings, as each night does."""
    env = {"XDG_CONFIG_HOME": str(night_env["tmp"] / "config")}  # units only written here
    proc = sitebench(
        "nightly", "install", "--site", SITE, "--at", "02:00", "--via", "systemd", env=env
    )
    assert proc.returncode == 0, proc.stderr
    problem = break_site_yaml(night_env, "not YAML")
    assert run_night(SITE, suite=suite_returning(night_env["tmp"])) == codes.NOT_RUN
    assert problem in night_env["alerts"].read_text()
    assert logs.last_nights(night_env["logs"])[-1].code == codes.NOT_RUN


@pytest.mark.reliability_input
def test_a_configuration_never_readable_logs_in_the_default_folder_and_says_why(night_env):
    break_site_yaml(night_env, "not YAML")
    assert run_night(SITE, suite=suite_returning(night_env["tmp"])) == codes.NOT_RUN
    assert not night_env["alerts"].exists()
    default = night_env["tmp"] / "state" / "nightly" / SITE / "logs"
    (night,) = logs.last_nights(default)
    assert night.code == codes.NOT_RUN
    assert "no alert command known" in night.log.read_text()


# -- one at a time, signals ---------------------------------------------------------------

HOLDER = """
import sys, time
from sitebench.nightly import lock
with lock.hold(sys.argv[1]) as holder:
    print(holder, flush=True)
    time.sleep(600)
"""

SLOW_NIGHT = """
import sys, time
from pathlib import Path
from sitebench.nightly.night import run_night
from sitebench.nightly.suite import Outcome

def suite(site, scale, reframe_args):
    Path(sys.argv[2]).write_text("started")
    time.sleep(600)

sys.exit(run_night(sys.argv[1], suite=suite, echo=False))
"""


def child(script, *args, sigint=signal.SIG_DFL):
    """``script`` in its own Python. ``sigint``: the SIGINT disposition it inherits, set
    here so that the test does not depend on how pytest was started (a shell ignores SIGINT
    for what a script starts in the background)."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )


def wait_for(path, proc, timeout=30):
    deadline = time.time() + timeout
    while not Path(path).exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def lock_is_free(site):
    fd = os.open(lock.lock_path(site), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.reliability_fault
def test_a_second_night_while_one_runs_exits_already_running(night_env):
    holder = child(HOLDER, SITE)
    try:
        held = holder.stdout.readline().strip()
        assert held.startswith(f"pid {holder.pid}, started ")
        start = time.time()
        proc = sitebench("nightly", "run", "--site", SITE)
        assert proc.returncode == codes.ALREADY_RUNNING, proc.stdout + proc.stderr
        assert time.time() - start < 30  # at once, not waiting for the lock
        assert f"already running ({held})" in proc.stdout + log_of(night_env)
        assert "already running (exit 4)" in night_env["alerts"].read_text()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.reliability_fault
def test_a_night_killed_with_sigkill_leaves_no_lock(night_env):
    started = night_env["tmp"] / "started"
    proc = child(SLOW_NIGHT, SITE, str(started))
    wait_for(started, proc)
    assert not lock_is_free(SITE)
    assert f"pid {proc.pid}" in lock.lock_path(SITE).read_text()
    proc.kill()
    proc.wait()
    assert lock_is_free(SITE)
    # The next night starts, and status shows the killed one as unfinished.
    assert run_night(SITE, suite=suite_returning(night_env["tmp"])) == codes.PASSED
    nights = logs.last_nights(night_env["logs"])
    assert nights[0].code is None and nights[0].verdict.startswith("unfinished")
    assert nights[1].code == codes.PASSED


@pytest.mark.reliability_fault
@pytest.mark.parametrize(
    "sig, code, inherited",
    [
        (signal.SIGTERM, 143, signal.SIG_DFL),
        (signal.SIGINT, 130, signal.SIG_DFL),
        # Started in the background of a script, SIGINT ignored: the night still stops on it
        # (it hung here until the night handled SIGINT itself, not through KeyboardInterrupt).
        (signal.SIGINT, 130, signal.SIG_IGN),
    ],
)
def test_sigterm_or_ctrl_c_mid_run_releases_the_lock_and_alerts(night_env, sig, code, inherited):
    started = night_env["tmp"] / "started"
    proc = child(SLOW_NIGHT, SITE, str(started), sigint=inherited)
    wait_for(started, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, out + err
    assert lock_is_free(SITE)
    name = signal.Signals(sig).name
    alert = night_env["alerts"].read_text()
    assert f"interrupted ({name}) (exit {code})" in alert
    assert "the lock is released" in alert
    assert log_of(night_env).rstrip().endswith(f"verdict: interrupted ({name}) (exit {code})")


def test_an_interrupted_reframe_session_names_the_partial_run(night_env):
    """The run stage stores a partial run when ReFrame is interrupted (record.py, tested in
    test_reliability.py) and returns 128 + signal: the night says where it is."""
    assert run_night(SITE, suite=suite_returning(night_env["tmp"], 143)) == 143
    alert = night_env["alerts"].read_text()
    assert "interrupted (SIGTERM): the partial run is stored in " in alert
    assert "20261124T010000Z-abcdef, marked partial" in alert


@pytest.mark.reliability_fault
def test_starts_that_found_a_night_running_never_push_out_the_nights_logs(night_env):
    make_site(night_env["tmp"] / "sites", {**night_env["nightly"], "keep": 2})
    for code in (0, 1):
        assert run_night(SITE, suite=suite_returning(night_env["tmp"], code)) == code
    nights = logs.night_logs(night_env["logs"])
    holder = child(HOLDER, SITE)
    try:
        holder.stdout.readline()
        for _ in range(3):
            assert run_night(SITE, suite=suite_returning(night_env["tmp"])) == 4
    finally:
        holder.kill()
        holder.wait()
    left = logs.last_nights(night_env["logs"], 100)
    assert [n.log for n in left if n.code != codes.ALREADY_RUNNING] == nights
    # Kept apart, as many as nights are: the last ones say when starts were refused.
    assert [n.code for n in left].count(codes.ALREADY_RUNNING) == 2
    # The next real night pushes out the oldest real night.
    assert run_night(SITE, suite=suite_returning(night_env["tmp"])) == codes.PASSED
    left = logs.last_nights(night_env["logs"], 100)
    assert [n.code for n in left if n.code != codes.ALREADY_RUNNING] == [1, 0]


@pytest.mark.reliability_fault
def test_the_schedulers_log_is_rotated_past_1_mib(night_env):
    """What cron or systemd append the night's output to (scheduled.log) is renamed
    scheduled.log.1 once past 1 MiB; the next night's scheduler starts a new one."""
    scheduled = schedule.scheduled_log(night_env["logs"])
    scheduled.parent.mkdir(parents=True)
    old = "an old night's line\n" * (2**20 // 20 + 1)
    scheduled.write_text(old)
    line = f"{sys.executable} -m sitebench nightly run --site {SITE} >> {scheduled} 2>&1"
    holder = child(HOLDER, SITE)  # each night exits at once, 'already running'
    try:
        holder.stdout.readline()
        assert subprocess.run(line, shell=True, cwd=ROOT).returncode == 4
        rotated = scheduled.with_name("scheduled.log.1")
        assert rotated.read_text().startswith(old)
        assert f"{SITE}: already running (exit 4)" in rotated.read_text()
        assert not scheduled.exists()
        assert subprocess.run(line, shell=True, cwd=ROOT).returncode == 4
        assert f"{SITE}: already running (exit 4)" in scheduled.read_text()
        assert scheduled.stat().st_size < 2000 and rotated.read_text().startswith(old)
    finally:
        holder.kill()
        holder.wait()


# -- the schedule -------------------------------------------------------------------------


@pytest.fixture
def real_crontab():
    """The user's real crontab, saved and put back as it was (or removed if there was none)."""
    if not shutil.which("crontab"):
        pytest.skip("CRON NOT INSTALLED: apt-get install cron")
    saved = subprocess.run(["crontab", "-l"], capture_output=True, text=True)
    had = saved.returncode == 0
    yield
    if had:
        subprocess.run(["crontab", "-"], input=saved.stdout, text=True, check=True)
    else:
        subprocess.run(["crontab", "-r"], capture_output=True)
    after = subprocess.run(["crontab", "-l"], capture_output=True, text=True)
    assert (after.returncode == 0) == had and (not had or after.stdout == saved.stdout)


def crontab():
    proc = subprocess.run(["crontab", "-l"], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else ""


@pytest.mark.reliability_input
def test_cron_install_refuses_a_second_replaces_with_force_edits_only_its_lines(
    night_env, real_crontab
):
    foreign = "# someone else's\n17 3 * * * /usr/bin/true\n"
    subprocess.run(["crontab", "-"], input=foreign, text=True, check=True)
    first = sitebench("nightly", "install", "--site", SITE, "--at", "02:30")
    assert first.returncode == 0, first.stderr
    table = crontab()
    assert table.startswith(foreign)
    entry = [line for line in table.splitlines() if line.startswith("30 2 * * * ")]
    assert len(entry) == 1
    assert f"{ROOT}/sitebench nightly run --site {SITE} >> " in entry[0]
    # The settings inline, or from nightly.env where the line would pass cron's limit (a
    # longer temporary path, under a test worker's directory, or more settings, do that).
    sites_root = f"SITEBENCH_SITES_ROOT={night_env['tmp'] / 'sites'}"
    if f"cd {ROOT} && env " in entry[0]:
        assert sites_root in entry[0]
    else:
        settings = schedule.env_file(night_env["logs"])
        assert entry[0].startswith(f"30 2 * * * cd {ROOT} && . {settings} && ")
        assert f"export {sites_root}\n" in settings.read_text()
    # The site's signing key for publishing is made once, its public half printed.
    key = Path(os.environ["SITEBENCH_CONFIG_HOME"]) / "keys" / SITE
    assert "signing key:" in first.stdout and "made now" in first.stdout
    assert Path(f"{key}.pub").read_text().strip() in first.stdout
    again = sitebench("nightly", "install", "--site", SITE, "--at", "04:00")
    assert again.returncode == 2 and "already installed" in again.stderr
    assert "--force" in again.stderr and crontab() == table
    forced = sitebench("nightly", "install", "--site", SITE, "--at", "04:05", "--force")
    assert forced.returncode == 0, forced.stderr
    table = crontab()
    assert "\n5 4 * * * " in table and "\n30 2 * * * " not in table and foreign in table
    status = sitebench("nightly", "status", "--site", SITE)
    assert status.returncode == 0 and "schedule: cron" in status.stdout
    nxt = when.next_start(4, 5)
    assert f"next start: {nxt:%Y-%m-%d %H:%M}" in status.stdout
    removed = sitebench("nightly", "remove", "--site", SITE)
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert crontab() == foreign
    none = sitebench("nightly", "remove", "--site", SITE)
    assert none.returncode == 0 and "nothing to remove" in none.stdout


#: A second checkout of the same site on this machine: only its path matters to the schedule.
OTHER = Path("/srv/another checkout/sitebench")


def legacy_block(root, hour):
    """A cron entry as nightly install wrote it before checkouts were told apart."""
    return [
        f"# BEGIN sitebench nightly {SITE} (managed by ./sitebench nightly; do not edit)",
        f"0 {hour} * * * cd {shlex.quote(str(root))} && env PATH=/usr/bin "
        f"{shlex.quote(str(root / 'sitebench'))} nightly run --site {SITE} "
        f">> {shlex.quote(str(root / 'scheduled.log'))} 2>&1",
        f"# END sitebench nightly {SITE}",
    ]


@pytest.mark.reliability_fault
def test_two_checkouts_of_a_site_each_keep_their_own_cron_entry(
    night_env, real_crontab, monkeypatch
):
    subprocess.run(["crontab", "-r"], capture_output=True)
    first = sitebench("nightly", "install", "--site", SITE, "--at", "02:30")
    assert first.returncode == 0, first.stderr
    mine = crontab()
    monkeypatch.setattr(paths, "ROOT", OTHER)
    assert cron.installed(SITE) == []
    cron.install(SITE, 3, 40, schedule.command_line(SITE, night_env["tmp"] / "other-logs"))
    both = crontab()
    assert both.startswith(mine) and f"\n40 3 * * * cd {shlex.quote(str(OTHER))} && " in both
    assert f"checkout {OTHER}" in both  # its marker names it
    assert [(via, at) for via, _, at in status.entries(SITE)] == [("cron", (3, 40))]
    # This checkout's status, replace and remove see its own entry only.
    status_here = sitebench("nightly", "status", "--site", SITE)
    assert "\n    30 2 * * * " in status_here.stdout and "40 3 * * *" not in status_here.stdout
    assert f"also scheduled from another checkout (cron): {OTHER}\n" in status_here.stdout
    assert cron.remove(SITE) and crontab() == mine
    forced = sitebench("nightly", "install", "--site", SITE, "--at", "04:05", "--force")
    assert forced.returncode == 0, forced.stderr
    cron.install(SITE, 3, 40, schedule.command_line(SITE, night_env["tmp"] / "other-logs"))
    removed = sitebench("nightly", "remove", "--site", SITE)
    assert removed.returncode == 0 and "removed" in removed.stdout
    table = crontab()
    assert "40 3 * * *" in table and "5 4 * * *" not in table


@pytest.mark.reliability_fault
def test_an_entry_from_before_checkouts_were_told_apart_is_replaced_and_removed(
    night_env, real_crontab
):
    theirs, mine = legacy_block(OTHER, 1), legacy_block(ROOT, 2)
    subprocess.run(["crontab", "-"], input="\n".join(theirs + mine) + "\n", text=True, check=True)
    shown = sitebench("nightly", "status", "--site", SITE)
    assert mine[1] in shown.stdout and theirs[1] not in shown.stdout
    again = sitebench("nightly", "install", "--site", SITE, "--at", "04:00")
    assert again.returncode == 2 and "already installed" in again.stderr
    forced = sitebench("nightly", "install", "--site", SITE, "--at", "04:00", "--force")
    assert forced.returncode == 0, forced.stderr
    table = crontab()
    assert table.startswith("\n".join(theirs) + "\n") and mine[1] not in table
    assert "\n0 4 * * * " in table
    removed = sitebench("nightly", "remove", "--site", SITE)
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert crontab() == "\n".join(theirs) + "\n"
    mine_again = sitebench("nightly", "remove", "--site", SITE)
    assert "nothing to remove" in mine_again.stdout and crontab() == "\n".join(theirs) + "\n"


@pytest.mark.reliability_fault
def test_two_checkouts_of_a_site_each_keep_their_own_systemd_units(night_env, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(night_env["tmp"] / "config"))
    monkeypatch.setattr(systemd, "systemctl", lambda system, *a: (False, "not booted"))
    systemd.install(SITE, 1, 5, night_env["logs"])
    mine = systemd.installed(SITE)
    assert len(mine) == 2
    monkeypatch.setattr(paths, "ROOT", OTHER)
    assert systemd.installed(SITE) == []
    systemd.install(SITE, 2, 5, night_env["tmp"] / "other-logs")
    theirs = systemd.installed(SITE)
    assert len(theirs) == 2 and not set(theirs) & set(mine)
    assert f"WorkingDirectory={OTHER}\n" in theirs[0].read_text()
    assert ("systemd (user)", str(ROOT)) in status.elsewhere(SITE)
    monkeypatch.setattr(paths, "ROOT", ROOT)
    assert ("systemd (user)", str(OTHER)) in status.elsewhere(SITE)
    monkeypatch.setattr(paths, "ROOT", OTHER)
    assert systemd.remove(SITE) and not any(p.exists() for p in theirs)
    assert all(p.exists() for p in mine)
    monkeypatch.setattr(paths, "ROOT", ROOT)
    assert systemd.remove(SITE) and not any(p.exists() for p in mine)


@pytest.mark.reliability_fault
@pytest.mark.parametrize("owner", ["this checkout", "another checkout"])
def test_systemd_units_from_before_checkouts_were_told_apart(night_env, monkeypatch, owner):
    """Units named by the site alone (sitebench-nightly-<site>) are this checkout's when
    their WorkingDirectory is this checkout: replaced with --force and removed; another
    checkout's are left alone."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(night_env["tmp"] / "config"))
    monkeypatch.setattr(systemd, "systemctl", lambda system, *a: (False, "not booted"))
    root = ROOT if owner == "this checkout" else OTHER
    old = systemd.unit_dir(False) / f"sitebench-nightly-{SITE}"
    old.parent.mkdir(parents=True)
    old.with_suffix(".service").write_text(
        f"{systemd.MARK}\n[Service]\nWorkingDirectory={root}\nExecStart={root}/sitebench\n"
    )
    old.with_suffix(".timer").write_text(f"{systemd.MARK}\n[Timer]\nOnCalendar=*-*-* 01:00:00\n")
    legacy = [old.with_suffix(".service"), old.with_suffix(".timer")]
    if owner == "this checkout":
        assert sorted(systemd.installed(SITE)) == sorted(legacy)
        with pytest.raises(SitebenchError, match="already installed"):
            systemd.install(SITE, 2, 5, night_env["logs"])
        systemd.install(SITE, 2, 5, night_env["logs"], force=True)
        assert not any(p.exists() for p in legacy)
        assert systemd.remove(SITE) and systemd.installed(SITE) == []
    else:
        assert systemd.installed(SITE) == []
        systemd.install(SITE, 2, 5, night_env["logs"])
        assert systemd.remove(SITE) and all(p.exists() for p in legacy)


FAKE_SCRONTAB = """#!/bin/sh
# The tests' scrontab: -l, -r and FILE on the table in $FAKE_SCRONTAB_TABLE.
table="$FAKE_SCRONTAB_TABLE"
case "$1" in
  -l) [ -f "$table" ] && exec cat "$table"; echo "no crontab for $(id -un)" >&2; exit 1 ;;
  -r) rm -f "$table" ;;
  *) cp "$1" "$table" ;;
esac
"""


@pytest.mark.reliability_fault
def test_two_checkouts_of_a_site_each_keep_their_own_scrontab_entry(night_env, monkeypatch):
    bin_dir = night_env["tmp"] / "bin"
    bin_dir.mkdir()
    (bin_dir / "scrontab").write_text(FAKE_SCRONTAB)
    (bin_dir / "scrontab").chmod(0o755)
    table = night_env["tmp"] / "scrontab-table"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SCRONTAB_TABLE", str(table))
    scrontab.install(SITE, 2, 30, schedule.command_line(SITE, night_env["logs"]), False, "debug")
    mine = table.read_text()
    monkeypatch.setattr(paths, "ROOT", OTHER)
    assert scrontab.installed(SITE) == []
    scrontab.install(SITE, 3, 40, schedule.command_line(SITE, night_env["tmp"] / "other-logs"))
    both = table.read_text()
    assert both.startswith(mine) and f"\n40 3 * * * cd {shlex.quote(str(OTHER))} && " in both
    jobs = [line for line in both.splitlines() if line.startswith("#SCRON --job-name=")]
    assert len(jobs) == 2 and len({j.split()[1] for j in jobs}) == 2, jobs
    assert scrontab.remove(SITE) and table.read_text() == mine


@pytest.mark.reliability_input
@pytest.mark.parametrize("at", ["25:00", "02:60", "2:3", "noon", "", "02:30:00", "-1:00"])
def test_a_malformed_time_is_refused(night_env, at):
    proc = sitebench("nightly", "install", "--site", SITE, f"--at={at}")
    assert proc.returncode == 2
    assert f"malformed time {at!r}: expected HH:MM" in proc.stderr


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "via, program, package",
    [
        ("cron", "crontab", "cron"),
        ("systemd", "systemctl", "systemd"),
        ("scrontab", "scrontab", "slurm-client"),
    ],
)
def test_a_missing_scheduler_names_its_debian_package(night_env, via, program, package):
    empty = night_env["tmp"] / "empty-bin"
    empty.mkdir()
    for action in (["install", "--at", "02:00"], ["remove"]):
        proc = sitebench(
            "nightly",
            action[0],
            "--site",
            SITE,
            *action[1:],
            "--via",
            via,
            env={"PATH": str(empty)},
        )
        assert proc.returncode == 2
        assert f"{program} is not on this machine" in proc.stderr
        assert f"apt-get install {package}" in proc.stderr


def test_next_start():
    now = datetime(2026, 11, 24, 2, 30, 0).astimezone()
    assert when.next_start(2, 30, now) == now + timedelta(days=1)
    assert when.next_start(2, 31, now) == now + timedelta(minutes=1)
    assert when.next_start(0, 0, now).day == 25


@pytest.fixture
def verify():
    tool = shutil.which("systemd-analyze")
    if not tool:
        pytest.skip("SYSTEMD-ANALYZE NOT INSTALLED: apt-get install systemd")
    return tool


@pytest.mark.parametrize("system", [False, True])
def test_systemd_units_pass_systemd_analyze_verify(night_env, verify, system, monkeypatch):
    home = night_env["tmp"] / "config"
    env = {"XDG_CONFIG_HOME": str(home)}
    if system:
        # System units go to /etc/systemd/system: written there by the test's own
        # function into a temporary copy of that directory.
        monkeypatch.setattr(systemd, "unit_dir", lambda system: home / "system")
        monkeypatch.setattr(systemd, "systemctl", lambda system, *a: (False, "not booted"))
        where, notes = systemd.install(
            SITE, 1, 5, night_env["logs"], "quick", ["-n", "StreamCheck"], system=True
        )
        assert "not booted" in notes[0] and "systemctl daemon-reload" in notes[0]
        units = systemd.files(SITE, True)
    else:
        proc = sitebench(
            "nightly",
            "install",
            "--site",
            SITE,
            "--at",
            "01:05",
            "--via",
            "systemd",
            "--toolchain",
            first_local_toolchain(),
            "--",
            "-n",
            "StreamCheck",
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        name = f"sitebench-nightly-{SITE}-{schedule.checkout_key()}"
        units = (home / f"systemd/user/{name}.service", home / f"systemd/user/{name}.timer")
    service, timer = (p.read_text() for p in units)
    assert "OnCalendar=*-*-* 01:05:00" in timer
    named = "" if system else f'"--toolchain" "{first_local_toolchain()}" '
    assert (
        f'ExecStart="{ROOT}/sitebench" "nightly" "run" "--site" "{SITE}" {named}"--" "-n"'
        in service
    )
    assert f"StandardOutput=append:{night_env['logs']}/scheduled.log" in service
    proc = subprocess.run([verify, "verify", *map(str, units)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # The check can fail: a unit systemd would refuse.
    bad = night_env["tmp"] / "bad.service"
    bad.write_text(service.replace(f'ExecStart="{ROOT}/sitebench"', "ExecStart=sitebench"))
    proc = subprocess.run([verify, "verify", str(bad)], capture_output=True, text=True)
    assert proc.returncode != 0
    if not system:
        again = sitebench(
            "nightly", "install", "--site", SITE, "--at", "03:00", "--via", "systemd", env=env
        )
        assert again.returncode == 2 and "already installed" in again.stderr
        status = sitebench("nightly", "status", "--site", SITE, env=env)
        assert "schedule: systemd (user)" in status.stdout
        gone = sitebench("nightly", "remove", "--site", SITE, "--via", "systemd", env=env)
        assert gone.returncode == 0 and not any(p.exists() for p in units)


def test_the_scheduled_line_passes_on_the_settings(night_env, monkeypatch):
    # The settings inline, however long this test's paths make them (the file form: below).
    monkeypatch.setattr(schedule, "LINE_LIMIT", 10_000)
    monkeypatch.setenv("SLURM_CONF", "/tmp/x y/slurm.conf")
    line = schedule.command_line(SITE, night_env["logs"], "full", ["-n", "StreamCheck"])
    assert line.startswith(f"cd {ROOT} && env PATH=")
    assert "'SLURM_CONF=/tmp/x y/slurm.conf'" in line or "SLURM_CONF='/tmp/x y/" in line
    assert f"--site {SITE} --scale full -- -n StreamCheck >> {night_env['logs']}" in line
    # The toolchains are named on the line, never passed on hidden in the environment.
    monkeypatch.setenv(toolchains.SELECTED, "gcc-mpich")
    line = schedule.command_line(SITE, night_env["logs"], "quick", [], ["gcc-mpich"])
    assert f"--site {SITE} --toolchain gcc-mpich >> " in line
    assert toolchains.SELECTED not in line


def test_a_line_too_long_for_cron_takes_its_settings_from_a_private_file(
    night_env, real_crontab, monkeypatch
):
    """A module-based cluster's PATH alone passes cron's 1000 characters ("command too
    long"): the settings go to nightly.env (mode 0600) and the line sources it."""
    long_path = ":".join(f"/opt/modules/apps/compiler{i}/bin" for i in range(40))
    monkeypatch.setenv("PATH", long_path + ":" + os.environ["PATH"])
    monkeypatch.setenv("SLURM_CONF", "/tmp/x y/slurm.conf")
    line = schedule.command_line(SITE, night_env["logs"])
    settings = schedule.env_file(night_env["logs"])
    assert len(line) <= schedule.LINE_LIMIT < 1000
    assert line.startswith(f"cd {ROOT} && . {settings} && ") and "PATH" not in line
    assert settings.stat().st_mode & 0o777 == 0o600
    shown = subprocess.run(
        ["sh", "-c", f". {settings} && printenv PATH SLURM_CONF"],
        capture_output=True,
        text=True,
        env={},
    ).stdout.splitlines()
    assert shown == [os.environ["PATH"], "/tmp/x y/slurm.conf"]
    # cron takes the table with it (the inline line was refused: "command too long").
    subprocess.run(["crontab", "-r"], capture_output=True)
    cron.install(SITE, 2, 30, line)
    assert f". {settings} && " in crontab()


# -- fired for real -----------------------------------------------------------------------


@pytest.fixture
def cron_daemon(real_crontab):
    """start() -> a Debian cron daemon in the foreground, stopped at the end of the test."""
    exe = shutil.which("cron")
    if not exe:
        pytest.skip("CRON DAEMON NOT INSTALLED: apt-get install cron")
    if subprocess.run(["pidof", "cron"], capture_output=True).returncode == 0:
        pytest.skip("a cron daemon already runs on this machine; not starting a second one")
    started = []

    def start():
        proc = subprocess.Popen([exe, "-f"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)
    assert subprocess.run(["pidof", "cron"], capture_output=True).returncode != 0


def next_minute():
    """A start time cron fires within about a minute (never one it could miss)."""
    now = datetime.now()
    if now.second > 50:
        time.sleep(61 - now.second)
        now = datetime.now()
    due = now + timedelta(minutes=1)
    return due.replace(second=0, microsecond=0)


def wait_for_verdict(directory, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        nights = logs.last_nights(directory)
        if nights and nights[-1].code is not None:
            return nights[-1]
        time.sleep(1)
    raise AssertionError(f"no night finished in {directory} within {timeout} s")


@pytest.mark.slow
def test_a_real_cron_daemon_fires_the_installed_night(night_env, cron_daemon, monkeypatch):
    """cron starts the installed line; the night it runs cannot start (no references), so
    it ends at once with exit 3, its log, the scheduled.log line and the alert."""
    # The line runs ./sitebench, whose venv lives in the state directory: the checkout's.
    monkeypatch.delenv("SITEBENCH_STATE_DIR")
    (night_env["tmp"] / "sites" / "site-configs" / SITE / "references.yaml").unlink()
    due = next_minute()
    installed = sitebench("nightly", "install", "--site", SITE, "--at", f"{due:%H:%M}")
    assert installed.returncode == 0, installed.stderr
    cron_daemon()
    try:
        night = wait_for_verdict(night_env["logs"], 150)
    finally:
        shutil.rmtree(ROOT / ".sitebench" / "nightly" / SITE, ignore_errors=True)
    assert night.code == codes.NOT_RUN and night.verdict == "could not run"
    assert "references.yaml' does not exist" in night.log.read_text()
    scheduled = (night_env["logs"] / "scheduled.log").read_text()
    assert f"sitebench nightly: {SITE}: could not run (exit 3); log {night.log}" in scheduled
    assert "could not run (exit 3)" in night_env["alerts"].read_text()


@pytest.mark.spack
@pytest.mark.slow
def test_cron_runs_a_real_night_end_to_end(spack, tmp_path, cron_daemon, monkeypatch):
    """A real night: cron starts ./sitebench nightly run on the local site with one
    cheap check (STREAM); the run is stored, judged, logged and passes or fails on its
    references, never 'could not run'."""
    night = install_real_night(tmp_path, monkeypatch)
    cron_daemon()
    real_night_stored(*night, "cron fired")


def install_real_night(tmp_path, monkeypatch, *via):
    """Install tonight's run of the local site, STREAM only in its first toolchain, due the
    next minute; return what :func:`real_night_stored` waits for."""
    results = tmp_path / "results"
    monkeypatch.setenv("SITEBENCH_RESULTS_DIR", str(results))
    monkeypatch.delenv("SITEBENCH_SITES_ROOT", raising=False)
    directory = logs.logs_dir("local", Site.resolve("local").settings)
    existed = (ROOT / ".sitebench" / "nightly" / "local").exists()
    before = set(logs.night_logs(directory))
    due = next_minute()
    installed = sitebench(
        "nightly",
        "install",
        "--site",
        "local",
        "--at",
        f"{due:%H:%M}",
        *via,
        "--toolchain",
        first_local_toolchain(),
        "--",
        "-n",
        "StreamCheck",
    )
    assert installed.returncode == 0, installed.stderr
    return directory, before, results, existed, due


def real_night_stored(directory, before, results, existed, due, said):
    """Wait for the night a scheduler started in ``directory``; check it ran the suite and
    stored its run under ``results``, never 'could not run'."""
    ours = ROOT / ".sitebench" / "nightly" / "local"
    deadline = time.time() + 1800
    while not set(logs.night_logs(directory)) - before:
        assert time.time() < deadline, "the scheduler did not start the night"
        time.sleep(1)
    (new,) = set(logs.night_logs(directory)) - before
    try:
        while logs.read_night(new).code is None:
            assert time.time() < deadline, new.read_text()[-4000:]
            time.sleep(5)
        night, text = logs.read_night(new), new.read_text()
        assert night.code in (codes.PASSED, codes.FAILED), text[-4000:]
        runs = [p for p in (results / "local").iterdir() if not p.name.startswith(".")]
        assert len(runs) == 1 and f"==> stored {runs[0]}" in text
        report = json.loads((runs[0] / "report.json").read_text())
        checks = {c["name"].split()[0] for r in report["runs"] for c in r["testcases"]}
        assert "StreamCheck" in checks
        # The toolchain named at install time, through the scheduler, to ReFrame.
        first = first_local_toolchain()
        assert f", toolchains {first}," in text.splitlines()[0], text.splitlines()[0]
        assert {c["environ"] for r in report["runs"] for c in r["testcases"]} == {first}
        assert "not published: no results remote configured" in text
        took = (
            new.stat().st_mtime
            - datetime.strptime(night.started, "%Y-%m-%d %H:%M:%S UTC")
            .replace(tzinfo=timezone.utc)
            .timestamp()
        )
        print(f"{said} {due:%H:%M}: night started {night.started}, {night.verdict}, {took:.1f} s")
    finally:
        new.unlink(missing_ok=True)
        if not existed:
            shutil.rmtree(ours, ignore_errors=True)


def slurm_skip_reason():
    from sitebench.services.slurm.cluster import missing_programs

    missing = missing_programs()
    if missing:
        return (
            f"SLURM NOT INSTALLED: missing {', '.join(missing)}; "
            f"apt-get install {' '.join(sorted(set(missing.values())))}"
        )
    return None


@pytest.fixture
def slurm_cluster():
    reason = slurm_skip_reason()
    if reason:
        pytest.skip(reason)
    from sitebench.services.slurm.cluster import LocalCluster

    root = Path(tempfile.mkdtemp(prefix="sb-scron."))
    root.chmod(0o755)
    cluster = LocalCluster(root / "c")
    cluster.start(nodes=1, accounting="none", port=16827, owner=os.getpid())
    yield cluster
    cluster.stop()
    assert not cluster.running()
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slurm
def test_the_private_cluster_enables_scrontab(slurm_cluster):
    proc = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, env=slurm_cluster.env()
    )
    assert proc.returncode == 0, proc.stderr
    assert any(
        line.split("=")[0].strip() == "ScronParameters" and line.split("=")[1].strip() == "enable"
        for line in proc.stdout.splitlines()
        if "=" in line
    ), proc.stdout


@pytest.fixture(scope="module")
def scrontab_dir():
    """A directory holding ``scrontab``: the installed one's, else one the tests build once
    from Debian's source of the installed Slurm (Debian 12 ships none; tests/scrontab_built.py).
    Module-scoped, so the build happens before the test takes the Slurm cluster's lock."""
    if shutil.which("scrontab"):
        return Path(shutil.which("scrontab")).parent
    import scrontab_built

    try:
        return scrontab_built.scrontab().parent
    except scrontab_built.Unavailable as err:
        pytest.skip(f"SCRONTAB NOT AVAILABLE: Debian 12's slurm-client ships none, and {err}")


@pytest.mark.slurm
@pytest.mark.spack
@pytest.mark.slow
def test_a_real_scrontab_entry_runs_a_real_night(
    scrontab_dir, spack, tmp_path, slurm_cluster, monkeypatch
):
    """Slurm's scrontab starts ./sitebench nightly run on the local site with one cheap
    check (STREAM) as a job of the private cluster; the run is stored and judged."""
    monkeypatch.setenv("PATH", f"{scrontab_dir}:{os.environ['PATH']}")
    for key, value in slurm_cluster.env().items():
        monkeypatch.setenv(key, value)
    night = install_real_night(tmp_path, monkeypatch, "--via", "scrontab")
    try:
        real_night_stored(*night, "scrontab due")
    finally:
        sitebench("nightly", "remove", "--site", "local", "--via", "scrontab")
