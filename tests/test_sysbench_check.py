"""sysbench OLTP on a private MariaDB: parser, server helper, sanity verdict and the check.

* The parser and the check's verdict run on real outputs (``fixtures/sysbench/``, its
  README says how each was made), passing and failing ones.
* The server helper (:mod:`sitebench.services.mariadb_server`) starts real servers from the
  machine's MariaDB (skips, saying so, without one): steps served, no TCP, socket path
  too long for a unix socket, a server killed mid-step, SIGTERM to the job, a server that
  cannot start. Every server a test starts is stopped by it; none may be left running.
* The check under ReFrame (markers ``spack``, ``slow``; needs sysbench installed in
  ``environments/local``): a short run passes with its four figures; a run whose server is
  killed mid-run fails naming the cause, with the server's log kept in the stage.
"""

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, unjudged
from sitebench.parsers import ParseError, sysbench
from sitebench.services import mariadb_server

FIX = FIXTURES / "sysbench"


def load_check():
    """reframe-checks/sysbench.py as a module (ReFrame's loader is not needed for it)."""
    spec = importlib.util.spec_from_file_location(
        "sysbench_check", ROOT / "reframe-checks/sysbench.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # ReFrame looks the class's file up through it
    spec.loader.exec_module(module)
    return module


check = load_check()


def readme_rows():
    """fixture path -> result cell, from the README table written when they were captured."""
    rows = {}
    for line in (FIX / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`") and cells[1].endswith("`"):
            rows[cells[1].strip("`")] = cells[-2]
    return rows


def test_every_fixture_is_documented():
    files = {str(p.relative_to(FIX)) for p in FIX.rglob("*") if p.is_file()} - {"README.md"}
    documented = set()
    for name in readme_rows():
        documented |= {f for f in files if f == name or f.startswith(name.rstrip("/") + "/")}
    assert files == documented, files ^ documented


# -- parser ------------------------------------------------------------------------------


def completed_runs():
    """(path, tps, qps, p95, errors) of every run whose README row records figures."""
    out = []
    for name, cell in readme_rows().items():
        m = re.search(r"tps ([\d.]+), qps ([\d.]+), p95 ([\d.]+) ms, errors (\d+)", cell)
        if m:
            path = FIX / name / "sysbench-run.txt" if name.endswith("/") else FIX / name
            out.append((path, *map(float, m.groups())))
    return out


@pytest.mark.parametrize(
    "path, tps, qps, p95, errors", completed_runs(), ids=lambda v: getattr(v, "name", "")
)
def test_run_figures_match_the_capture_notes(path, tps, qps, p95, errors):
    result = sysbench.parse(path.read_text())
    assert (result.tps, result.qps, result.latency_percentile_ms) == (tps, qps, p95)
    assert result.ignored_errors == errors and result.reconnects == 0
    assert result.percentile == 95 and result.transactions > 0


def test_completed_runs_are_covered():
    assert len(completed_runs()) >= 4  # two from the study, two from this check's own runs


def test_thread_count_and_time():
    t1 = sysbench.parse((FIX / "oltp_read_write_t1.txt").read_text())
    t2 = sysbench.parse((FIX / "oltp_read_write_t2.txt").read_text())
    assert (t1.threads, t2.threads) == (1, 2)
    assert t1.total_time_s == 30.0067 and t1.latency_max_ms == 37.94


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "path",
    [FIX / "oltp_read_write_server_killed.txt", FIX / "stage-server-killed/sysbench-run.txt"],
)
def test_killed_server_is_a_parse_error_naming_the_cause(path):
    with pytest.raises(ParseError, match=r"FATAL.*Lost connection to server during query"):
        sysbench.parse(path.read_text())


def test_ignored_errors_are_counted():
    result = sysbench.parse((FIX / "stage-ignored-errors/sysbench-run.txt").read_text())
    assert result.ignored_errors == 748 and result.threads == 8


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    "cut, message",
    [
        ("    queries:", "lack queries, ignored errors, reconnects"),
        ("General statistics:", "lack 'total time:'"),
        ("         95th percentile:", "percentile"),
        ("SQL statistics:", "no 'SQL statistics:' block"),
    ],
)
def test_truncated_run_is_a_parse_error(cut, message):
    text = (FIX / "oltp_read_write_t2.txt").read_text()
    with pytest.raises(ParseError, match=re.escape(message)):
        sysbench.parse(text[: text.index(cut)])


