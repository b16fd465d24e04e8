"""Check a site's files before anything runs: ``./sitebench validate SITE``.

A site is ``site-configs/<site>/`` (``site.yaml``, ``references.yaml``, ``reframe.py``,
``spack/*.yaml``, ``topology.json``) and the environment it builds with,
``environments/<env>/spack.yaml``. Every problem found in them is listed at once, each as
``<file>: <key>: <problem>`` with its fix; :func:`validate_site` raises one
:class:`~sitebench.common.errors.SitebenchError` holding them all.

What is checked, without running Spack:

* the site name is one safe directory name (:func:`sitebench.common.names.check_name`);
* ``site.yaml``: :mod:`sitebench.sites.site_settings` (known keys, types, the environment exists);
* ``references.yaml``: :mod:`sitebench.sites.references` (YAML, numbers, lower <= 0 <= upper) and
  against the checks of ``reframe-checks/``: the check names, the figures each produces
  (its performance functions, plus the energy figures) and its variables for ``$index``;
* ``reframe.py``: loads with ReFrame (in a subprocess: a site's configuration is code) and
  passes ReFrame's schema; a partition with feature ``spack`` names an existing
  ``extras['spack_environment']`` and ``extras['references']``; an environment has the
  feature ``sitebench``;
* ``environments/<env>/spack.yaml``: one top-level key ``spack``, only keys Spack's
  environment schema knows, ``specs`` a non-empty list of strings, every ``include`` exists;
* ``spack/*.yaml``: YAML mappings of Spack configuration sections; ``topology.json``: JSON;
* the toolchains (:mod:`sitebench.sites.toolchains`; ``toolchains:`` of the environment's
  owner's ``site.yaml``, the local site's detected ``toolchains.yaml``): well formed (known
  keys, name, ``c`` and ``mpi`` given, names unique, a launcher sitebench runs), each compiler
  and MPI one the owner's ``spack/packages.yaml`` has, every partition's ``environs`` one of
  them (in the loaded ``reframe.py``).

The Spack files made from the toolchains (``spack/toolchains.yaml``, ``spack/definitions.yaml``
of the owner's scope) are generated: when the toolchains are valid and a file differs from
:func:`sitebench.sites.toolchains.spack_files`, it is rewritten (``==> rewrote ...`` on
stderr), so ``./sitebench validate`` (and every run, which validates first) keeps them in
step with ``site.yaml``; a file that cannot be written is a problem. The local site's
toolchains come from its detection: before it (the first ``./sitebench run`` does it) they,
and ``reframe.py`` which needs them, are not checked.
"""

import functools
import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from sitebench.sites import modules
from sitebench.discovery import local_site
from sitebench.onboarding import pairing

from sitebench.common import paths

from sitebench.sites import references

from sitebench.sites import hpl_settings, site_settings, toolchains
from sitebench.common.errors import SitebenchError
from sitebench.common.names import check_name

#: The sections of an environment's ``spack:`` (Spack 1.1, lib/spack/spack/schema/env.py).
SPACK_ENV_KEYS = frozenset(
    "bootstrap cdash ci compilers concretizer config container definitions develop env_vars "
    "include include_concrete mirrors modules packages repos specs toolchains upstreams "
    "view".split()
)
#: Sections a configuration file of a scope (``site-configs/<site>/spack/*.yaml``) may hold.
#: (``definitions`` and ``toolchains`` are made from the site's toolchains: toolchains.py.)
SPACK_SCOPE_KEYS = SPACK_ENV_KEYS - {"specs", "include_concrete"}
#: Figures every check adds where the partition reads power (rfm/benchmark.py).
ENERGY_FIGURES = ("energy_j", "power_w")
FIX_REFRAME = "see site-configs/README.md (a partition's contract with the checks)"
FIX_ENV = "see environments/README.md; environments/local/spack.yaml is a working one"


@dataclass(frozen=True)
class Problem:
    file: str  # relative to the checkout
    key: str  # dotted path inside the file
    problem: str
    fix: str

    def head(self):
        # The reused validators (references, site_settings) already start with the file.
        if self.problem.startswith(self.file):
            return self.problem
        return f"{self.file}: {self.key}: {self.problem}"

    def render(self):
        return f"{self.head()}\n    fix: {self.fix}"


