"""Environment modules: how most clusters offer their compilers, MPIs and BLAS.

Two module systems, named as ReFrame's ``modules_system`` names them:

* ``lmod``: Lmod. Its command is the ``lmod`` Lua script, ``$LMOD_CMD`` in a shell where
  Lmod is initialized (Debian: ``/usr/share/lmod/lmod/libexec/lmod``);
* ``envmod``: the Tcl Environment Modules, 4.1 or later. Its command is ``modulecmd.tcl``,
  ``$MODULES_CMD`` in an initialized shell (Debian: ``/usr/lib/<triplet>/modulecmd.tcl``).

Both take ``<command> bash <subcommand> ...`` and print shell code for a ``module`` shell
function to evaluate. :meth:`ModulesSystem.shell_function` is that function, so job scripts
and Spack (which loads an external's ``modules:`` while it builds) need neither the site's
init scripts nor a login shell; every load starts from ``module purge``, so nothing loaded
in the user's shell leaks into a build or a run.

A site names its system in ``site.yaml`` (:func:`from_settings`)::

    modules:
      system: lmod                 # or envmod
      command: /usr/share/lmod/lmod/libexec/lmod   # optional: $LMOD_CMD / $MODULES_CMD
      use: [/opt/modulefiles]      # optional: module use, before the site's MODULEPATH

and each toolchain its modules (``modules: [gcc/12, openmpi/4.1.4]``).
"""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError

#: ReFrame's names of the module systems sitebench drives.
SYSTEMS = ("lmod", "envmod")

#: Where a distribution installs each system's command, after the shell's own variable.
KNOWN_COMMANDS = {
    "lmod": (
        "/usr/share/lmod/lmod/libexec/lmod",  # Debian, Ubuntu, EPEL
        "/opt/apps/lmod/lmod/libexec/lmod",  # TACC's layout
    ),
    "envmod": (
        "/usr/lib/x86_64-linux-gnu/modulecmd.tcl",  # Debian, Ubuntu
        "/usr/lib/aarch64-linux-gnu/modulecmd.tcl",
        "/usr/share/Modules/libexec/modulecmd.tcl",  # RHEL and its rebuilds
    ),
}
COMMAND_VARIABLE = {"lmod": "LMOD_CMD", "envmod": "MODULES_CMD"}
INSTALL_HINT = {
    "lmod": "Debian: apt-get install lmod",
    "envmod": "Debian: apt-get install environment-modules",
}

#: Markers module systems print after a name in ``avail -t``: (default), (D), <aL>, @.
_MARKERS = re.compile(r"\s*(\([^)]*\)|<[^>]*>)\s*")

#: Seconds a module command may take (a site's modulefile may hang on a dead file system).
TIMEOUT = 120


