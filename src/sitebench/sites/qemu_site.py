"""An emulated site: a Debian root of another architecture run under QEMU user emulation.

Spack cannot cross-compile, so an aarch64 site on an x86_64 machine is an arm64 Debian
root (``debootstrap``) whose programs run through binfmt_misc and Debian's
``qemu-user-static``. Inside it sitebench runs as on any site: ``./sitebench run --site
<site>`` builds the site's environment with Spack and runs the checks with ReFrame. The
checkout is bind-mounted at the same path, so the run lands in ``results/<site>/`` like
any other site's; the offline sources (Spack's and spack-packages' git repositories, the
source mirror) are bind-mounted read-only at their paths.

The site says so in ``site-configs/<site>/site.yaml``::

    emulation:
      root: /srv/sitebench-arm64     # the Debian root (made by `prepare`)
      qemu_cpu: neoverse-n1          # QEMU_CPU: the CPU QEMU emulates (an SVE binary SIGILLs)
      debian_arch: arm64             # debootstrap --arch (default arm64)
      reframe_args: [-S, HplCheck.n=2048]   # given to every run (emulation is ~50x slower)

Timings, binaries and flags are real; the speed is the emulator's, not the CPU's: every
run's provenance says ``emulated`` (:mod:`sitebench.run.provenance`).

``prepare_root`` is idempotent: each step leaves a stamp (its wall time, JSON) in
``<root>/var/lib/sitebench-root/`` and is skipped when the stamp is there.
"""

import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from sitebench.common import paths

from sitebench.common.errors import SitebenchError
from sitebench.services import programs

#: Debian suite of the root (the host's, Debian 12).
SUITE = "bookworm"
#: What the suite needs inside the root (the same as a native Debian site) and to run
#: sitebench there (python3-venv, git).
APT_PACKAGES = (
    "gcc g++ gfortran make openmpi-bin libopenmpi-dev libopenblas-dev python3 python3-venv "
    "git patch bzip2 xz-utils file autoconf automake libtool autoconf-archive m4 pkgconf "
    "ca-certificates"
).split()
#: Host programs -> Debian package.
HOST_TOOLS = {
    "debootstrap": "debootstrap",
    "qemu-aarch64-static": "qemu-user-static",
    "update-binfmts": "binfmt-support",
}
BINFMT = Path("/proc/sys/fs/binfmt_misc")
#: sitebench's private state inside the root (the venv, Spack clone, store): never the
#: checkout's .sitebench/, which belongs to the host.
STATE_IN_ROOT = "/var/lib/sitebench-state"
STAMPS_IN_ROOT = "var/lib/sitebench-root"
#: Variables of /etc/sitebench/offline.env passed into the root (and bind-mounted when local).
OFFLINE_VARS = ("SITEBENCH_SPACK_GIT", "SITEBENCH_SPACK_PACKAGES_GIT", "SITEBENCH_MIRROR")
OFFLINE_ENV = "/etc/sitebench/offline.env"
#: Debian's OpenBLAS lives behind an alternatives symlink in a private directory; Spack's
#: external gets a prefix of symlinks to it (site-configs/<site>/spack/packages.yaml).
EXTERNALS_IN_ROOT = "opt/sitebench-externals"
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def log(message):
    print(f"==> {message}", file=sys.stderr, flush=True)


# -- the site's settings --------------------------------------------------------------------
def emulation(site):
    """The ``emulation:`` settings of a :class:`~sitebench.sites.site.Site`, or an error."""
    emu = site.emulation
    if not emu:
        raise SitebenchError(
            f"site {site.name!r} is not emulated "
            f"(no `emulation:` in site-configs/{site}/site.yaml)",
            "run it with `./sitebench run --site <site>`; `qemu-run` is for emulated sites",
        )
    return emu


def multiarch(debian_arch):
    return {"arm64": "aarch64-linux-gnu", "ppc64el": "powerpc64le-linux-gnu"}.get(
        debian_arch, f"{debian_arch}-linux-gnu"
    )


def qemu_name(debian_arch):
    return {"arm64": "aarch64", "ppc64el": "ppc64le", "amd64": "x86_64"}.get(
        debian_arch, debian_arch
    )


