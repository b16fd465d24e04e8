"""A private MariaDB server for one benchmark job: started, used by commands, stopped.

The job runs this module as its executable::

    python -m sitebench.services.mariadb_server --prefix /usr --workdir . --database sbtest \\
        --step sysbench-prepare 'sysbench ... --mysql-socket=@socket@ ... prepare' \\
        --step sysbench-run '...'

It creates a data directory (``mariadb-install-db``) in the work directory,
starts ``mariadbd --no-defaults --skip-networking`` on it with a unix socket
only, waits until the server answers, creates the database, runs each step
with ``@socket@`` and ``@user@`` replaced (output in ``<workdir>/<step>.txt``),
then stops the server with ``mariadb-admin shutdown`` and waits until the
process has gone. The server is stopped on every path: a step that failed, a
server that does not answer, SIGTERM from the scheduler (ReFrame kills the
job's whole process group, the server included, if the grace period is over).

This process is the server's parent, so it knows how the server ended: a
server that died while a step ran (killed, crashed) is recorded with its exit
status, and the next steps are not run. Everything is recorded in
``<workdir>/mariadb-status.json`` (rewritten at each phase) for the check's
sanity; the server's own log is ``<workdir>/mariadb.err``.

Authentication: ``unix_socket``. ``mariadb-install-db`` makes the OS user that
runs it (root, or the user) a passwordless account of the server, reachable
only through the socket; ``@user@`` is that name. There is no TCP listener.

Socket path: Linux limits a unix socket path to 107 bytes (``sun_path[108]``
with its NUL) and ReFrame stage paths can be longer. The socket is
``<workdir>/mysqld.sock`` when that fits; otherwise it is made in a new
private directory ``$TMPDIR/sitebench-mdb.XXXXXXXX`` (``/tmp`` by default, mode
0700), ``<workdir>/mysqld.sock`` is a symbolic link to it, the status records
both, and the directory is removed when the server has stopped or died.
"""

import argparse
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DATADIR = "datadir"
ERROR_LOG = "mariadb.err"
INSTALL_LOG = "mariadb-install-db.log"
PID_FILE = "mariadb.pid"
SOCKET = "mysqld.sock"
STATUS_FILE = "mariadb-status.json"
#: After a step failed: how long the server may take to be reaped before it counts as alive.
SETTLE_S = 2.0

_STEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

#: Longest unix socket path Linux accepts: sun_path is 108 bytes with the final NUL.
SOCKET_PATH_MAX = 107

# Where each program lives in a MariaDB prefix, preferred name first
# (distributions and Spack's mariadb differ; MariaDB < 10.5 has only the mysql* names).
_PROGRAMS = {
    "server": ("sbin/mariadbd", "bin/mariadbd", "sbin/mysqld", "bin/mysqld", "libexec/mysqld"),
    "install_db": (
        "bin/mariadb-install-db",
        "scripts/mariadb-install-db",
        "bin/mysql_install_db",
        "scripts/mysql_install_db",
    ),
    "admin": ("bin/mariadb-admin", "bin/mysqladmin"),
    "client": ("bin/mariadb", "bin/mysql"),
}


class ServerError(RuntimeError):
    """The private server could not be set up, started or stopped; says why."""


@dataclass
class Binaries:
    prefix: Path
    server: Path
    install_db: Path
    admin: Path
    client: Path


def find_binaries(prefix):
    """The server, install, admin and client programs of a MariaDB prefix, or a ServerError
    naming each missing one and where it was looked for."""
    prefix = Path(prefix)
    found, missing = {}, []
    for role, candidates in _PROGRAMS.items():
        path = next((prefix / c for c in candidates if os.access(prefix / c, os.X_OK)), None)
        if path is None:
            missing.append(f"{candidates[0].split('/')[-1]} (looked for {', '.join(candidates)})")
        found[role] = path
    if missing:
        raise ServerError(
            f"the MariaDB prefix {prefix} lacks {'; '.join(missing)}: install the MariaDB "
            f"server there (Debian: apt-get install mariadb-server) or point the site's "
            f"mariadb external at a prefix that has it"
        )
    return Binaries(prefix=prefix, **found)


def os_user():
    """The OS user running this process: the server's unix_socket account."""
    return pwd.getpwuid(os.geteuid()).pw_name