@pytest.mark.reliability_input
def test_empty_and_non_numeric_output():
    with pytest.raises(ParseError, match="empty"):
        sysbench.parse("\n")
    text = (
        (FIX / "oltp_read_write_t1.txt")
        .read_text()
        .replace("(1562.20 per sec.)", "(nan per sec.)")
    )
    with pytest.raises(ParseError, match="transactions per second is not a finite"):
        sysbench.parse(text)


def test_prepared_rows():
    assert sysbench.prepared_rows((FIX / "prepare_1m.txt").read_text()) == {"sbtest1": 1_000_000}
    with pytest.raises(ParseError, match='no "Inserting N records'):
        sysbench.prepared_rows("sysbench 1.0.20\n\nCreating table 'sbtest1'...\n")
    with pytest.raises(ParseError, match="prepare failed.*Lost connection"):
        sysbench.prepared_rows((FIX / "oltp_read_write_server_killed.txt").read_text())


# -- the check's verdict on real stage directories -----------------------------------------


def stage_copy(tmp_path, name):
    shutil.copytree(FIX / name, tmp_path / name)
    return tmp_path / name


def test_too_many_ignored_errors_name_the_share():
    found = check.verdict(FIX / "stage-ignored-errors", 8, 10, 1)
    assert "748 ignored errors" in found and "in 2382 transactions, more than 1 in 1000" in found


@pytest.mark.parametrize(
    "stage, threads, table_size, problem",
    [
        ("stage-quick-t1", 1, 100_000, None),
        ("stage-quick-t2", 2, 100_000, None),
        ("stage-quick-t1", 2, 100_000, "sysbench ran 1 threads, expected 2"),
        ("stage-quick-t2", 2, 1_000_000, "sysbench prepare inserted {'sbtest1': 100000}"),
        ("stage-ignored-errors", 8, 10, "sysbench counted 748 ignored errors (deadlocks"),
        # One deadlock in 27,223 transactions, retried by sysbench: the run stands.
        ("stage-one-deadlock", 2, 100_000, None),
        (
            "stage-server-killed",
            2,
            100_000,
            "MariaDB server died during the run: killed by SIGKILL while step 'sysbench-run'",
        ),
    ],
)
def test_verdict_on_real_runs(stage, threads, table_size, problem):
    found = check.verdict(FIX / stage, threads, table_size, 1)
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem), found


def test_verdict_of_a_killed_server_quotes_its_log():
    found = check.verdict(FIX / "stage-server-killed", 2, 100_000, 1)
    log_end = (FIX / "stage-server-killed/mariadb.err").read_text().strip().splitlines()[-1]
    assert found.endswith(log_end) and "mariadb.err, kept in the stage directory" in found


def test_verdict_without_status_or_outputs(tmp_path):
    assert "no mariadb-status.json" in check.verdict(tmp_path, 1, 100_000, 1)
    stage = stage_copy(tmp_path, "stage-quick-t1")
    (stage / "sysbench-run.txt").unlink()
    assert check.verdict(stage, 1, 100_000, 1) == (
        "sysbench-run.txt is missing: sysbench did not run (see rfm_job.err)"
    )
    status = json.loads((stage / "mariadb-status.json").read_text())
    status["steps"][-1]["exit"] = 1
    (stage / "mariadb-status.json").write_text(json.dumps(status))
    assert check.verdict(stage, 1, 100_000, 1).startswith(
        "step 'sysbench-run' exited with status 1"
    )
    status["stopped_cleanly"], status["stop"] = (
        False,
        "mariadb-admin shutdown failed, then SIGTERM",
    )
    (stage / "mariadb-status.json").write_text(json.dumps(status))
    assert "did not shut down cleanly" not in check.verdict(stage, 1, 100_000, 1)  # step first
    status["steps"][-1]["exit"] = 0
    (stage / "mariadb-status.json").write_text(json.dumps(status))
    assert check.verdict(stage, 1, 100_000, 1) == (
        "MariaDB server did not shut down cleanly: mariadb-admin shutdown failed, then SIGTERM"
    )


# -- the server helper on the machine's MariaDB --------------------------------------------


