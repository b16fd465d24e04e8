"""NPB 3.4.3 (MPI), sysbench 1.0.20 on MariaDB and the OSU micro-benchmarks 7.2.

Each is built by Spack into a throw-away install tree (``build_in_temp_env``: the local
site's externals, sources from the offline mirror, checksums enforced), then small cases run
that check their own results:

* NPB: the sitebench ``npb`` recipe (the builtin one with CG, EP, FT, IS, LU, MG in classes
  S..C as defaults), built for classes S and W; every class-S benchmark with 1 and 2 MPI
  ranks must print ``Verification    =               SUCCESSFUL``.
* sysbench: the builtin recipe, built from source against the machine's MariaDB (an external
  that ``sitebench detect`` registers); ``oltp_read_write`` on a private MariaDB server
  started for the test and shut down cleanly afterwards.
* OSU: the sitebench recipe (the builtin one plus ``git``), built from a git commit,
  ``osu-micro-benchmarks@git.b7fc8c5...=7.2``. The release tarball (sha256 1a4e1f2a..., kept
  as the builtin 7.2 version for sites with internet) is not available offline; the only copy
  is a release import, ``yqin/osu-micro-benchmarks`` branch ``release/7.2`` at commit
  b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0. The mirror holds it where Spack 1.1 looks for a
  git commit, ``_source-cache/git/yqin/osu-micro-benchmarks.git/<commit>.tar.gz``. A git
  source has no checksum, so the test checks that the archive's files are exactly the
  commit's tree (git tree id), that Spack looks for it there, and builds it from the mirror
  with an empty source cache; the built benchmarks must report themselves as v7.2 and
  measure every message size from 1 B to 16 MiB with 2 ranks.
"""

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, build_in_temp_env
from sitebench.discovery import local_site
from sitebench.parsers import osu as osu_parser

# The source mirror this site was given (no default: a test must not assume a machine).
MIRROR = Path(os.environ.get("SITEBENCH_MIRROR", "").removeprefix("file://"))

#: Open MPI as root, shared memory only, ranks not pinned (the cores are shared).
MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_pml": "ob1",
}

NPB_NAMES = ("cg", "ep", "ft", "is", "lu", "mg")
NPB_SPEC = f"npb@3.4.3 implementation=mpi names={','.join(NPB_NAMES)} classes=S,W"

OSU_COMMIT = "b7fc8c578f1777023ce8a5d41c17f9b0ff0748f0"
OSU_SPEC = f"osu-micro-benchmarks@git.{OSU_COMMIT}=7.2"
# `git rev-parse b7fc8c5^{tree}` in the yqin/osu-micro-benchmarks snapshot.
OSU_TREE = "37e3ac77c39aab7d1e8feb67570357f21c942b0d"
OSU_ARCHIVE = f"_source-cache/git/yqin/osu-micro-benchmarks.git/{OSU_COMMIT}.tar.gz"
# The builtin recipe's release tarball, which must stay the 7.2 version for online sites.
OSU_RELEASE_SHA256 = "1a4e1f2aab0e65404b3414e23bd46616184b69b6231ce9313d9c630bd6e633c1"


def installed(store, name):
    """Prefix and concrete nodes (name -> node) of the one installed ``name`` in ``store``."""
    prefixes = [
        p for p in store.glob(f"**/{name}-*") if p.is_dir() and (p / ".spack/spec.json").is_file()
    ]
    prefixes = [p for p in prefixes if p.name.rsplit("-", 2)[0] == name]
    assert len(prefixes) == 1, f"expected one {name} in {store}, found {prefixes}"
    spec = json.loads((prefixes[0] / ".spack/spec.json").read_text())
    return prefixes[0], {node["name"]: node for node in spec["spec"]["nodes"]}