def _from_tuples(file, found):
    return [Problem(file, key, problem, fix) for key, problem, fix in found]


@functools.lru_cache(maxsize=1)
def known_checks():
    """name -> {"figures", "variables", "reference_keys"} of every check in reframe-checks/.

    Read from the check classes themselves (ReFrame's performance functions, variables and
    parameters); nothing is run.
    """
    checks = {}
    for path in sorted(paths.checks_dir().glob("*.py")):
        name = f"sitebench_checks_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # ReFrame locates a check's file through its module
        spec.loader.exec_module(module)
        for cls in vars(module).values():
            perf = getattr(cls, "_rfm_perf_fns", None)
            if not isinstance(cls, type) or cls.__module__ != name or not perf:
                continue
            energy = getattr(cls, "energy_figures", {}) or {}
            var_space = cls._rfm_var_space
            keys = (
                var_space["reference_keys"].default_value
                if "reference_keys" in var_space.vars
                else []
            )
            checks[cls.__name__] = {
                "figures": set(perf) | set(ENERGY_FIGURES) | {f"{f}_per_watt" for f in energy},
                "variables": set(var_space.vars) | set(cls._rfm_param_space.params),
                "reference_keys": ["$processor.arch", *keys],
            }
    return checks


def _checks_or_problem(problems):
    try:
        return known_checks()
    except Exception as err:  # a broken check file must not hide the site's own problems
        problems.append(
            Problem(
                "reframe-checks/",
                "(import)",
                f"the checks could not be read to validate figure names: "
                f"{type(err).__name__}: {err}",
                "run `reframe -c reframe-checks -l` to see the broken check",
            )
        )
        return None


def _load_yaml(path, problems):
    rel = paths.shown(path)
    try:
        text = path.read_text()
    except OSError as err:
        problems.append(Problem(rel, "(file)", f"cannot be read: {err}", "restore the file"))
        return None, False
    try:
        return yaml.safe_load(text), True
    except yaml.YAMLError as err:
        problems.append(
            Problem(rel, "(syntax)", f"is not valid YAML: {err}", "fix the YAML syntax")
        )
        return None, False


def environment_problems(env):
    """Problems of ``environments/<env>/spack.yaml``, checked without Spack."""
    env_dir = paths.environment_dir(env)
    path = env_dir / "spack.yaml"
    rel = paths.shown(path)
    if not path.is_file():
        return [
            Problem(
                rel,
                "(file)",
                "is missing",
                f"create it (copy environments/local/spack.yaml, include "
                f"../../site-configs/{env}/spack) or `./sitebench onboard {env}`",
            )
        ]
    problems = []
    data, ok = _load_yaml(path, problems)
    if not ok:
        return problems

    def bad(key, problem, fix=FIX_ENV):
        problems.append(Problem(rel, key, problem, fix))

    if not isinstance(data, dict):
        bad("(top level)", f"expected a mapping with the one key 'spack', got {_kind(data)}")
        return problems
    for key in data:
        if key != "spack":
            bad(str(key), f"unknown top-level key {key!r}", "put everything under `spack:`")
    spack = data.get("spack")
    if not isinstance(spack, dict):
        bad("spack", f"expected a mapping (specs, include, ...), got {_kind(spack)}")
        return problems
    for key in spack:
        if key not in SPACK_ENV_KEYS:
            bad(
                f"spack.{key}",
                f"unknown key {key!r}: Spack would reject the environment",
                f"use Spack's keys ({', '.join(sorted(SPACK_ENV_KEYS))})",
            )
    specs = spack.get("specs")
    if not isinstance(specs, list) or not specs:
        bad(
            "spack.specs",
            f"expected a non-empty list of specs, got {_kind(specs)}",
            "list the roots the checks build, e.g. `specs: [stream+openmp, hpl]` "
            "(environments/local/spack.yaml has all of them)",
        )
    else:
        for i, item in enumerate(specs):
            if not (isinstance(item, str) and item.strip()) and not (
                isinstance(item, dict) and "matrix" in item
            ):
                bad(
                    f"spack.specs[{i}]",
                    f"expected a spec string, got {item!r}",
                    "write each spec as a string, e.g. `- hpl` or `- 'npb implementation=mpi'`",
                )
    include = spack.get("include", [])
    if not isinstance(include, list):
        bad("spack.include", f"expected a list of paths, got {_kind(include)}")
        include = []
    for i, item in enumerate(include):
        target = item.get("path") if isinstance(item, dict) else item
        if not isinstance(target, str):
            bad(f"spack.include[{i}]", f"expected a path, got {item!r}")
            continue
        if "$" in target or "://" in target:
            continue  # Spack variables and URLs are Spack's to resolve
        resolved = (env_dir / target).resolve()
        if resolved == local_site.spack_dir().resolve():
            continue  # written by the local site's detection on the first run
        if not resolved.exists():
            bad(
                f"spack.include[{i}]",
                f"{target!r} does not exist ({paths.shown(resolved)})",
                "point it at the site's Spack config, e.g. ../../site-configs/<site>/spack",
            )
    for key in ("concretizer", "packages", "config", "repos"):
        if key in spack and not isinstance(spack[key], (dict, list)):
            bad(f"spack.{key}", f"expected a mapping, got {_kind(spack[key])}")
    if "view" in spack and not isinstance(spack["view"], (bool, str, dict)):
        bad("spack.view", f"expected true, false, a path or a mapping, got {_kind(spack['view'])}")
    return problems