def mariadb_prefix():
    server = shutil.which("mariadbd", path="/usr/sbin:/usr/local/sbin:" + os.environ["PATH"])
    return Path(server).resolve().parent.parent if server else None


@pytest.fixture
def binaries():
    prefix = mariadb_prefix()
    if prefix is None:
        pytest.skip("MARIADB SERVER NOT INSTALLED: apt-get install mariadb-server")
    return mariadb_server.find_binaries(prefix)


def running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone as a server; only its parent's wait() is missing.
    return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


def servers_using(path):
    """PIDs of mariadbd processes whose command line names ``path``."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if proc.name.isdigit() and "mariadbd" in cmdline and str(path) in cmdline:
            pids.append(int(proc.name))
    return pids


@pytest.fixture
def no_server_left(tmp_path):
    """Fails a test that leaves a server of its tmp_path running, and kills it."""
    yield
    left = servers_using(tmp_path)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"mariadbd left running: {left}"


def client_step(binaries, sql):
    return [
        str(binaries.client),
        "--no-defaults",
        "--socket=@socket@",
        "-u@user@",
        "-N",
        "-e",
        sql,
    ]


def test_missing_programs_are_named(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/mariadb").write_text("#!/bin/sh\n")
    (tmp_path / "bin/mariadb").chmod(0o755)
    with pytest.raises(mariadb_server.ServerError) as err:
        mariadb_server.find_binaries(tmp_path)
    message = str(err.value)
    assert "lacks mariadbd (looked for sbin/mariadbd, bin/mariadbd" in message
    assert "mariadb-install-db" in message and "mariadb-admin" in message
    assert "lacks mariadb " not in message  # the client is there
    assert "apt-get install mariadb-server" in message


def test_driver_names_a_prefix_without_server(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "sitebench.services.mariadb_server", f"--prefix={tmp_path}"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "lacks mariadbd" in proc.stderr
    status = mariadb_server.load_status(tmp_path)
    assert mariadb_server.failure(status, tmp_path).startswith(
        "MariaDB server: the MariaDB prefix"
    )


@pytest.mark.reliability
def test_server_serves_steps_on_a_socket_only_and_stops(binaries, tmp_path, no_server_left):
    status = mariadb_server.run(
        binaries,
        tmp_path,
        [
            ("networking", client_step(binaries, "SELECT @@skip_networking, @@port")),
            ("database", client_step(binaries, "SHOW DATABASES LIKE 'sbtest'")),
        ],
        database="sbtest",
    )
    assert mariadb_server.succeeded(status) and mariadb_server.failure(status, tmp_path) is None
    assert (tmp_path / "networking.txt").read_text().split() == ["1", "0"]  # no TCP listener
    assert (tmp_path / "database.txt").read_text().strip() == "sbtest"
    assert status["socket"] == str(tmp_path / "mysqld.sock") and status["socket_link"] is None
    assert status["exit"] == 0 and status["stop"] == "mariadb-admin shutdown: exited with status 0"
    assert not running(status["pid"])
    assert "Shutdown complete" in (tmp_path / "mariadb.err").read_text()
    assert mariadb_server.load_status(tmp_path) == status


def test_socket_path_too_long_goes_to_a_short_private_dir(binaries, tmp_path, no_server_left):
    workdir = tmp_path / ("stage-" + "x" * 110)
    workdir.mkdir()
    assert len(str(workdir / "mysqld.sock")) > mariadb_server.SOCKET_PATH_MAX
    status = mariadb_server.run(binaries, workdir, [("ping", client_step(binaries, "SELECT 42"))])
    assert mariadb_server.succeeded(status), status
    assert (workdir / "ping.txt").read_text().strip() == "42"
    short = Path(status["socket"])
    assert len(str(short)) <= mariadb_server.SOCKET_PATH_MAX
    assert status["socket_link"] == str(workdir / "mysqld.sock")
    assert os.readlink(workdir / "mysqld.sock") == str(short)  # recorded in the stage
    assert not short.parent.exists()  # removed with the server


def start_driver(tmp_path, binaries, sql):
    """The driver as a job runs it, with one long client step; waits until that step runs."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sitebench.services.mariadb_server",
            f"--prefix={binaries.prefix}",
            f"--workdir={tmp_path}",
            "--step",
            "sleep",
            shlex.join(client_step(binaries, sql)),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            status = mariadb_server.load_status(tmp_path)
        except (mariadb_server.ServerError, OSError):
            status = {}
        if status.get("steps"):
            time.sleep(1)  # the client is connected and waiting in SLEEP()
            return proc, status
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the driver did not reach its step within 120 s")