def mpirun(nodes, ranks, exe, *args, cwd=None, timeout=600):
    """Run ``exe`` under the mpirun of the MPI the package was built with."""
    launcher = Path(nodes["openmpi"]["external"]["path"]) / "bin/mpirun"
    proc = subprocess.run(
        [str(launcher), "-np", str(ranks), "--bind-to", "none", str(exe), *args],
        env={**os.environ, **MPI_ENV},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{exe.name} with {ranks} ranks:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


# -- NPB ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def npb(spack, tmp_path_factory):
    store = build_in_temp_env(spack, tmp_path_factory.mktemp("npb"), [NPB_SPEC])
    return installed(store, "npb")


@pytest.mark.spack
@pytest.mark.slow
def test_npb_builds_the_requested_benchmarks_only(npb):
    prefix, nodes = npb
    built = sorted(p.name for p in (prefix / "bin").iterdir())
    assert built == sorted(f"{n}.{c}.x" for n in NPB_NAMES for c in "SW")
    assert nodes["npb"]["version"] == "3.4.3"
    assert nodes["openmpi"].get("external"), "NPB must use the site's MPI"


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("name", NPB_NAMES)
def test_npb_class_s_verifies(npb, tmp_path, name, ranks):
    prefix, nodes = npb
    out = mpirun(nodes, ranks, prefix / f"bin/{name}.S.x", cwd=tmp_path)
    assert "Verification    =               SUCCESSFUL" in out, out
    assert re.search(r"Class\s+=\s+S\b", out)
    assert re.search(rf"Total processes\s+=\s+{ranks}\b", out)
    assert re.search(r"Version\s+=\s+3\.4\.3\b", out)
    if name != "is":  # IS is C; the others show the Fortran flags gfortran 12 needs
        assert re.search(r"FFLAGS\s+=.*-fallow-argument-mismatch", out), out


# -- sysbench on MariaDB ------------------------------------------------------------------


def test_mariadb_external_detection(tmp_path, monkeypatch):
    """``sitebench detect`` registers a distribution MariaDB for ``sysbench ^mariadb``."""
    for sub, program, banner in (
        ("sbin", "mariadbd", "mariadbd  Ver 10.6.7-MariaDB-2ubuntu1 for debian-linux-gnu"),
        ("bin", "mariadb", "mariadb  Ver 15.1 Distrib 10.5.23-MariaDB, for Linux (x86_64)"),
    ):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / program).write_text(f"#!/bin/sh\necho '{banner} ...'\n")
        (tmp_path / sub / program).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'sbin'}:{tmp_path / 'bin'}:{os.environ['PATH']}")
    want = {"buildable": False, "externals": [{"spec": "mariadb@10.6.7", "prefix": str(tmp_path)}]}
    assert local_site._mariadb_external() == want
    (tmp_path / "sbin/mariadbd").unlink()  # client only: the version of its library
    real_which = shutil.which

    def which(cmd, path=None):
        return None if cmd == "mariadbd" else real_which(cmd, path=path)

    monkeypatch.setattr(local_site.shutil, "which", which)
    want["externals"][0]["spec"] = "mariadb@10.5.23"
    assert local_site._mariadb_external() == want
    monkeypatch.setattr(local_site.shutil, "which", lambda cmd, path=None: None)
    assert local_site._mariadb_external() is None


@pytest.fixture(scope="module")
def sysbench(spack, tmp_path_factory):
    local_site.detect(spack)
    site = yaml.safe_load((local_site.spack_dir() / "packages.yaml").read_text())["packages"]
    if not site.get("mariadb", {}).get("externals"):
        pytest.skip(
            "MARIADB NOT DETECTED: apt-get install mariadb-server libmariadb-dev "
            "libmariadb-dev-compat, then ./sitebench detect --redetect"
        )
    if not shutil.which("mysql_config"):
        pytest.skip("NO mysql_config: apt-get install libmariadb-dev libmariadb-dev-compat")
    store = build_in_temp_env(
        spack, tmp_path_factory.mktemp("sysbench"), ["sysbench@1.0.20 ^mariadb"]
    )
    return installed(store, "sysbench")