def _kind(value):
    if value is None:
        return "nothing"
    return {list: "a list", dict: "a mapping", str: f"the string {value!r}"}.get(
        type(value), repr(value)
    )


def spack_scope_problems(site):
    """``site-configs/<site>/spack/*.yaml``: YAML mappings of known Spack sections."""
    problems = []
    for path in sorted((paths.site_config_dir(site) / "spack").glob("*.yaml")):
        rel = paths.shown(path)
        data, ok = _load_yaml(path, problems)
        if not ok:
            continue
        if data is None:
            continue  # an empty file is an empty scope
        if not isinstance(data, dict):
            problems.append(
                Problem(rel, "(top level)", f"expected a mapping, got {_kind(data)}", FIX_ENV)
            )
            continue
        for key in data:
            if key not in SPACK_SCOPE_KEYS:
                problems.append(
                    Problem(
                        rel,
                        str(key),
                        f"unknown Spack configuration section {key!r}",
                        (
                            f"the file's top key is a section, e.g. `{path.stem}:`"
                            if path.stem in SPACK_SCOPE_KEYS
                            else f"use one of {', '.join(sorted(SPACK_SCOPE_KEYS))}"
                        ),
                    )
                )
            elif key == "toolchains" and not isinstance(data[key], dict):
                problems.append(
                    Problem(
                        rel,
                        key,
                        f"expected a mapping of toolchain names, got {_kind(data[key])}",
                        "made from the site's toolchains: `./sitebench validate "
                        f"{site}` rewrites it (site-configs/README.md, toolchains)",
                    )
                )
            elif key == "definitions" and not isinstance(data[key], list):
                problems.append(
                    Problem(
                        rel,
                        key,
                        f"expected a list of definitions, got {_kind(data[key])}",
                        "e.g. `definitions: [{toolchains: ['%gcc-openmpi']}]`; made from the "
                        f"site's toolchains by `./sitebench validate {site}`",
                    )
                )
            elif key == "packages" and not isinstance(data[key], dict):
                problems.append(
                    Problem(
                        rel,
                        key,
                        f"expected a mapping of package names, got {_kind(data[key])}",
                        "e.g. `packages: {openblas: {externals: [...], buildable: false}}`",
                    )
                )
    topo = paths.site_config_dir(site) / "topology.json"
    if topo.is_file():
        try:
            if not isinstance(json.loads(topo.read_text()), dict):
                raise ValueError("not a JSON object")
        except ValueError as err:
            problems.append(
                Problem(
                    paths.shown(topo),
                    "(file)",
                    f"is not a JSON object: {err}",
                    "write it again with `reframe --detect-host-topology=topology.json`",
                )
            )
    return problems