@pytest.mark.reliability_fault
@pytest.mark.parametrize("socket_in", ["workdir", "short-dir"])
def test_server_killed_mid_step_is_reported_with_its_log(
    binaries, tmp_path, no_server_left, socket_in
):
    workdir = tmp_path if socket_in == "workdir" else tmp_path / ("stage-" + "x" * 110)
    workdir.mkdir(exist_ok=True)
    proc, status = start_driver(workdir, binaries, "SELECT SLEEP(60)")
    os.kill(status["pid"], signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    status = mariadb_server.load_status(workdir)
    assert (status["socket_link"] is None) == (socket_in == "workdir")
    assert Path(status["socket"]).parent.exists() == (socket_in == "workdir")
    assert status["died_during"] == "sleep" and status["exit"] == -signal.SIGKILL
    assert status["alive_after_steps"] is False and status["stopped_cleanly"] is False
    message = mariadb_server.failure(status, workdir)
    assert message.startswith(
        "MariaDB server died during the run: killed by SIGKILL while step 'sleep' ran"
    )
    assert "ready for connections" in message  # the log's last lines, kept in the workdir
    assert (workdir / "mariadb.err").is_file()
    assert "Lost connection" in (workdir / "sleep.txt").read_text()
    assert "error: MariaDB server died during the run" in err


@pytest.mark.reliability_fault
def test_a_step_that_fails_as_the_server_dies_names_that_step(binaries, tmp_path, no_server_left):
    """The step kills the server and exits at once, as a client does whose connection
    dropped: the server is then often not yet reaped (it was found "alive" and the death
    went unnamed before the driver waited for it)."""
    for round_ in range(3):
        workdir = tmp_path / f"round-{round_}"
        workdir.mkdir()
        pid_file = workdir / mariadb_server.PID_FILE
        kill_then_fail = f"kill -KILL $(cat {shlex.quote(str(pid_file))}); exit 3"
        status = mariadb_server.run(binaries, workdir, [("crash", ["sh", "-c", kill_then_fail])])
        assert status["steps"][0]["exit"] == 3, status
        assert status["died_during"] == "crash" and status["exit"] == -signal.SIGKILL, status
        assert mariadb_server.failure(status, workdir).startswith(
            "MariaDB server died during the run: killed by SIGKILL while step 'crash' ran"
        )


@pytest.mark.reliability_fault
def test_sigterm_to_the_job_stops_the_server_cleanly(binaries, tmp_path, no_server_left):
    proc, status = start_driver(tmp_path, binaries, "SELECT SLEEP(60)")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert time.monotonic() - started < 60  # the step was cut short, not waited for
    assert proc.returncode == 128 + signal.SIGTERM, out + err
    status = mariadb_server.load_status(tmp_path)
    assert status["phase"] == "done" and status["stopped_cleanly"] is True, status
    assert not running(status["pid"])
    assert mariadb_server.failure(status, tmp_path) == (
        "the job was stopped by SIGTERM (cancelled or out of time) in phase 'steps'"
    )


def test_step_that_cannot_start_is_named(binaries, tmp_path, no_server_left):
    status = mariadb_server.run(
        binaries, tmp_path, [("run", [str(tmp_path / "no-sysbench"), "run"]), ("next", ["true"])]
    )
    assert mariadb_server.failure(status, tmp_path) == (
        f"step 'run' could not start: [Errno 2] No such file or directory: "
        f"'{tmp_path / 'no-sysbench'}'"
    )
    assert [step["name"] for step in status["steps"]] == ["run"]  # the next never ran
    assert status["stopped_cleanly"] and not running(status["pid"])
    assert "Shutdown complete" in (tmp_path / "mariadb.err").read_text()


def test_server_that_cannot_start_names_why(binaries, tmp_path, no_server_left):
    status = mariadb_server.run(
        binaries, tmp_path, [("never", ["true"])], options=["--no-such-option"]
    )
    assert status["steps"] == [] and not (tmp_path / "never.txt").exists()
    message = mariadb_server.failure(status, tmp_path)
    assert message.startswith("MariaDB server: mariadbd exited with status"), message
    assert "while starting" in message and "no-such-option" in message


# -- the check under ReFrame -------------------------------------------------------------


@pytest.fixture(scope="module")
def reframe_env(spack):
    env_dir = ROOT / "environments/local"
    for spec in ("sysbench", "mariadb"):
        proc = spack.run("-e", env_dir, "location", "-i", spec, capture=True, check=False)
        if proc.returncode != 0:
            pytest.skip(
                f"{spec.upper()} NOT INSTALLED in environments/local: "
                f"./sitebench spack -e environments/local install"
            )
    return unjudged(spack)


def reframe(env, prefix, *args, background=False):
    cmd = [
        os.path.join(os.path.dirname(sys.executable), "reframe"),
        "-C",
        str(ROOT / "site-configs/local/reframe.py"),
        "-c",
        str(ROOT / "reframe-checks/sysbench.py"),
        "-n",
        r"SysbenchCheck.*threads=1$",
        "--tag",
        "quick",
        "--prefix",
        str(prefix),
        "--report-file",
        str(prefix / "report.json"),
        *args,
        "-r",
    ]
    if background:
        return subprocess.Popen(
            cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)


def the_case(prefix):
    report = json.loads((prefix / "report.json").read_text())
    return next(
        c for r in report["runs"] for c in r["testcases"] if c["name"].startswith("SysbenchCheck")
    )


@pytest.mark.spack
@pytest.mark.slow
def test_check_passes_with_its_figures(reframe_env, tmp_path, no_server_left):
    proc = reframe(reframe_env, tmp_path, "-S", "run_time=3", "-S", "table_size=10000")
    assert proc.returncode == 0, proc.stdout[-4000:]
    case = the_case(tmp_path)
    assert case["result"] == "pass"
    values = {k.split(":")[-1]: v[0] for k, v in case["perfvalues"].items()}
    assert set(values) == {"tps", "qps", "p95_latency", "errors"}
    assert values["tps"] > 0 and values["qps"] > values["tps"] and values["errors"] == 0
    assert case["table_size"] == 10000 and case["num_threads"] == 1
    assert "^mariadb@" in case["concrete_spec"] and case["concrete_spec"].startswith("sysbench@")
    out = next(tmp_path.glob("output/*/*/*/SysbenchCheck_*"))
    assert {"mariadb.err", "sysbench-run.txt", "mariadb-status.json"} <= {
        p.name for p in out.iterdir()
    }
    assert "Shutdown complete" in (out / "mariadb.err").read_text()


@pytest.mark.reliability_fault
@pytest.mark.spack
@pytest.mark.slow
def test_check_fails_naming_a_server_killed_mid_run(reframe_env, tmp_path, no_server_left):
    proc = reframe(
        reframe_env, tmp_path, "-S", "run_time=60", "-S", "table_size=10000", background=True
    )
    deadline = time.monotonic() + 300
    stage = None
    while time.monotonic() < deadline and proc.poll() is None:
        stages = list(tmp_path.glob("stage/*/*/*/SysbenchCheck_*"))
        run_out = stages[0] / "sysbench-run.txt" if stages else None
        if run_out and run_out.is_file() and "Threads started!" in run_out.read_text():
            stage = stages[0]
            break
        time.sleep(0.5)
    assert stage is not None, proc.communicate()[0][-4000:]
    time.sleep(2)
    pid = mariadb_server.load_status(stage)["pid"]
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=300)
    assert time.monotonic() - killed_at < 50, "the check waited for the full run time"
    assert proc.returncode != 0, out[-4000:]
    case = the_case(tmp_path)
    assert case["result"] == "fail" and case["fail_phase"] == "sanity"
    assert case["fail_reason"].startswith(
        "sanity error: MariaDB server died during the run: killed by SIGKILL while step "
        "'sysbench-run' ran; last lines of its error log"
    ), case["fail_reason"]
    assert "ready for connections" in case["fail_reason"]
    assert (stage / "mariadb.err").is_file()  # ReFrame keeps a failed case's stage
    assert not running(pid)
    socket = mariadb_server.load_status(stage)["socket"]
    if not socket.startswith(str(stage)):  # a stage path too long for a socket
        assert not Path(socket).parent.exists(), "the private socket directory was left"