def _mariadb_server_version():
    out = subprocess.run(
        [
            shutil.which("mariadbd", path="/usr/sbin:/usr/local/sbin:" + os.environ["PATH"]),
            "--version",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return re.search(r"\b(\d+\.\d+\.\d+)-MariaDB", out).group(1)


@pytest.mark.spack
@pytest.mark.slow
def test_sysbench_is_built_against_the_external_mariadb(sysbench):
    prefix, nodes = sysbench
    assert nodes["sysbench"]["version"] == "1.0.20"
    assert nodes["mariadb"]["external"]["path"] == "/usr"
    assert nodes["mariadb"]["version"] == _mariadb_server_version()
    exe = prefix / "bin/sysbench"
    assert subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.startswith(
        "sysbench 1.0.20"
    )
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    assert re.search(r"libmariadb\.so\.\d+ => /", ldd), ldd


def _admin(bindir, sock, user, *args, **kwargs):
    return subprocess.run(
        [bindir / "mariadb-admin", "--no-defaults", f"--socket={sock}", f"-u{user}", *args],
        capture_output=True,
        text=True,
        **kwargs,
    )


def _processes_using(path):
    """PIDs whose command line mentions ``path`` (the private server's directory)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if proc.name.isdigit() and str(path) in cmdline:
            pids.append(int(proc.name))
    return pids


@pytest.mark.spack
@pytest.mark.slow
def test_sysbench_oltp_read_write_on_a_private_mariadb(sysbench, tmp_path):
    """A private server as in os-services.md section 2: own datadir, unix socket only,
    --skip-networking, run as user mysql when the test runs as root.

    Its directory is a mkdtemp under /tmp rather than tmp_path: pytest keeps its temporary
    root (/tmp/pytest-of-<user>) at mode 0700 and resets it when a session starts, so the
    mysql user could not reach a datadir there. The directory is removed at the end and the
    server's error log copied to tmp_path.
    """
    prefix, nodes = sysbench
    bindir = Path(nodes["mariadb"]["external"]["path"]) / "bin"
    sbindir = bindir.parent / "sbin"
    mariadbd = next(p for p in (sbindir / "mariadbd", bindir / "mariadbd") if p.exists())
    as_root = os.geteuid() == 0
    user = "root" if as_root else os.environ.get("USER") or os.getlogin()
    run_as = ["--user=mysql"] if as_root else []

    top = Path(tempfile.mkdtemp(prefix="sitebench-mdb.", dir="/tmp"))
    if as_root:
        shutil.chown(top, "mysql", "mysql")
    top.chmod(0o750)
    datadir, sock, log = top / "data", top / "mysqld.sock", top / "error.log"
    server = None
    stopped_cleanly = False
    try:
        subprocess.run(
            [
                bindir / "mariadb-install-db",
                "--no-defaults",
                *run_as,
                f"--datadir={datadir}",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        server = subprocess.Popen(
            [
                mariadbd,
                "--no-defaults",
                *run_as,
                f"--datadir={datadir}",
                f"--socket={sock}",
                f"--pid-file={top / 'mysqld.pid'}",
                "--skip-networking",
                f"--log-error={log}",
                "--innodb-buffer-pool-size=512M",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while _admin(bindir, sock, user, "ping").returncode != 0:
            assert server.poll() is None, "mariadbd exited at start:\n" + log.read_text()
            assert time.monotonic() < deadline, "mariadbd did not answer within 60 s"
            time.sleep(0.25)
        subprocess.run(
            [
                bindir / "mariadb",
                "--no-defaults",
                f"--socket={sock}",
                f"-u{user}",
                "-e",
                "CREATE DATABASE sbtest; CREATE USER sbtest@localhost IDENTIFIED BY 'sbtest';"
                " GRANT ALL ON sbtest.* TO sbtest@localhost;",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        sb = [
            prefix / "bin/sysbench",
            "oltp_read_write",
            "--db-driver=mysql",
            f"--mysql-socket={sock}",
            "--mysql-user=sbtest",
            "--mysql-password=sbtest",
            "--mysql-db=sbtest",
            "--tables=1",
            "--table-size=10000",
        ]
        prep = subprocess.run([*sb, "prepare"], capture_output=True, text=True, timeout=300)
        assert prep.returncode == 0, prep.stdout + prep.stderr
        assert "Inserting 10000 records into 'sbtest1'" in prep.stdout, prep.stdout
        run = subprocess.run(
            [*sb, "--threads=1", "--time=3", "--percentile=95", "run"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        (tmp_path / "sysbench-run.txt").write_text(run.stdout + run.stderr)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "FATAL" not in run.stdout + run.stderr
        tx = re.search(r"transactions:\s+(\d+)\s+\((\S+) per sec\.\)", run.stdout)
        assert tx and int(tx.group(1)) > 0 and float(tx.group(2)) > 0, run.stdout
        assert re.search(r"ignored errors:\s+0\s+\(0\.00 per sec\.\)", run.stdout), run.stdout
        assert re.search(r"reconnects:\s+0\s+\(0\.00 per sec\.\)", run.stdout), run.stdout
        assert re.search(r"95th percentile:\s+\d+\.\d+", run.stdout), run.stdout
        assert re.search(r"total time:\s+3\.\d+s", run.stdout), run.stdout
    finally:
        if server is not None:
            _admin(bindir, sock, user, "shutdown", timeout=120)
            try:
                stopped_cleanly = server.wait(timeout=120) == 0
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        if log.is_file():
            shutil.copy(log, tmp_path / "mariadb-error.log")
        left = _processes_using(top)
        for pid in left:
            os.kill(pid, 9)
        shutil.rmtree(top, ignore_errors=True)
    assert stopped_cleanly, "mariadbd did not shut down cleanly: " + str(tmp_path)
    assert "Shutdown complete" in (tmp_path / "mariadb-error.log").read_text()
    assert not left, f"mariadbd processes left running: {left}"


# -- OSU micro-benchmarks -----------------------------------------------------------------


def osu_archive():
    if not os.environ.get("SITEBENCH_MIRROR"):
        pytest.skip("SITEBENCH_MIRROR not set: no local source mirror to check")
    archive = MIRROR / OSU_ARCHIVE
    if not archive.is_file():
        pytest.fail(f"{archive} missing: the OSU 7.2 sources are not in the mirror")
    return archive


def test_osu_mirror_archive_is_the_pinned_commit(tmp_path):
    """The archive's files are exactly the commit's tree (a git source has no checksum)."""
    with tarfile.open(osu_archive()) as tar:
        tops = {m.name.split("/")[0] for m in tar.getmembers()}
        assert tops == {"osu-micro-benchmarks"}  # one top directory, as Spack makes it
        tar.extractall(tmp_path, filter="data")
    tree = tmp_path / "osu-micro-benchmarks"
    # `spack mirror create` keeps the clone's .git; the archive made offline has none.
    shutil.rmtree(tree / ".git", ignore_errors=True)
    git = ["git", "-C", str(tree), "-c", "core.autocrlf=false"]
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run([*git, "add", "-A", "-f"], check=True)
    written = subprocess.run([*git, "write-tree"], capture_output=True, text=True, check=True)
    assert written.stdout.strip() == OSU_TREE
    assert "AC_INIT([OSU-Micro-Benchmarks], [7.2]," in (tree / "configure.ac").read_text()


@pytest.mark.spack
def test_spack_looks_for_osu_where_the_mirror_has_it(tmp_path, spack):
    """Spack's mirror layout for the pinned commit names the mirror's file; the release
    tarball stays the 7.2 version (sha256) for sites that can download it."""
    scope = tmp_path / "scope"
    scope.mkdir()
    (scope / "repos.yaml").write_text(
        f"repos:\n  sitebench: {ROOT / 'spack-repo/spack_repo/sitebench'}\n"
    )
    script = tmp_path / "paths.py"
    script.write_text(
        "import json\n"
        "import spack.fetch_strategy as fs, spack.mirrors.layout as layout, spack.repo\n"
        "import spack.spec\n"
        "from spack.version import Version\n"
        f"spec = spack.spec.Spec({OSU_SPEC!r})\n"
        "cls = spack.repo.PATH.get_pkg_class(spec.name)\n"
        "fetcher = fs.for_package_version(cls(spec))\n"
        "print(json.dumps({'path': layout.default_mirror_layout(fetcher, 'x').path,\n"
        "    'fetcher': type(fetcher).__name__, 'commit': fetcher.commit,\n"
        "    'namespace': cls.namespace, 'git': cls.git,\n"
        "    'release': cls.versions[Version('7.2')].get('sha256')}))\n"
    )
    proc = spack.run("-C", scope, "python", script, capture=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(found["path"]) == Path(OSU_ARCHIVE)
    assert found["fetcher"] == "GitFetchStrategy" and found["commit"] == OSU_COMMIT
    assert found["namespace"] == "sitebench"
    assert found["git"] == "https://github.com/yqin/osu-micro-benchmarks.git"
    assert found["release"] == OSU_RELEASE_SHA256
    osu_archive()


class _FreshSourceCache:
    """The session's Spack with a private source cache: the sources come from the mirror."""

    def __init__(self, spack, cache):
        self._spack, self._cache = spack, cache

    def run(self, *args, **kwargs):
        return self._spack.run("-c", f"config:source_cache:{self._cache}", *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._spack, name)


@pytest.fixture(scope="module")
def osu(spack, tmp_path_factory):
    osu_archive()
    top = tmp_path_factory.mktemp("osu")
    store = build_in_temp_env(_FreshSourceCache(spack, top / "cache"), top, [OSU_SPEC])
    return installed(store, "osu-micro-benchmarks")


@pytest.mark.spack
@pytest.mark.slow
def test_osu_is_built_from_the_pinned_commit(osu):
    prefix, nodes = osu
    node = nodes["osu-micro-benchmarks"]
    assert node["version"] == f"git.{OSU_COMMIT}=7.2"
    assert node["parameters"]["commit"] == OSU_COMMIT
    assert nodes["openmpi"].get("external"), "OSU must use the site's MPI"
    args = (prefix / ".spack/spack-configure-args.txt").read_text()
    assert "CC=" in args and "mpicc" in args


@pytest.mark.spack
@pytest.mark.slow
@pytest.mark.parametrize("program, kind", [("osu_latency", "Latency"), ("osu_bw", "Bandwidth")])
def test_osu_pt2pt_with_two_ranks(osu, tmp_path, program, kind):
    prefix, nodes = osu
    exe = prefix / "libexec/osu-micro-benchmarks/mpi/pt2pt" / program
    out = mpirun(nodes, 2, exe, "-m", "1:16777216", "-x", "2", "-i", "10", cwd=tmp_path)
    (tmp_path / f"{program}.txt").write_text(out)
    result = osu_parser.parse(out)
    assert (result.kind, result.version) == (kind, "7.2"), out
    assert osu_parser.missing_sizes(result, 1, 16777216) == [], out