#: Run in a subprocess: load a ReFrame configuration, validate it with ReFrame's schema,
#: print the site's systems and environments as JSON.
_LOADER = r"""
import json, sys
import jsonschema
from reframe.core.config import load_config
out = {}
try:
    cfg = load_config(sys.argv[1])
except BaseException as err:
    cause = err.__cause__ or err.__context__
    text = f"{type(err).__name__}: {err}"
    if cause is not None:
        text += f" ({type(cause).__name__}: {cause})"
    print(json.dumps({"error": text}))
    sys.exit(0)
try:
    jsonschema.validate(cfg._pick_config(), cfg.schema)
except jsonschema.ValidationError as err:
    out["schema"] = {"path": list(err.absolute_path), "message": err.message[:500]}
site = cfg._config_modules[-1].site_configuration
out["systems"] = site.get("systems", [])
out["environments"] = site.get("environments", [])
print(json.dumps(out, default=str))
"""


def _dotted(parts):
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def reframe_problems(site, settings, declared=None):
    """Load ``site-configs/<site>/reframe.py`` with ReFrame and check the partitions;
    ``declared``: the site's toolchain names, which every partition's environs must be."""
    path = paths.site_config_dir(site) / "reframe.py"
    rel = paths.shown(path)
    if settings.get("slurm_cluster") and not _cluster_running():
        return []  # it reads the running cluster; the runner says to start it
    proc = subprocess.run(
        [sys.executable, "-c", _LOADER, str(path)],
        capture_output=True,
        text=True,
        cwd=paths.ROOT,
        timeout=120,
    )
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return [
            Problem(
                rel,
                "(load)",
                f"ReFrame could not load it: {proc.stderr.strip()[-800:]}",
                f"run `reframe -C {rel} --show-config` to see why",
            )
        ]
    if "error" in out:
        return [
            Problem(
                rel,
                "(load)",
                f"ReFrame could not load it: {out['error'][:800]}",
                "fix the Python error; the file must define `site_configuration` "
                "(site-configs/local/reframe.py is a working one)",
            )
        ]
    problems = []
    if "schema" in out:
        problems.append(
            Problem(
                rel,
                f"site_configuration.{_dotted(out['schema']['path'])}",
                f"not valid for ReFrame: {out['schema']['message']}",
                "see ReFrame's configuration reference "
                "(https://reframe-hpc.readthedocs.io/en/stable/config_reference.html)",
            )
        )

    def bad(key, problem, fix=FIX_REFRAME):
        problems.append(Problem(rel, f"site_configuration.{key}", problem, fix))

    systems = [s for s in out.get("systems", []) if isinstance(s, dict)]
    if not systems:
        bad("systems", "defines no system", "describe the machine as one system with partitions")
    spack_parts = 0
    for i, system in enumerate(systems):
        for j, part in enumerate(system.get("partitions") or []):
            if not isinstance(part, dict):
                continue
            where = f"systems[{i}].partitions[{j}]"
            environs = part.get("environs") or []
            unknown = [e for e in environs if declared is not None and e not in declared]
            if unknown:
                bad(
                    f"{where}.environs",
                    f"partition {part.get('name')!r} names the environment {unknown[0]!r}, "
                    f"which is not one of the site's toolchains",
                    f"use ENVIRONS (all of them, from toolchains.for_reframe) or names of the "
                    f"declared ones: {', '.join(declared) or '(none)'}; or declare "
                    f"{unknown[0]!r} in toolchains: of site.yaml",
                )
            features = part.get("features") or []
            if "spack" not in features:
                continue
            spack_parts += 1
            extras = part.get("extras") or {}
            env = extras.get("spack_environment")
            if not isinstance(env, str) or not (Path(env) / "spack.yaml").is_file():
                bad(
                    f"{where}.extras.spack_environment",
                    f"partition {part.get('name')!r}: {env!r} is not a Spack environment "
                    "(no spack.yaml there)",
                    "os.path.join(ROOT, 'environments', '<site>'), as in "
                    "site-configs/local/reframe.py",
                )
            refs = extras.get("references")
            if refs is not None and (not isinstance(refs, str) or not Path(refs).is_file()):
                bad(
                    f"{where}.extras.references",
                    f"partition {part.get('name')!r}: {refs!r} does not exist",
                    "os.path.join(HERE, 'references.yaml'), with that file present",
                )
            memory = extras.get("memory_bytes")
            if memory is not None and (
                isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0
            ):
                bad(
                    f"{where}.extras.memory_bytes",
                    f"expected the bytes of one node's memory, got {memory!r}",
                    "an integer, e.g. 256 * 1024**3",
                )
            if not any(str(f).startswith("scale_") for f in features):
                bad(
                    f"{where}.features",
                    f"partition {part.get('name')!r} runs no scale (no scale_quick/scale_full)",
                    "add 'scale_quick' (the local site takes the scales from $SITEBENCH_SCALES)",
                )
    if systems and not spack_parts:
        bad(
            "systems[0].partitions",
            "no partition has the feature 'spack': no check would run",
            "add 'spack' to the features of the partitions that run the suite",
        )
    envs = [e for e in out.get("environments", []) if isinstance(e, dict)]
    if envs and not any("sitebench" in (e.get("features") or []) for e in envs):
        bad(
            "environments",
            "no environment has the feature 'sitebench': no check would run",
            "add 'sitebench' to the features of the environment the checks use",
        )
    return problems


