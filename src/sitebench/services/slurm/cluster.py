"""Start, inspect and stop a private Slurm cluster on this machine.

Debian's ``slurm-wlm``, ``slurmdbd`` and ``munge``, with everything (keys, sockets,
state, logs, pid files, the accounting database) in one directory, default
``.sitebench/slurm``. One node is this host on loopback; several nodes each live in their
own network namespace (see :mod:`sitebench.services.slurm.netns`). Accounting is slurmdbd on a
private MariaDB (unix socket only), so ``sacct`` and ReFrame's ``slurm`` backend work as
on a real site; ``--accounting none`` leaves it out (ReFrame's ``squeue`` backend only).
"""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic
from sitebench.services import programs
from sitebench.services.mariadb_server import find_binaries, log_tail
from sitebench.services.slurm import netns, owners
from sitebench.services.slurm.config import Cluster, Layout, plan, slurm_conf, slurmdbd_conf

PROGRAMS = {
    "slurmctld": "slurm-wlm",
    "slurmd": "slurm-wlm",
    "sinfo": "slurm-client",
    "munged": "munge",
    "mungekey": "munge",
    "mariadbd": "mariadb-server",
}
#: Order of stopping: the nodes first (their jobs end), the database last but munge.
STOP_ORDER = ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged")


def default_dir():
    return Path(os.environ.get("SITEBENCH_SLURM_DIR", paths.state_dir() / "slurm"))


def missing_programs(accounting="slurmdbd"):
    wanted = dict(PROGRAMS)
    if accounting == "slurmdbd":
        wanted["slurmdbd"] = "slurmdbd"
    else:
        wanted.pop("mariadbd")
    return {p: pkg for p, pkg in wanted.items() if not programs.which(p)}


#: How a checkout uses a cluster started elsewhere (by an admin, from another checkout).
USE_ANOTHER = (
    "`export SITEBENCH_SLURM_DIR=DIR` with the directory it was started in (the admin's "
    "`./sitebench cluster start --dir DIR`, default <their checkout>/.sitebench/slurm): "
    "`./sitebench cluster status` then finds it, `./sitebench run --site local-slurm` runs "
    "on it and `eval $(./sitebench cluster env)` points sinfo and sbatch at it"
)


def needs_root():
    """Why this user cannot start the cluster (problem, fix), or None as root."""
    if os.geteuid() == 0:
        return None
    return (
        "the private Slurm cluster needs root: its daemons run as SlurmUser=root, slurmd "
        "starts each job as its user, and --nodes N > 1 makes network namespaces "
        "(CAP_NET_ADMIN, CAP_SYS_ADMIN)",
        "ask the admin to run `./sitebench cluster start` and `./sitebench cluster stop` as "
        "root (e.g. a sudo rule for those two); once it runs, point your checkout at it: "
        f"{USE_ANOTHER}; or run on the site's own Slurm: `./sitebench onboard NAME --slurm`",
    )


def client_env(layout, base=None):
    """The environment for sinfo, sbatch, sacct and ReFrame to talk to this cluster."""
    env = dict(os.environ if base is None else base)
    env["SLURM_CONF"] = str(layout.slurm_conf)
    return env


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_pid(path):
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _wait(what, ready, timeout, log=None, interval=0.2):
    deadline = time.monotonic() + timeout
    while True:
        if ready():
            return
        if time.monotonic() > deadline:
            tail = f"; last lines of {log}:\n{log_tail(log)}" if log else ""
            raise SitebenchError(f"{what} not ready within {timeout} s{tail}")
        time.sleep(interval)


def _run(cmd, what, env=None, log=None):
    # slurmctld, slurmd, munged... live in /usr/sbin, which PATH may lack.
    proc = subprocess.run(programs.resolved(cmd), capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = f"; last lines of {log}:\n{log_tail(log)}" if log else ""
        raise SitebenchError(
            f"{what} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()}{tail}"
        )
    return proc.stdout


def _port_free(address, port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address if address.startswith("127.") else "0.0.0.0", port))
        except OSError:
            return False
    return True


def host_cpus():
    return sorted(os.sched_getaffinity(0))


def host_memory_mb():
    # What slurmd -C reports as RealMemory: MemTotal in MiB.
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise SitebenchError("no MemTotal in /proc/meminfo")


