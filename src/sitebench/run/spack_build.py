"""Build fixture: one root of the site's Spack environment, installed by Spack.

The environment (``environments/<site>``) is named by the partition's
``extras['spack_environment']``. It is concretized once (by ``sitebench run``,
or by the first build fixture when a user runs ReFrame directly) and
every build installs its own root from its ``spack.lock``, by hash, so one
concretization serves all tests and a failed build affects only the checks that need it.
"""

import os
import shlex
import shutil
import subprocess

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function, variable

from sitebench.run import loading
from sitebench.spack import toolchain_roots
from sitebench.spack.installed_roots import SPEC_FORMAT

#: "<prefix><TAB><name>@<version><variants> arch=<arch> /<hash>" of the installed root.
SPEC_FILE = "spack-spec.txt"

#: Names a file that ``sitebench run`` writes with one ``spack find`` before ReFrame starts:
#: "# <environment>", then a SPEC_FORMAT line per installed root of that environment. A
#: fixture whose root is listed copies its line instead of starting Spack twice to learn
#: that nothing needs building. Plain ``reframe`` has no such file: every fixture asks Spack.
INSTALLED_ROOTS = "SITEBENCH_INSTALLED_ROOTS"


def listed_install(spack_spec, env, table):
    """The line of ``spack_spec`` (a package name, or ``/<hash>`` of a root) in the table of
    installed roots of ``env``, or None: when there is no table, it lists another
    environment, or ``spack_spec`` is neither a name nor a hash that names exactly one line."""
    if not table or not os.path.isfile(table):
        return None
    by_hash = spack_spec.startswith("/") and spack_spec[1:].isalnum()
    if not by_hash and not spack_spec.replace("-", "").isalnum():
        return None
    with open(table) as fp:
        header, *lines = fp.read().splitlines() or [""]
    if header != f"# {os.path.realpath(env)}":
        return None
    if by_hash:
        found = [line for line in lines if line.rpartition(" /")[2] == spack_spec[1:]]
    else:
        found = [line for line in lines if line.partition("\t")[2].startswith(f"{spack_spec}@")]
    return found[0] if len(found) == 1 else None


def concretize(env):
    """``spack -e ENV concretize --fresh`` (as ``sitebench run`` concretizes), or a clear
    error. Spack holds the environment's lock meanwhile: a second fixture or ReFrame
    process waits, then finds it concretized and concretizes nothing."""
    spack = shutil.which("spack")
    if not spack:
        raise ValueError(
            f"{env} has no spack.lock and `spack` is not on PATH: run "
            '`./sitebench run` once, or `eval "$(./sitebench env)"` before reframe'
        )
    proc = subprocess.run(
        [spack, "-e", env, "concretize", "--fresh"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip()[-2000:]
        raise ValueError(f"`spack -e {env} concretize --fresh` failed: {said}")


def site_environment(partition):
    """The Spack environment directory of a partition, or a clear error."""
    env = partition.extras.get("spack_environment")
    if not env:
        raise ValueError(
            f"partition {partition.fullname} has no extras['spack_environment']: "
            f"add the path of environments/<site> to its ReFrame configuration"
        )
    if not os.path.isfile(os.path.join(env, "spack.yaml")):
        raise ValueError(f"{env}/spack.yaml does not exist (partition {partition.fullname})")
    return env


class SpackBuild(rfm.CompileOnlyRegressionTest):
    """Install ``spack_spec`` from the site's environment; record spec and prefix.

    Variables: ``spack_spec``. Provides ``install_prefix()`` and
    ``concrete_spec()`` (name, version, variants, target, hash) to its
    dependents, which log it with every figure.
    """

    #: Root of the site's Spack environment to install (a user can narrow it
    #: with ``-S spack_spec=...``; it must match a root of the environment).
    #:
    #: :type: :class:`str`
    spack_spec = variable(str, loggable=True)

    build_system = "Spack"
    build_locally = True
    sourcesdir = None
    maintainers = ["sitebench"]

    @run_before("compile")
    def install_from_environment(self):
        env = site_environment(self.current_partition)
        # The root of this package built with the environment's toolchain, by hash: with
        # several toolchains the environment has a root of it per toolchain.
        target = toolchain_roots.install_target(
            env, self.spack_spec, self.current_environ.extras, lambda: concretize(env)
        )
        listed = listed_install(target, env, os.environ.get(INSTALLED_ROOTS))
        if listed:
            self.build_system = "CustomBuild"
            note = f"sitebench: {self.spack_spec} is installed (listed before ReFrame started)"
            self.build_system.commands = [
                f"echo {shlex.quote(note)}",
                f"printf '%s\\n' {shlex.quote(listed)} > {SPEC_FILE}",
            ]
            return
        self.build_system.environment = env
        # Install only this root: no `spack add`, the environment is not modified.
        self.build_system.install_opts = [target]
        self.build_system.emit_load_cmds = False
        # Prefix and spec in one Spack call: every call pays for starting Spack again.
        self.postbuild_cmds = [
            f"spack -e {env} find --format '{SPEC_FORMAT}' {target} > {SPEC_FILE}",
        ]

    @sanity_function
    def installed(self):
        return sn.assert_true(
            os.path.isdir(self.install_prefix()),
            msg=f"spack did not report one installed {self.spack_spec} (see {SPEC_FILE}: "
            f"{self._reported()})",
        )

    def _reported(self):
        """What ``spack find`` wrote, said in the failure itself: the stage directory that
        holds the file may be gone when someone reads the report (a test's tmp_path)."""
        lines = self._read(SPEC_FILE).splitlines()
        if len(lines) != 1:
            shown = " | ".join(line[:200] for line in lines[:3])
            return f"{len(lines)} lines" + (f": {shown}" if shown else "")
        if "\t" not in lines[0]:
            return f"no tab-separated prefix in {lines[0][:200]!r}"
        return f"the prefix {lines[0].split(chr(9), 1)[0]} is no directory"

    def _read(self, name):
        path = os.path.join(self.stagedir or "", name)
        if not self.stagedir or not os.path.isfile(path):
            return ""
        with open(path) as fp:
            return fp.read().strip()

    def _installed(self):
        """(prefix, spec) of the one installed ``spack_spec``; empty before the build or
        where Spack found none or several."""
        lines = self._read(SPEC_FILE).splitlines()
        if len(lines) != 1 or "\t" not in lines[0]:
            return "", ""
        prefix, spec = lines[0].split("\t", 1)
        return prefix, spec

    def install_prefix(self):
        """Where Spack installed ``spack_spec`` (empty before the build)."""
        return self._installed()[0]

    def concrete_spec(self):
        """The installed concrete spec, one line (empty before the build)."""
        return self._installed()[1]


# The build fixtures inherit ReFrame's `variables` alias without its deprecation walk
# (sitebench/run/loading.py).
loading.without_deprecated_aliases(SpackBuild)
