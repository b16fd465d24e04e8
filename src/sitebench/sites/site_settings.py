"""``site-configs/<site>/site.yaml``: what a site shares with others, as data (optional).

    environment: local     # build with environments/local (default: environments/<site>)
    slurm_cluster: true    # the site runs on `sitebench cluster`: its configuration and
                           # node list go into every run's provenance
    emulation:             # the site is a Debian root of another architecture run under
      root: /srv/sitebench-arm64    # QEMU user emulation (sitebench/sites/qemu_site.py)
      qemu_cpu: neoverse-n1         # the CPU QEMU emulates (QEMU_CPU)
      debian_arch: arm64            # optional, debootstrap --arch (default arm64)
      reframe_args: [-S, HplCheck.n=2048]   # optional, given to every run of the site
    nightly:               # ./sitebench nightly (all optional)
      logs: /var/log/sitebench     # a log per night (default .sitebench/nightly/<site>/logs)
      keep: 30                     # nights of logs kept (default 30)
      alert: "mail -s 'sitebench {site}' hpc-admins@example.org"   # gets the night's
                                   # summary on stdin when it failed, drifted or did not run
    modules:               # the environment modules system the toolchains' modules are
      system: lmod                 # loaded with: lmod or envmod (Tcl Environment Modules
      use: [/opt/modulefiles]      # 4.1+); optional command: and use: (sites/modules.py)
    toolchains:            # compilers and MPI each benchmark is built and run with
    - {name: gcc-openmpi, c: gcc, cxx: gcc, fortran: gcc, mpi: openmpi}
    - {name: gcc-mpich, c: gcc, cxx: gcc, fortran: gcc, mpi: mpich}
                           # (sitebench/sites/toolchains.py; the local site's are detected)
    results:               # where ./sitebench publish sends this site's runs (optional)
      remote: origin               # a remote of this checkout (default), or the URL or path
                                   # of a separate results repository
      branch: main                 # default: the remote's default branch
      limits: {runs_per_night: 12} # what another site may add (sites/exchange_limits.py)
      keep_days: 30                # other sites' materialised bulk kept (default: all)

A site without the file builds with its own environment and runs where its ReFrame
configuration says.
"""

import yaml

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name
from sitebench.sites import exchange_limits

KEYS = {
    "environment": str,
    "slurm_cluster": bool,
    "emulation": dict,
    "nightly": dict,
    "results": dict,
    "toolchains": list,
    "modules": dict,
}

#: ``nightly:`` and ``results:`` keys -> (type, example); all optional.
SECTION_KEYS = {
    "nightly": {
        "logs": (str, "logs: /var/log/sitebench"),
        "keep": (int, "keep: 30"),
        "alert": (str, "alert: \"mail -s 'sitebench {site}' admins@example.org\""),
    },
    "results": {
        "remote": (str, "remote: origin"),
        "branch": (str, "branch: main"),
        "limits": (dict, "limits: {runs_per_night: 12}"),
        "keep_days": (int, "keep_days: 30"),
        "quarantine_days": (int, "quarantine_days: 30"),
        "quarantine_refs": (int, "quarantine_refs: 100"),
    },
}


def section_problems(rel, section, values):
    """[(key, problem, fix)] of a ``nightly:`` or ``results:`` mapping."""
    keys = SECTION_KEYS[section]
    found = []
    for key, value in values.items():
        if key not in keys:
            found.append(
                (
                    f"{section}.{key}",
                    f"{rel}: {section}: unknown key {key!r}",
                    f"keys: {', '.join(keys)}",
                )
            )
            continue
        kind, example = keys[key]
        bad = not isinstance(value, kind) or isinstance(value, bool)
        if kind is str and not bad and not value.strip():
            bad = True
        if kind is int and not bad and value < 1:
            bad = True
        if bad:
            found.append(
                (
                    f"{section}.{key}",
                    f"{rel}: {section}: {key} is {value!r}, expected "
                    + {int: "a positive whole number", dict: "a mapping"}.get(
                        kind, "a non-empty string"
                    ),
                    f"e.g. {example}",
                )
            )
    return found