class LocalCluster:
    def __init__(self, directory=None):
        self.layout = Layout(directory or default_dir())

    # -- what is running ---------------------------------------------------------------

    def cluster(self):
        """The cluster as started (cluster.json); None if none was started here."""
        try:
            return Cluster.from_json(self.layout.cluster_file.read_text())
        except FileNotFoundError:
            return None

    def daemons(self):
        """{label: pid or None} of every daemon this cluster has a pid file for."""
        found = {}
        cluster = self.cluster()
        names = [n.name for n in cluster.nodes] if cluster else []
        for daemon in STOP_ORDER:
            if daemon == "slurmd":
                for name in names:
                    found[f"slurmd {name}"] = read_pid(self.layout.pid_file("slurmd", name))
            else:
                found[daemon] = read_pid(self.layout.pid_file(daemon))
        return found

    def running(self):
        return {label: pid for label, pid in self.daemons().items() if pid and _alive(pid)}

    def env(self):
        return client_env(self.layout)

    def sinfo(self):
        proc = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, env=self.env()
        )
        if proc.returncode != 0:
            return {}
        return dict(line.split()[:2] for line in proc.stdout.splitlines() if line.strip())

    # -- start -------------------------------------------------------------------------

    def start(
        self,
        nodes=1,
        accounting="slurmdbd",
        port=None,
        subnet=None,
        cpus_per_node=None,
        owner=None,
    ):
        """Start the cluster; with ``owner`` (a pid, e.g. a test run's), the next start
        stops it if that process has exited without stopping it."""
        root = needs_root()
        if root:
            raise SitebenchError(*root)
        missing = missing_programs(accounting)
        if missing:
            raise SitebenchError(
                f"Slurm programs missing: {', '.join(missing)}",
                f"apt-get install {' '.join(sorted(set(missing.values())))}",
            )
        stop_orphaned()
        if self.running():
            raise SitebenchError(
                f"a cluster is already running from {self.layout.root}: "
                f"{', '.join(self.running())}",
                "./sitebench cluster stop (or use another --dir)",
            )
        if nodes > 1:
            why = netns.unavailable()
            if why:
                raise SitebenchError(f"cannot make {nodes} nodes on this machine: {why}")
        try:
            cluster = plan(
                nodes,
                socket.gethostname().split(".")[0],
                host_cpus(),
                host_memory_mb(),
                port=port or 6817,
                subnet=subnet or "10.213.0.0/24",
                accounting=accounting,
                db_password=secrets.token_hex(12),
                cpus_per_node=cpus_per_node,
            )
        except ValueError as err:  # a cluster this machine cannot hold: say so, no traceback
            raise SitebenchError(str(err), "./sitebench cluster start --help") from None
        busy = [
            f"{d} port {p}"
            for d, p in cluster.ports.items()
            if (d != "slurmdbd" or accounting == "slurmdbd")
            and not _port_free(cluster.controller_address, p)
        ]
        if busy:
            owned = [
                f"{o.root} (started for process {o.owner_pid}, still running)"
                for o in owners.recorded()
            ]
            raise SitebenchError(
                f"in use: {', '.join(busy)} (another Slurm on this machine?"
                + (f" clusters of live runs: {'; '.join(owned)}" if owned else "")
                + ")",
                "stop it, or pick other ports with --port (3 ports from it are used)",
            )
        if nodes > 1:
            left = netns.existing(cluster)
            if left:
                raise SitebenchError(
                    f"{', '.join(left)} exist already (another cluster, or one not stopped)",
                    "./sitebench cluster stop (with that cluster's --dir)",
                )
        self._fresh_dirs()
        write_atomic(self.layout.cluster_file, cluster.to_json())
        if owner is not None:  # before any daemon: an owner killed mid-start leaves none
            owners.record(self.layout.root, owner)
        try:
            if nodes > 1:
                netns.create(cluster)
            self._start_munge()
            self._write_configs(cluster)
            if accounting == "slurmdbd":
                self._start_database(cluster)
                self._start_slurmdbd(cluster)
            self._start_slurmctld(cluster)
            for node in cluster.nodes:
                self._start_slurmd(node)
            _wait(
                f"nodes {', '.join(n.name for n in cluster.nodes)} idle",
                lambda: set(self.sinfo().values()) == {"idle"}
                and len(self.sinfo()) == len(cluster.nodes),
                60,
                self.layout.log / "slurmctld.log",
            )
        except BaseException:
            self.stop()
            raise
        return cluster

    def _fresh_dirs(self):
        lay = self.layout
        closed = [p for p in lay.root.parents if p.exists() and not p.stat().st_mode & 0o001]
        if closed:
            raise SitebenchError(
                f"munged needs every directory above its socket searchable by all users; "
                f"{closed[0]} is not",
                f"chmod o+x {closed[0]}, or choose another --dir",
            )
        # State, spool and logs of an earlier cluster would mix job ids and records.
        for sub in (
            lay.state,
            lay.spool,
            lay.run,
            lay.etc,
            lay.db,
            lay.munge_socket_dir,
            lay.root / "nodes",
        ):
            shutil.rmtree(sub, ignore_errors=True)
        old_logs = lay.log
        if old_logs.is_dir() and any(old_logs.iterdir()):
            keep = lay.root / f"log.{time.strftime('%Y%m%dT%H%M%S')}"
            old_logs.rename(keep)  # an earlier cluster's logs are kept, not overwritten
        for sub in (lay.etc, lay.state, lay.spool, lay.log, lay.run, lay.db):
            sub.mkdir(parents=True, exist_ok=True)
        lay.root.chmod(0o755)  # munged wants every directory above its socket searchable
        lay.munge_key_dir.mkdir(mode=0o700, exist_ok=True)
        lay.munge_key_dir.chmod(0o700)
        lay.munge_socket_dir.mkdir(mode=0o755)

    def _start_munge(self):
        lay = self.layout
        if not lay.munge_key.exists():
            _run(["mungekey", "--create", f"--keyfile={lay.munge_key}"], "mungekey")
        lay.munge_key.chmod(0o600)
        _run(
            [
                "munged",
                f"--key-file={lay.munge_key}",
                f"--socket={lay.munge_socket}",
                f"--pid-file={lay.pid_file('munged')}",
                f"--log-file={lay.log}/munged.log",
                f"--seed-file={lay.munge_key_dir}/munged.seed",
            ],
            "munged",
            log=lay.log / "munged.log",
        )
        cred = _run(["munge", "-S", str(lay.munge_socket), "-n"], "munge self-test")
        proc = subprocess.run(
            ["unmunge", "-S", str(lay.munge_socket)], input=cred, capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise SitebenchError(f"munge self-test failed: {proc.stdout}{proc.stderr}")

    def _write_configs(self, cluster):
        lay = self.layout
        write_atomic(lay.slurm_conf, slurm_conf(cluster, lay))
        if cluster.accounting == "slurmdbd":
            write_atomic(lay.slurmdbd_conf, slurmdbd_conf(cluster, lay))
            lay.slurmdbd_conf.chmod(0o600)  # slurmdbd refuses a readable one

    def _db_socket(self):
        return self.layout.db / "mysqld.sock"

    def _start_database(self, cluster):
        lay = self.layout
        binaries = find_binaries(Path(programs.which("mariadbd")).resolve().parents[1])
        datadir = lay.db / "datadir"
        root_flag = ["--user=root"] if os.geteuid() == 0 else []
        with open(lay.log / "mariadb-install-db.log", "w") as out:
            code = subprocess.run(
                [
                    str(binaries.install_db),
                    "--no-defaults",
                    *root_flag,
                    f"--basedir={binaries.prefix}",
                    f"--datadir={datadir}",
                    "--auth-root-authentication-method=socket",
                    "--skip-test-db",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            ).returncode
        if code:
            raise SitebenchError(
                f"mariadb-install-db failed ({code}):\n"
                + log_tail(lay.log / "mariadb-install-db.log")
            )
        subprocess.Popen(
            [
                str(binaries.server),
                "--no-defaults",
                *root_flag,
                f"--basedir={binaries.prefix}",
                f"--datadir={datadir}",
                f"--socket={self._db_socket()}",
                f"--pid-file={lay.pid_file('mariadbd')}",
                f"--log-error={lay.log}/mariadb.err",
                "--skip-networking",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this command, like the Slurm daemons
        )
        admin = [str(binaries.admin), "--no-defaults", f"--socket={self._db_socket()}", "-uroot"]
        _wait(
            "MariaDB for slurmdbd",
            lambda: subprocess.run(admin + ["ping"], capture_output=True).returncode == 0,
            60,
            lay.log / "mariadb.err",
        )
        sql = (
            f"CREATE USER 'slurm'@'localhost' IDENTIFIED BY '{cluster.db_password}'; "
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
        )
        _run(
            [
                str(binaries.client),
                "--no-defaults",
                f"--socket={self._db_socket()}",
                "-uroot",
                "-e",
                sql,
            ],
            "creating slurmdbd's database user",
        )

    def _start_slurmdbd(self, cluster):
        lay = self.layout
        env = client_env(lay)
        env["MYSQL_UNIX_PORT"] = str(self._db_socket())
        _run(["slurmdbd"], "slurmdbd", env=env, log=lay.log / "slurmdbd.log")
        port = cluster.ports["slurmdbd"]
        _wait(
            f"slurmdbd on port {port}",
            lambda: not _port_free(cluster.controller_address, port),
            60,
            lay.log / "slurmdbd.log",
        )

    def _start_slurmctld(self, cluster):
        lay = self.layout
        log = lay.log / "slurmctld.log"
        _run(["slurmctld", "-f", str(lay.slurm_conf)], "slurmctld", log=log)
        _wait(
            "slurmctld",
            lambda: "is UP"
            in subprocess.run(
                ["scontrol", "ping"], capture_output=True, text=True, env=self.env()
            ).stdout,
            60,
            log,
        )

    def _start_slurmd(self, node):
        lay = self.layout
        argv = programs.resolved(["slurmd", "-f", str(lay.slurm_conf), "-N", node.name])
        if node.netns:
            tmp = lay.node_tmp(node.name)
            tmp.mkdir(parents=True, exist_ok=True)
            tmp.chmod(0o1777)
            argv = netns.node_command(node, argv)
        _run(argv, f"slurmd of {node.name}", log=lay.log / f"slurmd-{node.name}.log")

    # -- a node's slurmd, for fault tests ----------------------------------------------

    def kill_node(self, name, sig=signal.SIGKILL):
        """Stop one node's slurmd (and the job steps under it), as a node failure does."""
        cluster = self.cluster()
        node = next((n for n in cluster.nodes if n.name == name), None) if cluster else None
        if node is None:
            raise SitebenchError(f"no node {name!r} in the cluster of {self.layout.root}")
        pid = read_pid(self.layout.pid_file("slurmd", name))
        victims = [pid] if pid and _alive(pid) else []
        if node.netns:
            victims += [p for p in netns.pids(node) if p not in victims]
        for p in victims:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        return victims

    # -- stop --------------------------------------------------------------------------

    def stop(self, timeout=15):
        """Stop every daemon (TERM, KILL after ``timeout`` s), the jobs and the node
        namespaces; return what was stopped. Raises if a process survives."""
        lay = self.layout
        cluster = self.cluster()
        stopped = []
        if "slurmctld" in self.running():
            subprocess.run(
                ["scancel", "--full", "--user=root"], capture_output=True, env=self.env()
            )
        running = self.running()
        for daemon in STOP_ORDER:
            for label, pid in running.items():
                if label.split()[0] != daemon:
                    continue
                if daemon == "mariadbd":
                    subprocess.run(
                        [
                            "mariadb-admin",
                            "--no-defaults",
                            f"--socket={self._db_socket()}",
                            "-uroot",
                            "shutdown",
                        ],
                        capture_output=True,
                    )
                else:
                    _signal(pid, signal.SIGTERM)
                if not _gone(pid, timeout):
                    _signal(pid, signal.SIGKILL)
                    _gone(pid, 5)
                    label += " (killed)"
                stopped.append(label)
        left = []
        if cluster:
            for node in cluster.nodes:
                if node.netns:
                    for pid in netns.pids(node):
                        _signal(pid, signal.SIGKILL)
                        left.append(pid)
            if cluster.bridge:
                time.sleep(0.2 if left else 0)
                netns.destroy(cluster)
        survivors = self.running()
        if survivors:
            raise SitebenchError(
                f"still running after stop: {survivors}", f"kill them; logs in {lay.log}"
            )
        if left:
            stopped.append(f"{len(left)} leftover job processes (killed)")
        owners.forget(lay.root)
        return stopped

    def _drop_reused_pids(self):
        """Remove the pid files whose process is no daemon of this cluster (the daemon
        died, its pid went to another process), so that stop() signals only its own."""
        for pid_file in self.layout.run.glob("*.pid"):
            pid = read_pid(pid_file)
            if pid and _alive(pid) and not _belongs(pid, self.layout.root):
                pid_file.unlink()


def stop_orphaned():
    """Stop every cluster started for a process that has exited without stopping it
    (a killed test run); return their directories. Clusters of live owners, clusters
    started with no owner and any other Slurm are left alone."""
    stopped = []
    for owned in owners.orphaned():
        cluster = LocalCluster(owned.root)
        cluster._drop_reused_pids()
        cluster.stop()
        stopped.append(owned.root)
    return stopped


def _belongs(pid, root):
    """Whether process ``pid`` is one of the cluster's in ``root``: every daemon names a
    file under it on its command line (slurmctld's and slurmd's -f, munged's --socket,
    mariadbd's --datadir) or in its environment (slurmdbd's SLURM_CONF)."""
    mark = os.fsencode(str(root) + "/")
    for part in ("cmdline", "environ"):
        try:
            if mark in Path(f"/proc/{pid}/{part}").read_bytes():
                return True
        except OSError:
            pass
    return False


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _gone(pid, timeout):
    deadline = time.monotonic() + timeout
    while _alive(pid):
        # Our own children (none normally) are reaped so they do not linger as zombies.
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if _zombie(pid):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _zombie(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return False