def _cluster_running():
    from sitebench.services.slurm.cluster import LocalCluster

    try:
        return "slurmctld" in LocalCluster().running()
    except Exception:
        return False


def site_problems(site, load_reframe=True):
    """(settings, every Problem of the site's files)."""
    site_dir = paths.site_config_dir(site)
    try:
        check_name("site", site)
    except SitebenchError as err:
        return None, [Problem(f"site-configs/{site!r}", "site name", err.problem, err.fix)]
    if not (site_dir / "reframe.py").is_file():
        known = (
            sorted(p.name for p in site_dir.parent.iterdir() if (p / "reframe.py").is_file())
            if site_dir.parent.is_dir()
            else []
        )
        return None, [
            Problem(
                paths.shown(site_dir / "reframe.py"),
                "(file)",
                f"unknown site {site!r}: site-configs/{site}/reframe.py does not exist",
                f"use one of: {', '.join(known)}, or `./sitebench onboard {site}`",
            )
        ]
    settings, found = site_settings.problems(site)
    problems = _from_tuples(paths.shown(site_dir / "site.yaml"), found)
    checks = _checks_or_problem(problems)
    refs = site_dir / "references.yaml"
    if refs.is_file() or settings["environment"] == site:
        _data, found = references.problems(refs, checks, shown=paths.shown(refs))
        problems += _from_tuples(paths.shown(refs), found)
    if not found_key(problems, "environment"):
        problems += environment_problems(settings["environment"])
    hpl = hpl_settings.path_of(site)
    problems += _from_tuples(paths.shown(hpl), hpl_settings.read(hpl)[1])
    found_toolchains, tc_problems = [], []
    if found_key(problems, "toolchains"):  # not a list: site_settings said so
        found_toolchains = None
    elif not found_key(problems, "environment"):  # else the environment's owner is unknown
        # First: it rewrites the scope's generated files, which are checked next.
        found_toolchains, tc_problems = toolchain_problems(site, settings)
    problems += tc_problems
    problems += spack_scope_problems(site)
    if load_reframe and found_toolchains is not None:  # else reframe.py cannot load
        # Environs are checked against valid toolchains only (else their problems say it).
        declared = (
            [tc.name for tc in found_toolchains] if found_toolchains and not tc_problems else None
        )
        problems += reframe_problems(site, settings, declared)
    return settings, problems


def _with_key(rel, found):
    """Problems of (key, problem, fix) whose text, after the file, names the key."""
    problems = []
    for key, problem, fix in found:
        rest = problem[len(rel) + 2 :] if problem.startswith(f"{rel}: ") else problem
        if not rest.startswith(key):
            rest = f"{key}: {rest}"
        problems.append(Problem(rel, key, f"{rel}: {rest}", fix))
    return problems


def _toolchains_file(owner, owner_settings):
    """The file holding the toolchains of the environment's owner."""
    if owner == local_site.SITE and owner_settings.get("toolchains") is None:
        return toolchains.detected_file()
    return paths.site_config_dir(owner) / "site.yaml"


