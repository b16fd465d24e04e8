"""Run reframe-checks/ on the local site's partition with a throw-away Spack environment.

The local site's ReFrame configuration is loaded unchanged except for the partition's
``spack_environment``, which names a temporary environment whose roots are already built
(:func:`conftest.build_in_temp_env`); a table of installed roots (``SITEBENCH_INSTALLED_ROOTS``,
as ``./sitebench run`` writes it) lets the build fixtures copy their line without starting
Spack. The environment's plain specs are built with the site's preferred MPI (its first
toolchain's), so the checks run in that toolchain only (``SITEBENCH_TOOLCHAINS``). Used by
tests/test_jacobi_ring_pages.py and to measure the references.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import first_local_toolchain

ROOT = Path(__file__).resolve().parents[1]
SPEC_FORMAT = "{prefix}\t{name}@{version}{variants} arch={architecture} /{hash}"


def write_config(tmp, env_dir, site="local"):
    config = tmp / "reframe_temp_env.py"
    config.write_text(
        "import runpy\n"
        f"_local = runpy.run_path({str(ROOT / 'site-configs' / site / 'reframe.py')!r})\n"
        "site_configuration = _local['site_configuration']\n"
        "for _part in [p for s in site_configuration['systems'] for p in s['partitions']]:\n"
        f"    _part['extras']['spack_environment'] = {str(env_dir)!r}\n"
    )
    return config


def installed_roots(spack, env_dir, tmp):
    found = spack.run("-e", env_dir, "find", "--format", SPEC_FORMAT, capture=True).stdout
    table = tmp / "installed-roots.txt"
    table.write_text(f"# {os.path.realpath(env_dir)}\n{found}")
    return table


def run(
    spack,
    env_dir,
    tmp,
    checks,
    names,
    options=(),
    references=None,
    action="-r",
    site="local",
    env=None,
):
    """Run ``checks`` (file names in reframe-checks/) selected by ``names`` (``action``: -r,
    or --dry-run); returns (process, test cases of the report without the build fixtures)."""
    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    report = tmp / f"report-{len(list(tmp.glob('report-*')))}.json"
    env = {
        **spack.environ(),
        "SITEBENCH_TOOLCHAINS": first_local_toolchain(),
        **(env or {}),
        "SITEBENCH_INSTALLED_ROOTS": str(installed_roots(spack, env_dir, tmp)),
    }
    if references:
        env["SITEBENCH_REFERENCES"] = str(references)
    command = [os.path.join(os.path.dirname(sys.executable), "reframe")]
    command += ["-C", str(write_config(tmp, env_dir, site))]
    for check in checks:
        command += ["-c", str(ROOT / "reframe-checks" / check)]
    for name in names:
        command += ["-n", name]
    command += [*options, "--exec-policy", "serial", action, "--prefix", str(tmp / "rfm")]
    command += ["--report-file", str(report)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    if not report.is_file():
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    cases = json.loads(report.read_text())["runs"][0]["testcases"]
    return proc, [c for c in cases if not c.get("fixture") and "Build" not in c["name"]]