#: ``emulation:`` keys -> (type, required). An emulated site's timings are the emulator's.
EMULATION_KEYS = {
    "root": (str, True),
    "qemu_cpu": (str, True),
    "debian_arch": (str, False),
    "reframe_args": (list, False),
}
EMULATION_EXAMPLE = "emulation: {root: /srv/sitebench-arm64, qemu_cpu: neoverse-n1}"


def emulation_problems(rel, emu):
    """[(key, problem, fix)] of an ``emulation:`` mapping; fills its defaults in place."""
    found = []
    for key in emu:
        if key not in EMULATION_KEYS:
            found.append(
                (
                    f"emulation.{key}",
                    f"{rel}: emulation: unknown key {key!r}",
                    f"keys: {', '.join(EMULATION_KEYS)}",
                )
            )
    for key, (kind, required) in EMULATION_KEYS.items():
        if key not in emu:
            if required:
                found.append(
                    (f"emulation.{key}", f"{rel}: emulation: {key} is missing", EMULATION_EXAMPLE)
                )
            continue
        value = emu[key]
        if not isinstance(value, kind) or (kind is str and not value.strip()):
            found.append(
                (
                    f"emulation.{key}",
                    f"{rel}: emulation: {key} is {value!r}, expected a "
                    f"{'non-empty string' if kind is str else kind.__name__}",
                    EMULATION_EXAMPLE,
                )
            )
    root = emu.get("root")
    if isinstance(root, str) and root.strip() and (not root.startswith("/") or root == "/"):
        found.append(
            (
                "emulation.root",
                f"{rel}: emulation: root {root!r} must be an absolute path other than /",
                "e.g. root: /srv/sitebench-arm64",
            )
        )
    args = emu.get("reframe_args")
    if isinstance(args, list) and not all(isinstance(a, str) for a in args):
        found.append(
            (
                "emulation.reframe_args",
                f"{rel}: emulation: reframe_args must be a list of strings, got {args!r}",
                "e.g. reframe_args: [-S, HplCheck.n=2048]",
            )
        )
    if not found:
        emu.setdefault("debian_arch", "arm64")
        emu.setdefault("reframe_args", [])
    return found


def problems(site):
    """(settings, [(key, problem, fix), ...]) of ``site``'s site.yaml; settings are the
    defaults where the file is broken. ``load`` raises the first problem."""
    defaults = {"environment": site, "slurm_cluster": False}
    path = paths.site_config_dir(site) / "site.yaml"
    if not path.is_file():
        return defaults, []
    rel = paths.shown(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        return defaults, [("(syntax)", f"{rel} is not valid YAML: {err}", "fix the syntax")]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return defaults, [
            ("(top level)", f"{rel} must be a mapping of keys", f"keys: {', '.join(KEYS)}")
        ]
    found = []
    for key, value in data.items():
        if key not in KEYS:
            found.append((str(key), f"{rel}: unknown key {key!r}", f"keys: {', '.join(KEYS)}"))
        elif not isinstance(value, KEYS[key]):
            found.append(
                (
                    key,
                    f"{rel}: {key} is {value!r}, expected a {KEYS[key].__name__}",
                    (
                        EMULATION_EXAMPLE
                        if KEYS[key] is dict
                        else (
                            f"e.g. {key}: {'local' if KEYS[key] is str else 'true'}"
                            if KEYS[key] is not list
                            else "e.g. toolchains: [{name: gcc-openmpi, c: gcc, mpi: openmpi}]"
                        )
                    ),
                )
            )
    if not found and "emulation" in data:
        found += emulation_problems(rel, data["emulation"])
    for section in SECTION_KEYS:
        if not found and section in data:
            found += section_problems(rel, section, data[section])
    if not found and "limits" in (data.get("results") or {}):
        found += exchange_limits.problems(rel, data["results"]["limits"])
    if found:
        return defaults, found
    settings = {**defaults, **data}
    env = settings["environment"]
    try:
        check_name("environment", env)
    except SitebenchError as err:
        return defaults, [("environment", f"{rel}: {err.problem}", err.fix)]
    if not (paths.environment_dir(env) / "spack.yaml").is_file():
        found.append(
            (
                "environment",
                f"{rel}: environment {env!r} does not exist (environments/{env}/spack.yaml)",
                "name a directory under environments/",
            )
        )
    return settings, found


def load(site):
    settings, found = problems(site)
    if found:
        _key, problem, fix = found[0]
        raise SitebenchError(problem, fix)
    return settings