def elsewhere(site):
    """Why ``site`` cannot run or be concretized on this machine, or None: an emulated
    site runs inside its root, whose externals (of its architecture) Spack here cannot
    use. Inside the root, ``platform.machine()`` is the root's and the answer is None."""
    emu = site.emulation
    arch = (emu or {}).get("debian_arch", "arm64")
    if not emu or platform.machine() == qemu_name(arch):
        return None
    return (
        f"site {site.name!r} is emulated: it runs inside its {arch} root {emu['root']} under "
        f"QEMU, not on this {platform.machine()} machine"
    )


def check_runs_here(site):
    """Refuse to run an emulated site outside its root: ``./sitebench run`` calls it."""
    why = elsewhere(site)
    if why:
        raise SitebenchError(why, f"./sitebench qemu-run --site {site}")


# -- the host --------------------------------------------------------------------------------
def host_problems(debian_arch="arm64"):
    """What the host lacks to run the root: [(problem, fix)]."""
    found = []
    tools = dict(HOST_TOOLS)
    tools[f"qemu-{qemu_name(debian_arch)}-static"] = tools.pop("qemu-aarch64-static")
    missing = sorted({pkg for exe, pkg in tools.items() if not programs.which(exe)})
    if missing:
        found.append(
            (
                f"missing on this host: {', '.join(missing)}",
                f"apt-get install {' '.join(missing)}",
            )
        )
    if needs_root():
        found.append(needs_root())
    return found


def needs_root():
    """Why this user cannot run an emulated site (problem, fix), or None as root."""
    if os.geteuid() == 0:
        return None
    return (
        "an emulated site needs root: debootstrap makes its Debian root, and every run "
        "registers QEMU with binfmt_misc, mounts /proc, /dev and the checkout into the root "
        "and chroots there (CAP_SYS_ADMIN, CAP_SYS_CHROOT)",
        "run `./sitebench qemu-run --site SITE` as root, or ask the admin for a sudo rule "
        "for that command",
    )


def binfmt_entry(debian_arch="arm64"):
    return BINFMT / f"qemu-{qemu_name(debian_arch)}"


def binfmt_state(debian_arch="arm64"):
    """(enabled, flags) of the interpreter registration, (False, '') when absent."""
    try:
        text = binfmt_entry(debian_arch).read_text()
    except OSError:
        return False, ""
    flags = next(
        (ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("flags:")), ""
    )
    return text.startswith("enabled"), flags


def ensure_binfmt(debian_arch="arm64"):
    """binfmt_misc mounted and QEMU registered with the F flag (the interpreter is opened at
    registration, so the root needs no copy of QEMU)."""
    if not (BINFMT / "register").exists():
        run_host(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)])
    enabled, flags = binfmt_state(debian_arch)
    if not enabled:
        run_host(["update-binfmts", "--enable", f"qemu-{qemu_name(debian_arch)}"])
        enabled, flags = binfmt_state(debian_arch)
    if not enabled or "F" not in flags:
        raise SitebenchError(
            f"{binfmt_entry(debian_arch)} is not enabled with the F flag "
            f"(enabled={enabled}, flags={flags!r})",
            "install qemu-user-static and binfmt-support (Debian registers it with flags PF)",
        )


def qemu_version(debian_arch="arm64"):
    exe = shutil.which(f"qemu-{qemu_name(debian_arch)}-static")
    if not exe:
        return None
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    first = proc.stdout.splitlines()[0] if proc.stdout else ""
    # "qemu-aarch64 version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)"
    return first.split(" version ", 1)[1].strip() if " version " in first else first or None


def debian_mirrors(sources=Path("/etc/apt/sources.list.d/debian.sources")):
    """(archive, security) URIs the host's apt uses (deb822), else deb.debian.org."""
    archive, security = "http://deb.debian.org/debian", "http://deb.debian.org/debian-security"
    try:
        text = sources.read_text()
    except OSError:
        return archive, security
    for block in text.split("\n\n"):
        fields = dict(
            line.split(":", 1)
            for line in block.splitlines()
            if ":" in line and not line.startswith("#")
        )
        uri = fields.get("URIs", "").split()
        suites = fields.get("Suites", "")
        if not uri:
            continue
        if "security" in suites:
            security = uri[0]
        else:
            archive = uri[0]
    return archive, security


