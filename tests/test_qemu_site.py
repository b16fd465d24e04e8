"""The emulated aarch64 site (src/sitebench/sites/qemu_site.py, site-configs/arm64-neoverse-n1).

Fast tests (no QEMU): the ``emulation:`` settings and their validation, the commands and
mounts of a run in the root, the provenance key, the checks the site's partition selects.
Slow tests (markers ``slow`` and ``qemu``): where the root was made and the suite built and
run in it, the binaries are aarch64 ELF with NEON and without SVE (the stated target
neoverse_n1), and the stored runs say they were emulated and passed; otherwise they skip,
saying exactly what is missing.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from sitebench.sites.site import Site
from sitebench.run import provenance

from sitebench.sites import qemu_site

from sitebench.sites import site_settings
from sitebench.common.errors import SitebenchError

SITE = "arm64-neoverse-n1"
EMU = {
    "root": "/srv/sitebench-arm64",
    "qemu_cpu": "neoverse-n1",
    "debian_arch": "arm64",
    "reframe_args": ["-S", "HplCheck.n=2048"],
}


@pytest.fixture
def sites(tmp_path, monkeypatch):
    """A temporary sites root with an environment 'e' and a writer of site 'x's site.yaml."""
    (tmp_path / "environments" / "e").mkdir(parents=True)
    (tmp_path / "environments" / "e" / "spack.yaml").write_text("spack: {specs: [hpl]}\n")
    (tmp_path / "site-configs" / "x").mkdir(parents=True)
    monkeypatch.setenv("SITEBENCH_SITES_ROOT", str(tmp_path))

    def write(emulation):
        text = yaml.safe_dump({"environment": "e", "emulation": emulation})
        (tmp_path / "site-configs" / "x" / "site.yaml").write_text(text)
        return site_settings.problems("x")

    return write


# -- settings ----------------------------------------------------------------------------
def test_committed_site_is_emulated():
    settings = site_settings.load(SITE)
    assert settings["emulation"] == EMU
    assert settings["environment"] == SITE
    assert site_settings.load("local").get("emulation") is None


def test_emulation_defaults(sites):
    settings, found = sites({"root": "/srv/r", "qemu_cpu": "neoverse-n1"})
    assert found == []
    assert settings["emulation"]["debian_arch"] == "arm64"
    assert settings["emulation"]["reframe_args"] == []


@pytest.mark.parametrize(
    "emulation, key, words",
    [
        ({"qemu_cpu": "neoverse-n1"}, "emulation.root", "root is missing"),
        ({"root": "/srv/r"}, "emulation.qemu_cpu", "qemu_cpu is missing"),
        ({"root": "srv/r", "qemu_cpu": "a"}, "emulation.root", "absolute path"),
        ({"root": "/", "qemu_cpu": "a"}, "emulation.root", "absolute path"),
        ({"root": "/r", "qemu_cpu": ""}, "emulation.qemu_cpu", "non-empty string"),
        ({"root": "/r", "qemu_cpu": "a", "cpu": "b"}, "emulation.cpu", "unknown key 'cpu'"),
        (
            {"root": "/r", "qemu_cpu": "a", "reframe_args": "-S n=1"},
            "emulation.reframe_args",
            "list",
        ),
        (
            {"root": "/r", "qemu_cpu": "a", "reframe_args": [1]},
            "emulation.reframe_args",
            "strings",
        ),
        ("yes", "emulation", "expected a dict"),
    ],
)
def test_emulation_problems(sites, emulation, key, words):
    _settings, found = sites(emulation)
    assert found, emulation
    assert found[0][0] == key
    assert words in found[0][1]
    assert "site-configs/x/site.yaml" in found[0][1]
    assert found[0][2]  # a fix


def test_not_emulated_site_is_refused():
    with pytest.raises(SitebenchError, match="not emulated"):
        qemu_site.emulation(Site.resolve("local"))


# -- commands in the root ----------------------------------------------------------------
def test_chroot_command_has_a_clean_environment(monkeypatch):
    monkeypatch.setenv("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
    monkeypatch.setenv("SPACK_ROOT", "/opt/spack")
    env = qemu_site.root_env(EMU, {"A": "1"})
    cmd = qemu_site.chroot_command("/srv/r", ["apt-get", "update"], env)
    assert cmd[:5] == ["chroot", "/srv/r", "/usr/bin/env", "-i", "HOME=/root"]
    assert cmd[-2:] == ["apt-get", "update"]
    assert "QEMU_CPU=neoverse-n1" in cmd and "A=1" in cmd
    assert f"PATH={qemu_site.ROOT_PATH}" in cmd
    assert not any(c.startswith(("PIP_", "SPACK_", "SSL_")) for c in cmd)


def test_run_mounts_order_and_paths():
    offline = {
        "SITEBENCH_SPACK_GIT": "/work/.mirror/spack/repo",
        "SITEBENCH_SPACK_PACKAGES_GIT": "https://github.com/spack/spack-packages.git",
        "SITEBENCH_MIRROR": "file:///opt/sitebench-mirror",
    }
    mounts = qemu_site.run_mounts("/srv/r", "/work/main", offline)
    got = [(src, str(dst), fstype, ro) for src, dst, fstype, ro in mounts]
    assert got == [
        ("proc", "/srv/r/proc", "proc", False),
        ("sys", "/srv/r/sys", "sysfs", False),
        ("/dev", "/srv/r/dev", None, False),
        ("/dev/pts", "/srv/r/dev/pts", None, False),
        # The checkout at its own path, writable: the run lands in its results/.
        ("/work/main", "/srv/r/work/main", None, False),
        # Local offline sources read-only at their paths; a URL is not mounted.
        ("/work/.mirror/spack/repo", "/srv/r/work/.mirror/spack/repo", None, True),
        ("/opt/sitebench-mirror", "/srv/r/opt/sitebench-mirror", None, True),
    ]


def test_run_env_keeps_the_hosts_state_dir_untouched():
    env = qemu_site.run_env(EMU, {"SITEBENCH_MIRROR": "/opt/m"}, qemu="7.2.22")
    assert env["SITEBENCH_STATE_DIR"] == qemu_site.STATE_IN_ROOT
    assert not env["SITEBENCH_STATE_DIR"].startswith(str(ROOT))
    assert env["SITEBENCH_MIRROR"] == "/opt/m"
    assert env["SITEBENCH_QEMU_VERSION"] == "7.2.22"
    assert env["SITEBENCH_EMULATION_ROOT"] == EMU["root"]
    # The root must not read the host's offline.env (or any other) on its own.
    assert not Path(env["SITEBENCH_OFFLINE_ENV"]).exists()


def test_sitebench_argv_adds_the_sites_reframe_args():
    argv = qemu_site.sitebench_argv(SITE, "quick", ["-n", "HplCheck"], EMU, "/work/main")
    assert argv == [
        "/work/main/sitebench", "run", "--site", SITE, "--scale", "quick",
        "--", "-S", "HplCheck.n=2048", "-n", "HplCheck",
    ]  # fmt: skip
    bare = qemu_site.sitebench_argv(SITE, "quick", [], {**EMU, "reframe_args": []}, "/w")
    assert bare == ["/w/sitebench", "run", "--site", SITE, "--scale", "quick"]


def test_offline_settings_file_and_environment(tmp_path):
    env_file = tmp_path / "offline.env"
    env_file.write_text(
        "# comment\nSITEBENCH_SPACK_GIT=/a/spack\nSITEBENCH_MIRROR='/opt/m'\nOTHER=1\n"
    )
    got = qemu_site.offline_settings({"SITEBENCH_MIRROR": "/opt/n"}, env_file)
    assert got == {"SITEBENCH_SPACK_GIT": "/a/spack", "SITEBENCH_MIRROR": "/opt/n"}
    assert qemu_site.offline_settings({}, tmp_path / "missing") == {}


def test_debian_mirrors_from_deb822(tmp_path):
    sources = tmp_path / "debian.sources"
    sources.write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    assert qemu_site.debian_mirrors(sources) == (
        "http://mirror.example/debian",
        "http://mirror.example/debian-security",
    )
    assert qemu_site.debian_mirrors(tmp_path / "none")[0] == "http://deb.debian.org/debian"
    assert "bookworm-security main" in qemu_site.sources_list("A", "S")


def test_mounted_unmounts_on_failure(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(qemu_site, "mounted_targets", lambda: [])
    monkeypatch.setattr(qemu_site, "_mount", lambda s, t, f, ro: calls.append(("mount", str(t))))
    monkeypatch.setattr(
        qemu_site, "unmount_under", lambda root: calls.append(("umount", str(root))) or []
    )
    with pytest.raises(RuntimeError):
        with qemu_site.mounted(tmp_path, qemu_site.base_mounts(tmp_path)):
            raise RuntimeError("the run failed")
    assert calls[-1] == ("umount", str(tmp_path))
    assert [c[1] for c in calls[:-1]] == [
        str(tmp_path / d) for d in ("proc", "sys", "dev", "dev/pts")
    ]


def test_unmount_under_deepest_first(monkeypatch, tmp_path):
    root = tmp_path / "r"
    targets = [str(root / "dev"), "/proc", str(root / "dev/pts"), str(root / "work/main")]
    monkeypatch.setattr(qemu_site, "mounted_targets", lambda: targets)
    done = []

    def fake_run(cmd, **kw):
        done.append(cmd[-1])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(qemu_site.subprocess, "run", fake_run)
    assert qemu_site.unmount_under(root) == []
    assert done.index(str(root / "dev/pts")) < done.index(str(root / "dev"))
    assert "/proc" not in done


def test_stamps_make_steps_idempotent(tmp_path):
    assert not qemu_site.done(tmp_path, "apt")
    qemu_site.mark(tmp_path, "apt", 89.64, packages=["gcc"])
    assert qemu_site.done(tmp_path, "apt")
    assert qemu_site.timings(tmp_path) == {"apt": 89.6}
    with pytest.raises(SitebenchError, match="not prepared"):
        qemu_site.check_prepared(tmp_path)


def test_prepare_refuses_a_foreign_directory(monkeypatch, tmp_path):
    (tmp_path / "something").write_text("not ours")
    monkeypatch.setattr(qemu_site, "host_problems", lambda arch: [])
    monkeypatch.setattr(qemu_site, "ensure_binfmt", lambda arch: None)
    with pytest.raises(SitebenchError, match="not made by sitebench"):
        qemu_site.prepare_root(tmp_path, EMU)


def test_emulated_provenance(monkeypatch):
    monkeypatch.setenv("SITEBENCH_QEMU_VERSION", "7.2.22")
    monkeypatch.delenv("QEMU_CPU", raising=False)
    got = provenance.emulation_provenance(Site.resolve(SITE))
    assert got == {"qemu": "7.2.22", "qemu_cpu": "neoverse-n1", "root": EMU["root"]}
    assert provenance.emulation_provenance(Site.resolve("local")) is None


def test_stated_target_is_the_sites_cpu_arch():
    topo = json.loads((ROOT / "site-configs" / SITE / "topology.json").read_text())
    assert topo["arch"] == "neoverse_n1" and topo["platform"] == "aarch64"


def test_partition_selects_only_hpl_stream_and_npb_ep():
    """ReFrame lists, for the site's partition, HPL, STREAM and NPB's EP and nothing else."""
    env = {**os.environ, "SITEBENCH_SCALES": "quick"}
    reframe = shutil.which("reframe", path=os.path.dirname(sys.executable)) or "reframe"
    proc = subprocess.run(
        [reframe, "-C", str(ROOT / "site-configs" / SITE / "reframe.py"),
         "-c", str(ROOT / "reframe-checks"), "-l", "--tag", "quick"],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    listed = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("- ")]
    assert sorted(set(listed)) == ["HplCheck", "NpbCheck", "StreamCheck"], proc.stdout
    npb = [ln for ln in proc.stdout.splitlines() if ln.startswith("- NpbCheck")]
    assert npb and all("%benchmark=ep" in ln for ln in npb), npb


def test_the_partition_launches_as_the_local_site_does():
    """The emulated site's partition uses sitebench's mpirun (src/sitebench/run/launchers.py),
    as the local and onboarded partitions do: a single-task check gets its cores under Open
    MPI (the site's MPI), a flexible one a task count. ReFrame's plain ``mpirun`` wrote
    ``mpirun -np 1`` (one core for all of STREAM's threads) and ``mpirun -np 0``."""
    from types import SimpleNamespace
    import importlib.util

    from reframe.core.backends import getlauncher

    spec = importlib.util.spec_from_file_location(
        "arm64_site_config", ROOT / "site-configs" / SITE / "reframe.py"
    )
    config = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(config)
    (partition,) = config.site_configuration["systems"][0]["partitions"]
    assert partition["launcher"] == "sitebench-mpirun"
    launcher = getlauncher(partition["launcher"])()

    def job(tasks, per_node=None, cpus=None):
        return SimpleNamespace(
            num_tasks=tasks, num_tasks_per_node=per_node, num_cpus_per_task=cpus
        )

    assert launcher.command(job(1, cpus=2)) == ["mpirun", "-np", "1", "--bind-to", "none"]
    assert launcher.command(job(0, per_node=2)) == ["mpirun", "-np", "2"]
    assert launcher.command(job(2)) == ["mpirun", "-np", "2"]
    # The checks' tables of mpirun options still find it, and the environment says mpirun.
    from sitebench.run.launchers import launcher_name

    assert launcher_name(launcher) == "mpirun"
    (environment,) = config.site_configuration["environments"]
    assert environment["extras"]["launcher"] == "mpirun"


# -- the real root (slow, QEMU) ------------------------------------------------------------
EM_AARCH64 = 183
#: SVE register operands (z0-z31 vectors, p0-p15 predicates) in objdump's disassembly.
SVE_OPERAND = r"\bz[0-9]+\.[bhsdq]\b|\bptrue\b|\bwhilelo\b"
NEON_OPERAND = r"\bv[0-9]+\.(16b|8b|8h|4h|4s|2s|2d|1d)\b"


def _elf_machine(path):
    with open(path, "rb") as fp:
        head = fp.read(20)
    if head[:4] != b"\x7fELF":
        return None
    return struct.unpack("<H", head[18:20])[0]


def _binaries(root):
    store = Path(root) / qemu_site.STATE_IN_ROOT.lstrip("/") / "spack-store"
    found = {}
    for name, pattern in (
        ("xhpl", "linux-neoverse_n1/hpl-*/bin/xhpl"),
        ("stream_c.exe", "linux-neoverse_n1/stream-*/bin/stream_c.exe"),
        ("ep.A.x", "linux-neoverse_n1/npb-*/bin/ep.A.x"),
    ):
        hits = sorted(store.glob(pattern))
        if hits:
            found[name] = hits[-1]
    return store, found


@pytest.mark.slow
@pytest.mark.qemu
def test_binaries_are_aarch64_neon_without_sve():
    root = Path(EMU["root"])
    if not qemu_site.done(root, "debootstrap"):
        pytest.skip(f"no emulated root at {root}: run ./sitebench qemu-run --site {SITE}")
    store, found = _binaries(root)
    missing = {"xhpl", "stream_c.exe", "ep.A.x"} - set(found)
    if missing:
        pytest.skip(
            f"not built in {store} (linux-neoverse_n1): {', '.join(sorted(missing))}; "
            f"run ./sitebench qemu-run --site {SITE}"
        )
    for name, path in found.items():
        assert _elf_machine(path) == EM_AARCH64, f"{path} is not an aarch64 ELF"
    objdump = shutil.which("aarch64-linux-gnu-objdump")
    if not objdump:
        pytest.skip(
            "aarch64-linux-gnu-objdump missing (apt-get install binutils-aarch64-linux-gnu): "
            "ELF machine checked, instructions not"
        )
    import re

    for name, path in found.items():
        text = subprocess.run(
            [objdump, "-d", str(path)], capture_output=True, text=True, check=True
        ).stdout
        sve = [ln for ln in text.splitlines() if re.search(SVE_OPERAND, ln)]
        assert not sve, f"{name}: SVE instructions in a neoverse_n1 build: {sve[:3]}"
        if name != "ep.A.x":  # EP is scalar Fortran: its NEON use is gcc's choice
            neon = [ln for ln in text.splitlines() if re.search(NEON_OPERAND, ln)]
            assert neon, f"{name}: no NEON (ASIMD) vector instruction"


def _stored_runs():
    base = ROOT / "results" / SITE
    return sorted(p for p in base.glob("*/provenance/provenance.json")) if base.is_dir() else []


@pytest.mark.slow
@pytest.mark.qemu
def test_stored_runs_are_emulated_and_verified():
    runs = _stored_runs()
    if not runs:
        pytest.skip(f"no stored run under results/{SITE}/: run ./sitebench qemu-run --site {SITE}")
    for path in runs:
        info = json.loads(path.read_text())
        assert info["emulated"], path
        assert info["emulated"]["qemu_cpu"] == "neoverse-n1"
        assert info["cpu_arch"] == "neoverse_n1"
        assert info["host"]["machine"] == "aarch64"
        report = json.loads((path.parent.parent / "report.json").read_text())
        cases = [c for r in report["runs"] for c in r["testcases"]]
        names = {c["name"].split()[0] for c in cases if c["result"] == "pass"}
        assert {"HplCheck", "StreamCheck", "NpbCheck"} <= names, (path, names)
        failed = [c["name"] for c in cases if c["result"] == "fail"]
        assert not failed, (path, failed)


SVE_PROGRAM = """
#include <stdio.h>
int main(void) {
    double a[4096], s = 0;
    for (int i = 0; i < 4096; i++) a[i] = i;
    for (int i = 0; i < 4096; i++) s += a[i] * a[i];
    printf("%.0f\\n", s);
    return 0;
}
"""


@pytest.mark.slow
@pytest.mark.qemu
def test_an_sve_binary_dies_on_the_sites_cpu(tmp_path):
    """QEMU_CPU=neoverse-n1 (the site's) has no SVE: an SVE build SIGILLs; QEMU's 'max' runs it."""
    root = Path(EMU["root"])
    if not qemu_site.done(root, "apt"):
        pytest.skip(f"no prepared root at {root}: run ./sitebench qemu-prepare --site {SITE}")
    if os.geteuid() != 0:
        pytest.skip("chroot needs root")
    enabled, flags = qemu_site.binfmt_state("arm64")
    if not enabled:
        pytest.skip("binfmt_misc has no enabled qemu-aarch64: ./sitebench qemu-prepare does it")
    work = root / "tmp" / f"sve-{os.getpid()}"
    work.mkdir(parents=True)
    try:
        (work / "sve.c").write_text(SVE_PROGRAM)
        inside = f"/tmp/{work.name}"

        def chroot(argv, cpu):
            env = qemu_site.root_env({**EMU, "qemu_cpu": cpu})
            cmd = qemu_site.chroot_command(root, argv, env)
            return subprocess.run(cmd, capture_output=True, text=True)

        build = chroot(
            ["gcc", "-O3", "-march=armv8.2-a+sve", "-o", f"{inside}/sve", f"{inside}/sve.c"],
            "max",
        )
        assert build.returncode == 0, build.stderr
        objdump = shutil.which("aarch64-linux-gnu-objdump")
        if objdump:
            text = subprocess.run(
                [objdump, "-d", str(work / "sve")], capture_output=True, text=True
            )
            assert "ptrue" in text.stdout or "whilelo" in text.stdout, "gcc emitted no SVE"
        assert chroot([f"{inside}/sve"], "max").returncode == 0
        died = chroot([f"{inside}/sve"], EMU["qemu_cpu"])
        assert died.returncode in (132, -4), (died.returncode, died.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_an_emulated_site_runs_only_in_its_root(monkeypatch):
    site = Site.resolve(SITE)
    monkeypatch.setattr(qemu_site.platform, "machine", lambda: "x86_64")
    with pytest.raises(SitebenchError, match="qemu-run --site arm64-neoverse-n1"):
        qemu_site.check_runs_here(site)
    monkeypatch.setattr(qemu_site.platform, "machine", lambda: "aarch64")
    qemu_site.check_runs_here(site)  # inside the root
    qemu_site.check_runs_here(Site.resolve("local"))


def test_an_interrupt_is_passed_on_once_and_waited_for(monkeypatch):
    sent = []

    class Proc:
        waits = 0

        def wait(self):
            Proc.waits += 1
            if Proc.waits <= 2:  # Ctrl-C, then a second one while the run stores its output
                raise KeyboardInterrupt
            return 130

        def send_signal(self, signum):
            sent.append(signum)

    monkeypatch.setattr(qemu_site.subprocess, "Popen", lambda cmd, **kw: Proc())
    assert qemu_site.wait_for(["chroot", "/r", "true"]) == 130
    assert sent == [qemu_site.signal.SIGINT]


def test_commands_parse():
    from sitebench import cli
    from sitebench.cli import qemu_prepare, qemu_run, qemu_shell

    parser = cli.parser()
    args = parser.parse_args(["qemu-run", "--site", SITE, "--", "-n", "HplCheck"])
    assert (args.func, args.site, args.scale) == (qemu_run.command, SITE, "quick")
    assert args.reframe_args == ["--", "-n", "HplCheck"]  # cli.main drops the "--"
    args = parser.parse_args(["qemu-prepare", "--site", SITE])
    assert args.func is qemu_prepare.command
    args = parser.parse_args(["qemu-shell", "--site", SITE, "--", "uname", "-m"])
    assert args.func is qemu_shell.command and args.command_args == ["--", "uname", "-m"]