def choose_socket(workdir):
    """(socket path, private temp dir or None): the work directory when the path fits."""
    wanted = Path(workdir).absolute() / SOCKET
    if len(os.fsencode(wanted)) <= SOCKET_PATH_MAX:
        return wanted, None
    short = Path(tempfile.mkdtemp(prefix="sitebench-mdb."))
    if len(os.fsencode(short / SOCKET)) > SOCKET_PATH_MAX:
        shutil.rmtree(short)
        raise ServerError(
            f"no unix socket path of at most {SOCKET_PATH_MAX} bytes: the work directory "
            f"and the temporary directory ({short.parent}) are both too deep; set TMPDIR to a "
            f"short directory"
        )
    wanted.unlink(missing_ok=True)
    wanted.symlink_to(short / SOCKET)
    return short / SOCKET, short


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_exit(code):
    """A server's exit status in words ("killed by SIGKILL", "exited with status 1")."""
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {_signal_name(-code)}"
    return f"exited with status {code}"


def log_tail(path, lines=10):
    """The last ``lines`` lines of a log file, or a note that it is missing."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return f"(no {Path(path).name})"
    return "\n".join(text.rstrip().splitlines()[-lines:])


class MariadbServer:
    """One mariadbd on its own data directory in ``workdir``, reachable by unix socket only."""

    def __init__(self, binaries, workdir, options=(), start_timeout=60, stop_timeout=120):
        self.bin = binaries
        self.workdir = Path(workdir).absolute()
        self.options = list(options)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.datadir = self.workdir / DATADIR
        self.log = self.workdir / ERROR_LOG
        self.pid_file = self.workdir / PID_FILE
        self.user = os_user()
        self.socket = None
        self.socket_dir = None
        self.proc = None

    def _run_as(self):
        # mariadbd refuses to run as root unless told to.
        return ["--user=root"] if os.geteuid() == 0 else []

    def install(self):
        """A fresh data directory; its log in ``mariadb-install-db.log``."""
        if self.datadir.exists():
            raise ServerError(f"{self.datadir} exists already: the server needs a fresh one")
        cmd = [
            str(self.bin.install_db),
            "--no-defaults",
            *self._run_as(),
            f"--basedir={self.bin.prefix}",
            f"--datadir={self.datadir}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ]
        with open(self.workdir / INSTALL_LOG, "w") as out:
            code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
        if code != 0:
            raise ServerError(
                f"mariadb-install-db failed with status {code}; last lines of {INSTALL_LOG}:\n"
                + log_tail(self.workdir / INSTALL_LOG)
            )

    def start(self):
        """Start the server and wait until it answers; ServerError (with its log) if not."""
        self.socket, self.socket_dir = choose_socket(self.workdir)
        cmd = [
            str(self.bin.server),
            "--no-defaults",
            *self._run_as(),
            f"--basedir={self.bin.prefix}",
            f"--datadir={self.datadir}",
            f"--socket={self.socket}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.log}",
            "--skip-networking",
            *self.options,
        ]
        # Same process group as this job: a scheduler that kills the job kills the server.
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + self.start_timeout
        while not self.answers():
            if self.proc.poll() is not None:
                raise ServerError(
                    f"mariadbd {describe_exit(self.proc.returncode)} while starting; last "
                    f"lines of {ERROR_LOG}:\n{log_tail(self.log)}"
                )
            if time.monotonic() > deadline:
                raise ServerError(
                    f"mariadbd did not answer on {self.socket} within {self.start_timeout} s; "
                    f"last lines of {ERROR_LOG}:\n{log_tail(self.log)}"
                )
            time.sleep(0.2)

    def _admin(self, *args, timeout=60):
        return subprocess.run(
            [str(self.bin.admin), "--no-defaults", f"--socket={self.socket}", f"-u{self.user}"]
            + list(args),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def answers(self):
        try:
            return self._admin("ping", timeout=30).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def alive(self, settle_s=0.0):
        """Whether the server still runs. ``settle_s``: first wait up to that long for it to
        exit. A client sees its connection drop while the kernel is still tearing a killed
        server down, before its exit can be reaped; without the wait a step that failed
        because the server died can find it still "alive"."""
        if self.proc is None:
            return False
        try:
            self.proc.wait(timeout=settle_s) if settle_s else None
        except subprocess.TimeoutExpired:
            pass
        return self.proc.poll() is None

    def sql(self, statement):
        proc = subprocess.run(
            [
                str(self.bin.client),
                "--no-defaults",
                f"--socket={self.socket}",
                f"-u{self.user}",
                "-e",
                statement,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise ServerError(f"SQL {statement!r} failed: {proc.stderr.strip()}")
        return proc.stdout

    def stop(self):
        """Shut down with mariadb-admin, wait for the process to go; (clean, how).

        Signals only if the shutdown did not end it in ``stop_timeout`` seconds;
        that is not a clean stop. The private socket directory goes in any case.
        """
        try:
            return self._shutdown()
        finally:
            if self.socket_dir is not None:
                shutil.rmtree(self.socket_dir, ignore_errors=True)

    def _shutdown(self):
        if self.proc is None:
            return True, "never started"
        if self.proc.poll() is not None:
            return False, describe_exit(self.proc.returncode)
        try:
            admin = self._admin("shutdown", timeout=self.stop_timeout)
            asked = admin.returncode == 0
        except subprocess.TimeoutExpired:
            asked = False
        try:
            # A server that refused the shutdown is not waited for.
            code = self.proc.wait(timeout=self.stop_timeout if asked else 0.1)
            how = f"mariadb-admin shutdown: {describe_exit(code)}"
            clean = asked and code == 0
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            clean = False
            how = (
                f"mariadb-admin shutdown {'did not end it' if asked else 'failed'}, then "
                f"SIGTERM: {describe_exit(self.proc.returncode)}"
            )
        return clean, how


def _fill(arg, fields):
    for key, value in fields.items():
        arg = arg.replace(f"@{key}@", value)
    return arg


def _signal_to_exit(signum, frame):
    # SIGTERM from the scheduler: unwind through the finally blocks that stop the server.
    raise SystemExit(128 + signum)


def _write_status(workdir, status):
    path = Path(workdir) / STATUS_FILE
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(status, indent=2) + "\n")
    tmp.replace(path)


def run(binaries, workdir, steps, database=None, options=(), start_timeout=60, stop_timeout=120):
    """Serve ``steps`` [(name, argv)] from a private server; the final status dict.

    Each step's output is ``<workdir>/<name>.txt``. A step that fails, or a
    server that dies, ends the sequence. The status is also written to
    ``<workdir>/mariadb-status.json`` at each phase.
    """
    workdir = Path(workdir).absolute()
    server = MariadbServer(binaries, workdir, options, start_timeout, stop_timeout)
    status = {
        "prefix": str(binaries.prefix),
        "server": str(binaries.server),
        "phase": "install",
        "error": None,
        "socket": None,
        "socket_link": None,
        "pid": None,
        "steps": [],
        "died_during": None,
        "exit": None,
        "alive_after_steps": None,
        "stopped_cleanly": None,
        "stop": None,
        "log": ERROR_LOG,
    }
    _write_status(workdir, status)
    child = None
    try:
        began = time.monotonic()
        server.install()
        status.update(phase="start", install_s=round(time.monotonic() - began, 2))
        _write_status(workdir, status)
        started = time.monotonic()
        server.start()
        status.update(
            phase="steps",
            socket=str(server.socket),
            socket_link=str(workdir / SOCKET) if server.socket_dir else None,
            pid=server.proc.pid,
            start_s=round(time.monotonic() - started, 2),
        )
        _write_status(workdir, status)
        print(f"mariadbd ready: pid {server.proc.pid}, socket {server.socket}", flush=True)
        if database:
            server.sql(f"CREATE DATABASE `{database}`")
        fields = {"socket": str(server.socket), "user": server.user}
        for name, argv in steps:
            argv = [_fill(arg, fields) for arg in argv]
            print(f"+ {shlex.join(argv)} > {name}.txt", flush=True)
            record = {"name": name, "argv": argv, "exit": None}
            status["steps"].append(record)
            _write_status(workdir, status)
            began = time.monotonic()
            with open(workdir / f"{name}.txt", "w") as out:
                try:
                    child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
                except OSError as err:
                    status["error"] = f"step '{name}' could not start: {err}"
                    break
                record["exit"] = child.wait()
                child = None
            record["seconds"] = round(time.monotonic() - began, 2)
            _write_status(workdir, status)
            # A failed step may be the server's death seen first by its client.
            if not server.alive(settle_s=SETTLE_S if record["exit"] != 0 else 0.0):
                status["died_during"] = name
                break
            if record["exit"] != 0:
                break
        status["alive_after_steps"] = server.alive()
    except ServerError as err:
        status["error"] = f"MariaDB server: {err}"
    except (SystemExit, KeyboardInterrupt) as err:
        how = _signal_name(err.code - 128) if isinstance(err, SystemExit) else "SIGINT"
        status["error"] = (
            f"the job was stopped by {how} (cancelled or out of time) in phase "
            f"'{status['phase']}'"
        )
        raise
    finally:
        if signal.getsignal(signal.SIGTERM) is _signal_to_exit:
            # A second SIGTERM must not cut the shutdown short.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if child is not None:
            child.terminate()
            child.wait()
        status["phase"] = "stop"
        _write_status(workdir, status)
        began = time.monotonic()
        clean, how = server.stop()
        status.update(
            phase="done",
            stop_s=round(time.monotonic() - began, 2),
            exit=server.proc.returncode if server.proc else None,
            stopped_cleanly=clean,
            stop=how,
        )
        _write_status(workdir, status)
        print(f"mariadbd stopped: {how}", flush=True)
    return status


def succeeded(status):
    """True when the server served every step, each exited 0, and it stopped cleanly."""
    return bool(
        status.get("error") is None
        and status.get("alive_after_steps")
        and status.get("stopped_cleanly")
        and all(step.get("exit") == 0 for step in status.get("steps", []))
    )


def load_status(workdir):
    """The status a run left in ``workdir``; ServerError when there is none."""
    path = Path(workdir) / STATUS_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ServerError(
            f"no {STATUS_FILE} in {workdir}: the MariaDB driver did not start "
            f"(see the job's stderr)"
        ) from None
    except json.JSONDecodeError as err:
        raise ServerError(f"{path} is not valid JSON: {err}") from None


def failure(status, workdir, log_lines=10):
    """Why a run failed, in one message naming the cause; None when it did not fail."""
    if status.get("error"):
        return status["error"]
    if status.get("phase") != "done":
        return (
            f"the MariaDB driver stopped in phase '{status.get('phase')}' without "
            f"finishing (killed?); last lines of its error log:\n"
            + log_tail(Path(workdir) / ERROR_LOG, log_lines)
        )
    if status.get("died_during") or not status.get("alive_after_steps"):
        when = (
            f"while step '{status['died_during']}' ran"
            if status.get("died_during")
            else "after the steps"
        )
        return (
            f"MariaDB server died during the run: {describe_exit(status.get('exit'))} {when}; "
            f"last lines of its error log "
            f"({ERROR_LOG}, kept in the stage directory):\n"
            + log_tail(Path(workdir) / ERROR_LOG, log_lines)
        )
    for step in status.get("steps", []):
        if step.get("exit") != 0:
            return (
                f"step '{step['name']}' exited with status {step.get('exit')}: "
                f"see {step['name']}.txt"
            )
    if not status.get("stopped_cleanly"):
        return f"MariaDB server did not shut down cleanly: {status.get('stop')}"
    return None


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m sitebench.services.mariadb_server",
        description="Run commands against a private MariaDB server (unix socket only).",
    )
    parser.add_argument("--prefix", required=True, help="MariaDB installation prefix")
    parser.add_argument("--workdir", default=".", help="where datadir, socket and logs go")
    parser.add_argument("--database", help="database to create before the steps")
    parser.add_argument(
        "--server-option",
        action="append",
        default=[],
        help="extra mariadbd option (repeatable): --server-option=--innodb-buffer-pool-size=512M",
    )
    parser.add_argument("--start-timeout", type=float, default=60)
    parser.add_argument("--stop-timeout", type=float, default=120)
    parser.add_argument(
        "--step",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "COMMAND"),
        help="a command (shell words; @socket@ and @user@ replaced), output in NAME.txt",
    )
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _signal_to_exit)
    try:
        binaries = find_binaries(args.prefix)
    except ServerError as err:
        _write_status(
            args.workdir, {"phase": "done", "error": f"MariaDB server: {err}", "steps": []}
        )
        print(f"error: {err}", file=sys.stderr)
        return 2
    bad = [name for name, _ in args.step if not _STEP_NAME.fullmatch(name)]
    if bad:
        print(
            f"error: step names must be letters, digits, '-', '_' or '.': {bad}", file=sys.stderr
        )
        return 2
    steps = [(name, shlex.split(command)) for name, command in args.step]
    status = run(
        binaries,
        args.workdir,
        steps,
        database=args.database,
        options=args.server_option,
        start_timeout=args.start_timeout,
        stop_timeout=args.stop_timeout,
    )
    reason = failure(status, args.workdir)
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