def offline_settings(environ=None, path=None):
    """The offline variables (SITEBENCH_SPACK_GIT, ...): the caller's environment wins, the
    file (``$SITEBENCH_OFFLINE_ENV``, else /etc/sitebench/offline.env) gives only those it
    does not set, as ./sitebench reads it. A variable set empty stays empty (unset it to take
    the file's)."""
    environ = os.environ if environ is None else environ
    path = path or environ.get("SITEBENCH_OFFLINE_ENV") or OFFLINE_ENV
    found = {}
    try:
        for line in Path(path).read_text().splitlines():
            line = line.strip().removeprefix("export ").strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                if key in OFFLINE_VARS:
                    found[key] = value.strip().strip("'\"")
    except OSError:
        pass
    for key in OFFLINE_VARS:
        if key in environ:
            found[key] = environ[key]
    return {key: value for key, value in found.items() if value}


# -- commands --------------------------------------------------------------------------------
def run_host(cmd, **kw):
    # debootstrap, update-binfmts and chroot live in /usr/sbin, which PATH may lack.
    proc = subprocess.run(programs.resolved(cmd), **kw)
    if proc.returncode != 0:
        raise SitebenchError(
            f"`{' '.join(map(str, cmd))}` failed (exit {proc.returncode})",
            "read the message above",
        )
    return proc


def root_env(emu, extra=None):
    """The clean environment of every command in the root (``env -i``): the host's
    PIP_*, SSL_*, SPACK_* ... must not leak in."""
    env = {
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PATH": ROOT_PATH,
        "QEMU_CPU": emu["qemu_cpu"],
    }
    env.update(extra or {})
    return env


def chroot_command(root, argv, env):
    """``chroot ROOT env -i K=V ... argv``."""
    return [
        "chroot",
        str(root),
        "/usr/bin/env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        *argv,
    ]


def in_root(root, emu, argv, extra_env=None, check=True, **kw):
    cmd = chroot_command(root, argv, root_env(emu, extra_env))
    proc = subprocess.run(programs.resolved(cmd), **kw)
    if check and proc.returncode != 0:
        raise SitebenchError(
            f"in {root}: `{' '.join(argv)}` failed (exit {proc.returncode})",
            "read the message above",
        )
    return proc


# -- mounts ----------------------------------------------------------------------------------
def base_mounts(root):
    """(source, target, fstype|None, read_only) in mount order: what every command needs."""
    root = Path(root)
    return [
        ("proc", root / "proc", "proc", False),
        ("sys", root / "sys", "sysfs", False),
        ("/dev", root / "dev", None, False),
        ("/dev/pts", root / "dev/pts", None, False),
    ]


def run_mounts(root, checkout=None, offline=None):
    """:func:`base_mounts` plus the checkout (read-write, at its own path: runs land in its
    results/) and the local offline sources (read-only, at their paths)."""
    root = Path(root)
    checkout = Path(checkout or paths.ROOT)
    mounts = base_mounts(root) + [(str(checkout), root / checkout.relative_to("/"), None, False)]
    for key in OFFLINE_VARS:
        value = (offline or {}).get(key, "")
        local = value.removeprefix("file://")
        if local.startswith("/") and "://" not in local:
            mounts.append((local, root / local.lstrip("/"), None, True))
    return mounts


def mounted_targets(mounts_file="/proc/self/mounts"):
    with open(mounts_file) as fp:
        return [line.split()[1].replace("\\040", " ") for line in fp]


def _mount(source, target, fstype, read_only):
    target.mkdir(parents=True, exist_ok=True)
    if fstype:
        run_host(["mount", "-t", fstype, source, str(target)])
    else:
        run_host(["mount", "--bind", source, str(target)])
        if read_only:
            run_host(["mount", "-o", "remount,bind,ro", str(target)])


def unmount_under(root):
    """Unmount everything below ``root``, deepest first (also what a crash left)."""
    root = str(Path(root).resolve())
    left = []
    for target in sorted(
        (t for t in mounted_targets() if t == root or t.startswith(root + "/")),
        key=len,
        reverse=True,
    ):
        if target == root:
            continue
        proc = subprocess.run(["umount", target], capture_output=True, text=True)
        if proc.returncode != 0:
            proc = subprocess.run(["umount", "--lazy", target], capture_output=True, text=True)
            if proc.returncode != 0:
                left.append(target)
    return left