@dataclass(frozen=True)
class ModulesSystem:
    kind: str  # one of SYSTEMS
    command: str  # LMOD_CMD or modulecmd.tcl
    use: tuple = ()  # module directories added in front of MODULEPATH

    def shell_function(self):
        """The ``module`` shell function, for job scripts and Spack's build shells."""
        command = shlex.quote(self.command)
        if self.kind == "envmod" and not os.access(self.command, os.X_OK):
            command = f"tclsh {command}"
        return f'module() {{ eval "$({command} bash "$@")"; }}'

    def prologue(self):
        """Shell lines that make ``module`` work with the site's module directories and
        unload whatever the caller had loaded."""
        # Exported: Spack's build shells (bash) import it to load externals' modules;
        # MODULESHOME would make Spack source an init script instead.
        lines = [self.shell_function(), "export -f module", "unset MODULESHOME"]
        lines += [f"module use {shlex.quote(d)}" for d in reversed(self.use)]
        return lines + ["module purge >/dev/null 2>&1"]

    def environ(self, base=None):
        """``base`` (default: this process's environment) with ``module`` exported as a
        bash function (Spack runs ``module load`` of externals' modules in a bash that
        imports it) and the system's command variable set (ReFrame's Lmod backend reads
        ``$LMOD_CMD``)."""
        env = dict(os.environ if base is None else base)
        body = self.shell_function().split(" ", 1)[1]  # "() { ... }"
        env["BASH_FUNC_module%%"] = body
        env.pop("MODULESHOME", None)  # else Spack sources its init instead of the function
        env[COMMAND_VARIABLE[self.kind]] = self.command
        if self.use:
            old = env.get("MODULEPATH", "")
            env["MODULEPATH"] = ":".join([*self.use, *([old] if old else [])])
        return env

    def _bash(self, script, env=None):
        try:
            return subprocess.run(
                ["bash", "--norc", "--noprofile", "-c", "\n".join([*self.prologue(), script])],
                env=self._clean_env(env),
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            raise SitebenchError(
                f"the {self.kind} command {self.command} did not answer in {TIMEOUT} s",
                "try `module avail` by hand: a modulefile may wait on a file system",
            ) from None

    def _clean_env(self, env):
        env = dict(os.environ if env is None else env)
        env.pop("BASH_FUNC_module%%", None)
        env.pop("BASH_ENV", None)  # a site's BASH_ENV may define another module function
        return env

    def avail(self, env=None, loaded=()):
        """Every module name ``module -t avail`` lists, in its order; with ``loaded``
        (modules loaded first, after the purge), what a hierarchy offers below them."""
        load = f"module load {' '.join(shlex.quote(n) for n in loaded)} >/dev/null 2>&1\n"
        proc = self._bash((load if loaded else "") + "module -t avail 2>&1", env)
        names = []
        for line in proc.stdout.splitlines():
            line = _MARKERS.sub("", line).strip()
            if not line or line.endswith(":") or line.endswith("/") or " " in line:
                continue  # a directory header, an Lmod group line, a message
            if line not in names:
                names.append(line)
        return names

    def collections(self, env=None):
        """The user's module collections (``module -t savelist``: ``module save NAME``
        made them, ``module restore NAME`` loads one)."""
        proc = self._bash("module -t savelist 2>&1", env)
        return [
            line.strip()
            for line in proc.stdout.splitlines()
            if line.strip() and not line.strip().endswith(":") and " " not in line.strip()
        ]

    def loaded_environment(self, names, env=None, collection=None):
        """The environment after ``module purge; module load NAMES`` (``module restore
        COLLECTION`` first, if one), or a clear error naming the module that failed and
        what the module system said."""
        load = f"module load {' '.join(shlex.quote(n) for n in names)} || exit 97\n"
        restore = f"module restore {shlex.quote(collection)} || exit 97\n" if collection else ""
        script = restore + (load if names else "") + "env -0"
        proc = self._bash(script, env)
        if proc.returncode != 0:
            said = " ".join(proc.stderr.split())[-600:] or f"exit {proc.returncode}"
            what = f"restore {collection}" if collection else f"load {' '.join(names)}"
            raise SitebenchError(
                f"{self.kind}: `module {what}` failed: {said}",
                "check the names with `module avail` (and that each loads alone); "
                "fix the toolchain's modules: in site.yaml",
            )
        loaded = dict(item.split("=", 1) for item in proc.stdout.split("\0") if "=" in item)
        missing = missing_dirs(env or os.environ, loaded)
        if missing:
            raise SitebenchError(
                f"{self.kind}: `module load {' '.join(names)}` puts {missing[0]} on PATH, "
                "which does not exist",
                "the modulefile names a prefix that is not installed on this node: fix the "
                "modulefile or load another version",
            )
        return loaded

    def added_path(self, names, env=None, after=()):
        """The PATH directories loading ``names`` adds (in front, in order) to what
        loading ``after`` (their parents in a hierarchy) gives."""
        base = self.loaded_environment(list(after), env).get("PATH", "").split(":")
        loaded = self.loaded_environment([*after, *names], env).get("PATH", "").split(":")
        return [d for d in loaded if d and d not in base]

    def spider(self, env=None):
        """Lmod's spider of the whole tree (``$LMOD_DIR/spider -o spider-json``): {module
        file: its entry (``fullName``, ``parentAA``: the module sets that make it
        available, ``family``, ``propT``)}; None where this is not Lmod or spider fails
        (the tree is then walked by loading: :mod:`sitebench.discovery.module_tree`)."""
        spider = Path(self.command).parent / "spider"
        if self.kind != "lmod" or not spider.is_file():
            return None
        env = self._clean_env(env)
        path = [*self.use, *[d for d in env.get("MODULEPATH", "").split(":") if d]]
        try:
            proc = subprocess.run(
                [str(spider), "-o", "spider-json", ":".join(dict.fromkeys(path))],
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
            found = json.loads(proc.stdout) if proc.returncode == 0 else None
        except (subprocess.TimeoutExpired, ValueError):
            return None
        if not isinstance(found, dict):
            return None
        return {f: e for files in found.values() for f, e in (files or {}).items()}


def missing_dirs(before, after):
    """PATH directories in ``after`` but not in ``before`` that do not exist."""
    old = set(before.get("PATH", "").split(":"))
    return [
        d for d in after.get("PATH", "").split(":") if d and d not in old and not Path(d).is_dir()
    ]


def _command_of(kind, env):
    # An initialized shell's variable, a distribution's place, then where $MODULESHOME
    # (set by the Tcl modules' init scripts) holds an upstream install's command.
    home = env.get("MODULESHOME") if kind == "envmod" else None
    beside_home = (f"{home}/libexec/modulecmd.tcl",) if home else ()
    for candidate in (env.get(COMMAND_VARIABLE[kind]), *KNOWN_COMMANDS[kind], *beside_home):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def find(env=None):
    """The module system this shell uses (``$LMOD_CMD``, then ``$MODULES_CMD``), else the
    first installed one, else None."""
    env = os.environ if env is None else env
    for kind in SYSTEMS:
        if env.get(COMMAND_VARIABLE[kind]) and Path(env[COMMAND_VARIABLE[kind]]).is_file():
            return ModulesSystem(kind, env[COMMAND_VARIABLE[kind]])
    for kind in SYSTEMS:
        command = _command_of(kind, env)
        if command and (kind == "lmod" or shutil.which("tclsh")):
            return ModulesSystem(kind, command)
    return None


EXAMPLE = "modules: {system: lmod, use: [/opt/modulefiles]}"


def from_settings(settings, rel, env=None):
    """The :class:`ModulesSystem` a site's ``modules:`` setting names, None without one,
    or a clear error (an unknown system, one not installed here, bad types)."""
    data = settings.get("modules")
    if data is None:
        return None
    env = os.environ if env is None else env
    if not isinstance(data, dict) or data.get("system") not in SYSTEMS:
        raise SitebenchError(
            f"{rel}: modules: must name its system, one of {', '.join(SYSTEMS)}; got {data!r}",
            f"e.g. {EXAMPLE}",
        )
    unknown = [k for k in data if k not in ("system", "command", "use")]
    if unknown:
        raise SitebenchError(
            f"{rel}: modules: unknown key {unknown[0]!r}", "keys: system, command, use"
        )
    kind = data["system"]
    use = data.get("use") or []
    if not isinstance(use, list) or not all(isinstance(d, str) and d for d in use):
        raise SitebenchError(
            f"{rel}: modules.use must be a list of directories", f"e.g. {EXAMPLE}"
        )
    command = data.get("command") or _command_of(kind, env)
    if not command or not Path(command).is_file():
        where = command or f"${COMMAND_VARIABLE[kind]} and {', '.join(KNOWN_COMMANDS[kind])}"
        raise SitebenchError(
            f"{rel}: the site's modules system {kind} is not installed here (looked at {where})",
            f"install it ({INSTALL_HINT[kind]}), or name its command: modules.command, or "
            "run where it is (a login node)",
        )
    if kind == "envmod" and not os.access(command, os.X_OK) and not shutil.which("tclsh"):
        raise SitebenchError(
            f"{rel}: {command} needs tclsh, which is not on PATH", "install tcl (Debian: tcl)"
        )
    return ModulesSystem(kind, str(command), tuple(use))


#: ReFrame's oldest Environment Modules (reframe/core/modules.py, EnvModulesImpl).
REFRAME_MIN_ENVMOD = (4, 1)


def reframe_modulecmd_dir(system):
    """A directory whose ``modulecmd`` runs the site's ``system.command``.

    ReFrame's Tcl backend runs ``modulecmd python ...`` found on PATH and no setting of a
    ReFrame configuration names another command (reframe/core/modules.py: EnvModulesImpl);
    Debian's ``/usr/bin/modulecmd`` is only ``exec modulecmd.tcl "$@"``. So the site's
    ``reframe.py`` puts this directory first on PATH (:func:`sitebench.sites.toolchains.
    modules_for_reframe`), and neither the user nor cron need ``modulecmd`` on theirs.
    One directory per command under the state directory, written aside and renamed."""
    run = shlex.quote(system.command)
    if not os.access(system.command, os.X_OK):
        run = f"tclsh {run}"
    text = f'#!/bin/sh\n# ReFrame runs modulecmd: the site\'s modules.command\nexec {run} "$@"\n'
    folder = paths.state_dir() / "modulecmd" / hashlib.sha256(text.encode()).hexdigest()[:16]
    target = folder / "modulecmd"
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".modulecmd-")
        with os.fdopen(fd, "w") as out:  # closed before it runs (ETXTBSY)
            out.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    return folder


def reframe_command_problem(system, env=None):
    """(problem, fix) where ReFrame's own backend for ``system`` would not start: for the
    Tcl modules, ``modulecmd python -V`` as ReFrame runs it (the site's command, through
    :func:`reframe_modulecmd_dir`) must print "Modules Release" 4.1 or later, else every run
    stops in ReFrame ("could not find a sane TMod4 installation") after building. Lmod's
    backend runs ``$LMOD_CMD``, which the site's reframe.py sets from ``modules.command``.
    None if it would start."""
    if system.kind != "envmod":
        return None
    try:
        modulecmd = reframe_modulecmd_dir(system) / "modulecmd"
        proc = subprocess.run(
            [str(modulecmd), "python", "-V"],
            env=dict(os.environ if env is None else env),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return (
            f"ReFrame's Tcl modules backend cannot run the site's {system.command} as "
            f"`modulecmd`: {err}",
            f"make {paths.shown(paths.state_dir())} writable and check `{system.command} "
            "python -V` by hand",
        )
    found = re.match(r"^Modules Release (\d+)\.(\d+)", proc.stderr)
    if found and tuple(map(int, found.groups())) >= REFRAME_MIN_ENVMOD:
        return None
    said = " ".join((proc.stderr or proc.stdout).split())[:300] or f"exit {proc.returncode}"
    return (
        f"the site's modules command {system.command} is not the Environment Modules "
        f"{'.'.join(map(str, REFRAME_MIN_ENVMOD))} or later ReFrame drives (`modulecmd "
        f"python -V` said: {said}): every run would stop in ReFrame after building",
        "name a modulecmd.tcl of Environment Modules 4.1 or later in site.yaml's "
        f"modules.command ({INSTALL_HINT['envmod']})",
    )


def as_settings(system):
    """The ``modules:`` setting of ``system`` (what onboarding writes)."""
    data = {"system": system.kind, "command": system.command}
    if system.use:
        data["use"] = list(system.use)
    return data


def reframe_system(system):
    """The keys a ReFrame system and its partitions get: ``modules_system`` and the
    partitions' ``prepare_cmds`` (the ``module`` function, the site's directories, purge)."""
    if system is None:
        return {"modules_system": "nomod"}, []
    return {"modules_system": system.kind}, system.prologue()