def toolchain_problems(site, settings):
    """(toolchains, [Problem]) of the site, see the module's docstring. toolchains is None
    where reframe.py cannot load (``toolchains.for_reframe`` would fail): the local site not
    detected yet (nothing checked then), or toolchains declared wrong."""
    owner = settings.get("environment", site)
    try:
        owner_settings = settings if owner == site else site_settings.load(owner)
    except SitebenchError:
        return [], []  # the environment setting's own problem is reported already
    path = _toolchains_file(owner, owner_settings)
    if path == toolchains.detected_file() and not path.is_file():
        return None, []  # detected by the first run, before which reframe.py cannot load
    rel = paths.shown(path)
    if owner != site and settings.get("toolchains") is not None:
        shown = paths.shown(paths.site_config_dir(site) / "site.yaml")
        return None, [
            Problem(
                shown,
                "toolchains",
                f"the site builds with the environment {owner!r}, whose toolchains it runs: "
                "its own would be ignored",
                f"declare them in {rel} (or drop `environment: {owner}`)",
            )
        ]
    found, declared = toolchains.declared(site, settings)
    problems = _with_key(rel, declared)
    if problems or not found:
        return None, problems
    scope = paths.site_config_dir(owner) / "spack"
    shown = paths.shown(scope / "packages.yaml")
    try:
        problems += _with_key(
            rel,
            toolchains.availability_problems(found, toolchains.spack_scope_packages(scope), shown),
        )
    except (yaml.YAMLError, OSError, AttributeError, TypeError):
        # packages.yaml is malformed: spack_scope_problems says how; the toolchains' Spack
        # files are left as they are until it is fixed.
        return found, problems
    module_settings, module_rel = toolchains.modules_settings(
        paths.site_config_dir(owner), owner_settings
    )
    problems += _with_key(
        rel,
        module_problems(
            found, module_settings, module_rel, toolchains.spack_scope_packages(scope)
        ),
    )
    if problems:
        return found, problems
    try:
        written = toolchains.write_spack_files(found, scope)
    except OSError as err:
        return found, [
            Problem(
                paths.shown(scope),
                "toolchains.yaml",
                f"the Spack files of the toolchains cannot be written: {err}",
                f"make {paths.shown(scope)} writable, then `./sitebench validate {site}`",
            )
        ]
    for name in written:
        print(f"==> rewrote {paths.shown(scope / name)} from {rel}", file=sys.stderr)
    return found, problems


def module_problems(found, settings, rel, packages=None):
    """[(key, problem, fix)]: the site's modules system is not there (nor, for the Tcl
    one, the ``modulecmd`` ReFrame runs), or a toolchain's modules do not load, or what
    they load is not what the toolchain's Spack externals are
    (:func:`sitebench.onboarding.pairing.problems`: loaded after ``module purge`` in a clean
    environment, as cron and a batch job would)."""
    with_modules = [tc for tc in found if tc.loads_modules]
    try:
        system = modules.from_settings(settings, rel)
    except SitebenchError as err:
        return [("modules", err.problem, err.fix)]
    if system is None:
        return [
            (
                f"toolchains.{tc.name}.modules",
                f"toolchain {tc.name!r} loads modules ({tc.load_command()}) but the site "
                "names no modules system",
                f"add to site.yaml: {modules.EXAMPLE}",
            )
            for tc in with_modules[:1]
        ]
    problems = []
    missing = modules.reframe_command_problem(system)
    if missing:
        problems.append(("modules", *missing))
    for tc in with_modules:
        for problem, fix in pairing.problems(tc, packages or {}, system):
            problems.append((f"toolchains.{tc.name}.modules", problem, fix))
    return problems


def found_key(problems, key):
    return any(p.key == key for p in problems)


def validate_site(site, load_reframe=True):
    """Check every file of ``site``; return its settings or raise one SitebenchError."""
    settings, problems = site_problems(site, load_reframe)
    if not problems:
        return settings
    if len(problems) == 1:
        raise SitebenchError(problems[0].head(), problems[0].fix)
    listed = "\n".join(f"  {p.render()}" for p in problems)
    raise SitebenchError(
        f"site {site!r}: {len(problems)} problems\n{listed}",
        f"fix each as its line says, then `./sitebench validate {site}`",
    )