@contextlib.contextmanager
def mounted(root, mounts):
    """Mount ``mounts`` (already mounted targets are left as they are); unmount everything
    under ``root`` at the end, also on failure or Ctrl-C."""
    try:
        have = set(mounted_targets())
        for source, target, fstype, read_only in mounts:
            if str(target) not in have:
                _mount(source, Path(target), fstype, read_only)
        yield
    finally:
        left = unmount_under(root)
        if left:
            print(f"warning: still mounted: {', '.join(left)}", file=sys.stderr)


# -- the root --------------------------------------------------------------------------------
def stamp_dir(root):
    return Path(root) / STAMPS_IN_ROOT


def done(root, step):
    return (stamp_dir(root) / f"{step}.json").is_file()


def mark(root, step, seconds, **info):
    stamp_dir(root).mkdir(parents=True, exist_ok=True)
    data = {"step": step, "seconds": round(seconds, 1), "finished": _now(), **info}
    (stamp_dir(root) / f"{step}.json").write_text(json.dumps(data) + "\n")
    log(f"{step}: {seconds:.1f} s")


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def timings(root):
    """{step: seconds} of the steps done in ``root`` (the stamps)."""
    out = {}
    for path in sorted(stamp_dir(root).glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text()).get("seconds")
        except (OSError, json.JSONDecodeError):
            continue
    return out


def sources_list(archive, security, suite=SUITE):
    return (
        f"deb {archive} {suite} main\n"
        f"deb {archive} {suite}-updates main\n"
        f"deb {security} {suite}-security main\n"
    )


def debootstrap(root, debian_arch, archive, suite=SUITE):
    """One-stage debootstrap into ``<root>.partial``, renamed when complete."""
    root = Path(root)
    partial = root.with_name(root.name + ".partial")
    if partial.exists():
        left = unmount_under(partial)
        if left:
            raise SitebenchError(
                f"{partial} (a failed debootstrap) still has mounts: {', '.join(left)}",
                f"umount them, then rm -rf {partial}",
            )
        shutil.rmtree(partial)
    partial.parent.mkdir(parents=True, exist_ok=True)
    run_host(["debootstrap", f"--arch={debian_arch}", suite, str(partial), archive])
    partial.rename(root)


def prepare_root(root, emu, archive=None, security=None):
    """Make (or complete) the Debian root of an emulated site; each step once."""
    root = Path(root)
    debian_arch = emu.get("debian_arch", "arm64")
    problems = host_problems(debian_arch)
    if problems:
        raise SitebenchError(problems[0][0], problems[0][1])
    ensure_binfmt(debian_arch)
    mirrors = debian_mirrors()
    archive, security = archive or mirrors[0], security or mirrors[1]
    if not done(root, "debootstrap"):
        if root.exists() and any(root.iterdir()):
            raise SitebenchError(
                f"{root} exists, is not empty and was not made by sitebench "
                f"(no {STAMPS_IN_ROOT}/debootstrap.json)",
                "name another emulation.root in site.yaml or remove the directory",
            )
        if root.exists():
            root.rmdir()
        log(f"debootstrap --arch={debian_arch} {SUITE} {root} {archive}")
        start = time.monotonic()
        debootstrap(root, debian_arch, archive)
        mark(root, "debootstrap", time.monotonic() - start, archive=archive)
    if not done(root, "sources"):
        (root / "etc/apt/sources.list").write_text(sources_list(archive, security))
        mark(root, "sources", 0.0)
    inside = [step for step in ("apt", "ca-certificates") if not done(root, step)]
    with mounted(root, base_mounts(root)) if inside else contextlib.nullcontext():
        if not done(root, "apt"):
            start = time.monotonic()
            in_root(root, emu, ["apt-get", "update"])
            in_root(
                root,
                emu,
                ["apt-get", "install", "-y", "--no-install-recommends", *APT_PACKAGES],
                extra_env={"DEBIAN_FRONTEND": "noninteractive"},
            )
            mark(root, "apt", time.monotonic() - start, packages=APT_PACKAGES)
        if not done(root, "ca-certificates"):
            # pip in the root reaches the package index through the host's trusted CAs.
            start = time.monotonic()
            dest = root / "usr/local/share/ca-certificates"
            dest.mkdir(parents=True, exist_ok=True)
            for crt in Path("/usr/local/share/ca-certificates").glob("*.crt"):
                shutil.copy2(crt, dest / crt.name)
            in_root(root, emu, ["update-ca-certificates"], stdout=subprocess.DEVNULL)
            mark(root, "ca-certificates", time.monotonic() - start)
    if not done(root, "externals"):
        make_externals(root, debian_arch)
        mark(root, "externals", 0.0)
    (root / STATE_IN_ROOT.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return timings(root)


def make_externals(root, debian_arch):
    """/opt/sitebench-externals/openblas -> Debian's OpenBLAS (include, lib), in the root."""
    triplet = multiarch(debian_arch)
    farm = Path(root) / EXTERNALS_IN_ROOT / "openblas"
    farm.mkdir(parents=True, exist_ok=True)
    for name, target in (
        ("include", f"/usr/include/{triplet}/openblas-pthread"),
        ("lib", f"/usr/lib/{triplet}/openblas-pthread"),
    ):
        link = farm / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)  # absolute inside the root: resolved there


def check_prepared(root):
    missing = [
        s for s in ("debootstrap", "apt", "ca-certificates", "externals") if not done(root, s)
    ]
    if missing:
        raise SitebenchError(
            f"the emulated site's root {root} is not prepared (missing: {', '.join(missing)})",
            "./sitebench qemu-prepare --site <site> (or qemu-run, which prepares it first)",
        )


# -- running the suite in the root -----------------------------------------------------------
def run_env(emu, offline, qemu=None, checkout=None):
    """What ``./sitebench run`` sees in the root: the offline sources, its own state dir,
    and what the emulation is (provenance records it)."""
    return {
        **offline,
        "SITEBENCH_STATE_DIR": STATE_IN_ROOT,
        # The host keeps the offline variables in /etc/sitebench/offline.env; the root has
        # no such file, and must not read another.
        "SITEBENCH_OFFLINE_ENV": "/nonexistent",
        "SITEBENCH_QEMU_VERSION": qemu or "",
        "SITEBENCH_EMULATION_ROOT": str(emu["root"]),
    }


def sitebench_argv(site, scale, reframe_args, emu, checkout=None):
    checkout = Path(checkout or paths.ROOT)
    extra = [*emu.get("reframe_args", []), *reframe_args]
    return [str(checkout / "sitebench"), "run", "--site", str(site), "--scale", scale] + (
        ["--", *extra] if extra else []
    )


def run(site, scale="quick", reframe_args=(), prepare=True):
    """Run the suite of emulated ``site`` inside its root; return the exit code of
    ``./sitebench run`` there (its run is in results/<site>/ of this checkout)."""
    emu = emulation(site)
    root = Path(emu["root"])
    if needs_root():  # said before anything is made or mounted
        raise SitebenchError(*needs_root())
    if prepare:
        prepare_root(root, emu)
    else:
        ensure_binfmt(emu.get("debian_arch", "arm64"))
    check_prepared(root)
    offline = offline_settings()
    env = run_env(emu, offline, qemu_version(emu.get("debian_arch", "arm64")))
    argv = sitebench_argv(site, scale, list(reframe_args), emu)
    log(f"in {root} (QEMU_CPU={emu['qemu_cpu']}): {' '.join(argv)}")
    start = time.monotonic()
    with mounted(root, run_mounts(root, paths.ROOT, offline)):
        code = wait_for(chroot_command(root, argv, root_env(emu, env)))
    log(f"./sitebench run in the root: exit {code}, {time.monotonic() - start:.0f} s")
    return code


def wait_for(cmd):
    """Run ``cmd`` in its own session; a Ctrl-C is passed on once and then waited for, so
    the run in the root stores its partial run and stops before anything is unmounted."""
    # chroot lives in /usr/sbin, which PATH may lack.
    proc = subprocess.Popen(programs.resolved(cmd), cwd="/", start_new_session=True)
    interrupted = False
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            if not interrupted:
                interrupted = True
                proc.send_signal(signal.SIGINT)
                log("interrupted: waiting for the run in the root to store what it has")


def shell(site, argv):
    """A command in the site's root with the run's mounts and environment (debugging)."""
    emu = emulation(site)
    root = Path(emu["root"])
    check_prepared(root)
    offline = offline_settings()
    env = run_env(emu, offline, qemu_version(emu.get("debian_arch", "arm64")))
    with mounted(root, run_mounts(root, paths.ROOT, offline)):
        return in_root(root, emu, argv or ["/bin/bash"], extra_env=env, check=False).returncode
