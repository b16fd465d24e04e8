"""``./sitebench perf harness``: what sitebench itself costs, measured round by round.

* **Suite overhead**: the wall time of ``./sitebench run`` (the quick suite on the local
  site, exactly as a user types it) over the sum of its benchmarks' own wall times, each
  timed by its job right around the launch (``rfm/benchmark.py``, ``LAUNCH_FILE``). Goal <=
  1.05 (issue 19; 1.10 before). The rest is broken down: sitebench before and after ReFrame,
  ReFrame's start-up and wind-down, its build fixtures (each learning that its root is
  installed), the checks' jobs outside the launch (environment, servers, inputs) and
  ReFrame's session otherwise (hooks, polling, sanity).
* **Toolchains**: the same suite with every toolchain of the local site (MPICH beside Open
  MPI on Debian) over the suite with its first toolchain only (``--toolchain``), in the same
  round, builds installed. Goal <= 2.2 (issue 16): the checks that use no MPI run once.
* **No-change install**: ``spack -e <env> install`` of the local site's environment
  when everything is installed, over its first install into an empty install tree
  from source (``--use-buildcache never``) with a warm source mirror. Goal <= 0.05.
* **Install from the binary cache**: the same environment into another empty tree (another
  checkout) from the machine's binary cache (``--use-buildcache only``), over that first
  install. Goal <= 0.25 (issue 26).
* **Disturbance sampling**: what the CPU snapshots around each case's launch
  (``run/disturbance.py``) cost, over the suite's wall time: two snapshots per sampled case
  (the cases whose stage kept ``sitebench-cpu.txt``) at the median cost of one, timed right
  after the suite in the same round (a loop of them in one shell, as the job script runs
  them). Goal < 0.01 (issue 27).

The runs go to a temporary results store, so a perf round never enters a site's
history; everything measured is kept in ``perf/results/harness-<UTC time>.json``.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from sitebench.sites import toolchains
from sitebench.discovery import local_site
from sitebench.sites.site import Site

from sitebench.common import paths
from sitebench.spack import buildcache
from sitebench.spack import pinned as spack_mod
from sitebench.common.errors import SitebenchError
from sitebench.perf.measure import (
    now,
    ratio,
    render_failures,
    render_figures,
    render_ratios,
    spread,
)
from sitebench.results.rundirs import cases_of
from sitebench.run import disturbance
from sitebench.run.benchmark import LAUNCH_FILE


def launch_seconds(run_dir):
    """Seconds the benchmarks of a stored run spent launched, summed over its checks."""
    total, count = 0.0, 0
    for path in sorted(Path(run_dir).glob(f"**/{LAUNCH_FILE}")):
        fields = path.read_text().split()
        if len(fields) != 3:
            raise SitebenchError(f"{path}: expected '<start> <end> <status>', got {fields}")
        total += float(fields[1]) - float(fields[0])
        count += 1
    return total, count


def reframe_phases(report):
    """ReFrame's session (its start and end, unix times), its build fixtures' time (their
    compile stage) and the checks' jobs' wall time (submitted to completed), which do not
    overlap in a serial run, of a loaded report. Not the cases' ``time_total``: a fixture's
    runs on to its cleanup, after its dependents ran."""
    ran = [c for c in cases_of(report) if c["result"] != "skip"]
    builds = sum(c["time_compile"] or 0 for c in ran if c["fixture"])
    jobs = sum(
        c["job_completion_time_unix"] - c["job_submit_time"]
        for c in ran
        if not c["fixture"] and c["job_completion_time_unix"] and c["job_submit_time"]
    )
    session = report["session_info"]
    return (session["time_start_unix"], session["time_end_unix"]), builds, jobs


def failed_cases(report):
    """'<case> (<phase it failed in>)' of each failed case of a loaded ReFrame report."""
    return [f"{c['name']} ({c['fail_phase']})" for c in cases_of(report) if c["result"] == "fail"]


def suite_round(scratch, extra=()):
    """One ``./sitebench run [extra]`` into a scratch results store; its times (s)."""
    results = Path(tempfile.mkdtemp(prefix="results-", dir=scratch))
    env = {
        **os.environ,
        "SITEBENCH_RESULTS_DIR": str(results),
        "SITEBENCH_STORE_DIR": str(results / ".store"),
    }
    # Wall clock, not monotonic: the phases below are split at the unix times that
    # ReFrame (its session) and sitebench (ReFrame's process) recorded.
    start = time.time()
    proc = subprocess.run(
        [str(paths.ROOT / "sitebench"), "run", *extra], env=env, capture_output=True, text=True
    )
    end = time.time()
    runs = sorted(p for p in (results / "local").glob("*") if p.is_dir())
    # Exit 1 is a check that failed (on a shared VM, mostly a figure below its reference):
    # the run is complete and stored all the same, and its failures are counted.
    if proc.returncode not in (0, 1) or len(runs) != 1:
        raise SitebenchError(
            f"./sitebench run exited {proc.returncode} with {len(runs)} stored runs:\n"
            f"{proc.stderr[-2000:]}",
            "make `./sitebench run` pass first; perf measures a working suite",
        )
    launched, count = launch_seconds(runs[0])
    sampled = len(list(runs[0].glob(f"output/*/*/*/*/{disturbance.CPU_FILE}")))
    report = json.loads((runs[0] / "report.json").read_text())
    (session_start, session_end), builds, jobs = reframe_phases(report)
    process = json.loads((runs[0] / "provenance/provenance.json").read_text())["reframe_process"]
    failed = failed_cases(report)
    shutil.rmtree(results)
    return {
        "wall": end - start,
        "benchmarks": launched,
        "launches": count,
        "sampled cases": sampled,
        "failed": failed,
        "sitebench before ReFrame (checks, detection, lock, installed roots)": process[
            "launched_unix"
        ]
        - start,
        "ReFrame start-up (configuration, loading and expanding the checks)": session_start
        - process["launched_unix"],
        "build fixtures (Spack, or the roots listed installed)": builds,
        "checks' jobs outside the launch": jobs - launched,
        "ReFrame in its session otherwise (hooks, polling, sanity)": session_end
        - session_start
        - builds
        - jobs,
        "ReFrame wind-down (its report and results database)": process["exited_unix"]
        - session_end,
        "sitebench after ReFrame (provenance, storing, summary)": end - process["exited_unix"],
    }


def scratch_environment(scratch):
    """A copy of the local site's environment and lock, its relative paths made absolute."""
    source = paths.environment_dir(local_site.SITE)
    if not (source / "spack.lock").is_file():
        raise SitebenchError(
            f"{source / 'spack.lock'} does not exist",
            "run `./sitebench run` once first (it concretizes the environment)",
        )
    data = yaml.safe_load((source / "spack.yaml").read_text())
    spec = data["spack"]
    spec["include"] = [str((source / p).resolve()) for p in spec.get("include", [])]
    spec["repos"] = {k: str((source / v).resolve()) for k, v in spec.get("repos", {}).items()}
    env_dir = Path(tempfile.mkdtemp(prefix="env-", dir=scratch))
    (env_dir / "spack.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    shutil.copy(source / "spack.lock", env_dir / "spack.lock")
    return env_dir


def install_round(spack, scratch):
    """The local environment installed into an empty tree from source, then again with no
    change, then into another empty tree (another checkout) from the machine's binary cache
    (left out when the cache is off)."""
    env_dir = scratch_environment(scratch)

    def install(tree, *how):
        start = time.monotonic()
        spack.run("-c", f"config:install_tree:root:{tree}", "-e", env_dir, "install", *how,
                  capture=True)  # fmt: skip
        return time.monotonic() - start

    # From source even where the cache holds it all: the first checkout on a new machine.
    times = {"first": install(env_dir / "store", "--use-buildcache", "never")}
    times["no change"] = install(env_dir / "store")
    if spack.buildcache is not None:
        buildcache.refresh_index(spack, spack.buildcache)
        times["from the binary cache"] = install(env_dir / "other", "--use-buildcache", "only")
    shutil.rmtree(env_dir)
    return times


def snapshot_seconds(scratch, times=20):
    """Median seconds of one disturbance snapshot: ``times`` of them timed one by one in a
    single shell (as a job script runs them: no shell start-up counted)."""
    work = Path(tempfile.mkdtemp(prefix="snapshots-", dir=scratch))
    script = (
        f"for i in $(seq {times}); do s=$(date +%s%N); {disturbance.SNAPSHOT}; "
        f"e=$(date +%s%N); echo $((e - s)); done"
    )
    proc = subprocess.run(
        ["bash", "-c", script], cwd=work, capture_output=True, text=True, check=True
    )
    lines = (work / disturbance.CPU_FILE).read_text().splitlines()
    shutil.rmtree(work, ignore_errors=True)
    if len(lines) != times:
        raise SitebenchError(f"{len(lines)} of {times} snapshots written: {proc.stderr[-500:]}")
    took = sorted(int(ns) / 1e9 for ns in proc.stdout.split())
    return took[len(took) // 2]


def harness(rounds=3):
    spack = spack_mod.setup()
    local_site.detect(spack)
    scratch = Path(tempfile.mkdtemp(prefix="perf-harness-", dir=paths.state_dir()))
    suite, install, single = [], [], []
    declared = toolchains.load(Site.resolve(local_site.SITE))
    try:
        for round_ in range(1, rounds + 1):
            suite.append(suite_round(scratch))
            s = suite[-1]
            s["one snapshot"] = snapshot_seconds(scratch)
            s["sampling"] = 2 * s["sampled cases"] * s["one snapshot"]
            if len(declared) > 1:
                single.append(suite_round(scratch, ("--toolchain", declared[0].name)))
                print(
                    f"round {round_}: suite with {declared[0].name} only "
                    f"{single[-1]['wall']:.1f} s",
                    file=sys.stderr,
                )
            print(
                f"round {round_}: suite {s['wall']:.1f} s, benchmarks {s['benchmarks']:.1f} s "
                f"({s['launches']} launches; failed: {', '.join(s['failed']) or 'none'})",
                file=sys.stderr,
            )
            for key, value in s.items():
                if key not in ("wall", "benchmarks", "launches", "failed", "sampled cases"):
                    print(f"    {key}: {value:.1f} s", file=sys.stderr)
            install.append(install_round(spack, scratch))
            i = install[-1]
            print(
                f"round {round_}: install first {i['first']:.1f} s, "
                f"no change {i['no change']:.2f} s",
                file=sys.stderr,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    topology = json.loads(local_site.topology_file().read_text())
    column = lambda rows, key: [row[key] for row in rows]  # noqa: E731
    return {
        "benchmark": "harness",
        "when": now(),
        "rounds": rounds,
        "cpu_arch": topology.get("arch"),
        # Per round: a failed case's dependents never launch (PARSEC's speedup needs its run
        # at 1 thread), so a round that failed one launches fewer.
        "launches per round": column(suite, "launches"),
        "sampled cases per round": column(suite, "sampled cases"),
        "failed checks per round": column(suite, "failed"),
        "seconds": {
            key: spread(column(suite, key))
            for key in suite[0]
            if key not in ("launches", "failed", "sampled cases")
        }
        | {f"install, {key}": spread(column(install, key)) for key in install[0]},
        "ratios": {
            "suite wall / benchmarks' own time": ratio(
                column(suite, "wall"), column(suite, "benchmarks")
            ),
            "no-change install / first install": ratio(
                column(install, "no change"), column(install, "first")
            ),
            "disturbance sampling / suite wall": ratio(
                column(suite, "sampling"), column(suite, "wall")
            ),
        }
        | (
            {
                "install from the binary cache / first install": ratio(
                    column(install, "from the binary cache"), column(install, "first")
                )
            }
            if "from the binary cache" in install[0]
            else {}
        )
        | (
            {
                "suite wall, every toolchain / one toolchain": ratio(
                    column(suite, "wall"), column(single, "wall")
                )
            }
            if single
            else {}
        ),
        "toolchains": [t.name for t in declared],
    }


def render(result):
    # Files kept before "launches per round" hold round 1's count only.
    launches = result.get("launches per round") or [result["launches"]]
    lines = [
        f"harness ({result['cpu_arch']}), {result['rounds']} rounds, benchmark launches in "
        f"round {' / '.join(map(str, range(1, len(launches) + 1)))}: "
        f"{' / '.join(map(str, launches))}, median [min-max]"
    ]
    lines += render_figures(result["seconds"], "s", width=max(map(len, result["seconds"])))
    lines += render_ratios(result["ratios"])
    lines += render_failures(result["failed checks per round"], "stored and timed all the same")
    return "\n".join(lines)


#: ReFrame's line for the first check (not a build fixture) that passed or failed.
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # ReFrame colours its status words
FIRST_FIGURE = re.compile(r"^\[\s+(OK|FAIL)\s+\] \(\s*\d+/\d+\) \w+(?<!Build) ")


def _clean_env():
    """This process's environment without what points sitebench at another checkout."""
    drop = ("SITEBENCH_STATE_DIR", "SITEBENCH_RESULTS_DIR", "SITEBENCH_STORE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop and k != "VIRTUAL_ENV"}
    env.pop("SITEBENCH_SITES_ROOT", None)
    return env


def first_result_round(scratch, cold_cache=False, buildcache_dir=None, name="clone"):
    """``git clone`` then ``./sitebench run``: seconds to each milestone of the first run.
    ``cold_cache``: without the user's cache (paths.user_cache_dir), as on a new machine;
    ``buildcache_dir``: the binary cache the clone installs from and pushes to."""
    clone = Path(scratch) / name
    env = _clean_env()
    if cold_cache:  # the binary cache too, even where one is configured for the machine
        env["SITEBENCH_CACHE_DIR"] = str(Path(scratch) / "empty-user-cache")
        env["SITEBENCH_BUILDCACHE"] = str(Path(scratch) / "empty-user-cache" / "buildcache")
    if buildcache_dir:
        env["SITEBENCH_BUILDCACHE"] = str(buildcache_dir)
    marks, steps = {}, []
    start = time.monotonic()
    subprocess.run(["git", "clone", "--quiet", str(paths.ROOT), str(clone)], check=True)
    marks["cloned"] = time.monotonic() - start
    committed = set((clone / "results" / "local").glob("*/report.json"))
    log = Path(scratch) / f"{name}-run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(clone / "sitebench"), "run"],
            env=env,
            cwd=clone,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for line in proc.stdout:
            elapsed = time.monotonic() - start
            out.write(f"{elapsed:7.1f} {line}")  # each line's second: where the time went
            if line.startswith("==> "):  # sitebench's and Spack's own steps
                steps.append([round(elapsed, 1), line[4:].strip()[:160]])
            if line.startswith("==> ") and "reframe" in line and "ReFrame started" not in marks:
                marks["ReFrame started"] = elapsed
            elif FIRST_FIGURE.search(ANSI.sub("", line)) and "first figure" not in marks:
                marks["first figure"] = elapsed
        code = proc.wait()
    marks["run stored"] = time.monotonic() - start
    stored = sorted(set((clone / "results" / "local").glob("*/report.json")) - committed)
    # Exit 1 is a check that failed (mostly a figure under its reference on a shared VM):
    # the run is stored all the same.
    if code not in (0, 1) or len(stored) != 1 or "first figure" not in marks:
        raise SitebenchError(
            f"the fresh clone's `./sitebench run` exited {code} with {len(stored)} new "
            f"runs; its output is in {log} (the clone is kept beside it)",
            "read the log; perf measures a working suite",
        )
    report = json.loads(stored[0].read_text())
    (start_unix, end_unix), builds, jobs = reframe_phases(report)
    inside = {"ReFrame session": end_unix - start_unix, "build fixtures": builds, "jobs": jobs}
    return marks, steps, failed_cases(report), inside


#: Issue 19: a fresh clone's first figure within this many seconds (warm source mirror).
FIRST_FIGURE_GOAL_S = 150


def first_result(rounds=1, cold_cache=False):
    """Fresh clones, each from ``git clone`` to its first figure and its stored run.

    A round builds the whole suite from the source mirror (about as long as a user's
    first day), so one round is the default; the clone is of the committed HEAD."""
    marks, failed, steps = [], [], []
    for round_ in range(1, rounds + 1):
        scratch = Path(tempfile.mkdtemp(prefix="perf-first-result-"))
        times, round_steps, failures, _ = first_result_round(scratch, cold_cache)  # kept on error
        shutil.rmtree(scratch, ignore_errors=True)
        marks.append(times)
        steps.append(round_steps)
        failed.append(failures)
        shown = ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
        print(f"round {round_}: {shown}; failed: {', '.join(failures) or 'none'}", file=sys.stderr)
    commit = subprocess.run(
        ["git", "-C", str(paths.ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "benchmark": "first-result",
        "when": now(),
        "rounds": rounds,
        "commit": commit,
        "mirror": os.environ.get("SITEBENCH_MIRROR", "none: upstream sources"),
        "user cache": "empty (--cold-cache)" if cold_cache else str(paths.user_cache_dir()),
        "failed checks per round": failed,
        # [seconds since git clone, step] for each line sitebench or Spack began with "==> "
        "steps per round": steps,
        "seconds since git clone": {key: spread([m[key] for m in marks]) for key in marks[0]},
        "ratios": {
            f"first figure / {FIRST_FIGURE_GOAL_S} s": ratio(
                [m["first figure"] for m in marks], [FIRST_FIGURE_GOAL_S] * rounds
            )
        },
    }


#: Issue 26: a second checkout's run, from clone to stored run, with the binary cache the
#: first checkout filled, over the first's.
SECOND_CHECKOUT_GOAL = 0.25


def second_checkout(rounds=1):
    """Two fresh clones a round, one after the other, sharing a binary cache that starts
    empty: the first builds everything from the source mirror and fills it, the second
    installs from it. Both use the user's Spack repository index and shared locks (the
    cache under test is the binary one): where an earlier run kept the lock of the same
    inputs, the first clone copies it too, and its steps say so ("reusing ...")."""
    first, second, failed, steps, inside = [], [], [], [], []
    for round_ in range(1, rounds + 1):
        scratch = Path(tempfile.mkdtemp(prefix="perf-second-checkout-"))
        cache = scratch / "buildcache"
        a, steps_a, fail_a, in_a = first_result_round(scratch, buildcache_dir=cache, name="first")
        b, steps_b, fail_b, in_b = first_result_round(scratch, buildcache_dir=cache, name="second")
        shutil.rmtree(scratch, ignore_errors=True)
        first.append(a)
        second.append(b)
        failed.append(fail_a + fail_b)
        steps.append({"first checkout": steps_a, "second checkout": steps_b})
        inside.append({"first checkout": in_a, "second checkout": in_b})
        print(
            f"round {round_}: first checkout stored its run after {a['run stored']:.0f} s, "
            f"the second after {b['run stored']:.0f} s",
            file=sys.stderr,
        )
    column = lambda rows, key: [row[key] for row in rows]  # noqa: E731
    return {
        "benchmark": "second-checkout",
        "when": now(),
        "rounds": rounds,
        "mirror": os.environ.get("SITEBENCH_MIRROR", "none: upstream sources"),
        "failed checks per round": failed,
        # [seconds since git clone, step] for each line sitebench or Spack began with "==> "
        "steps per round": steps,
        # From each stored run's report: its ReFrame session, the build fixtures' compile
        # stages (installing from the cache, or building) and the checks' jobs.
        "seconds inside ReFrame per round": inside,
        "seconds since git clone": {
            f"{who}, {key}": spread(column(rows, key))
            for who, rows in (("first checkout", first), ("second checkout", second))
            for key in rows[0]
        },
        "ratios": {
            "second checkout's run, warm binary cache / first checkout's": ratio(
                column(second, "run stored"), column(first, "run stored")
            ),
            # What a cache can shorten: the run without its checks' jobs, the benchmarks
            # themselves, which run alike in both (no goal of its own).
            "second checkout's run outside the checks' jobs / first checkout's": ratio(
                [
                    row["run stored"] - seen["second checkout"]["jobs"]
                    for row, seen in zip(second, inside)
                ],
                [
                    row["run stored"] - seen["first checkout"]["jobs"]
                    for row, seen in zip(first, inside)
                ],
            ),
        },
    }


def render_second_checkout(result):
    lines = [
        f"two fresh clones sharing a binary cache that starts empty, mirror "
        f"{result['mirror']}, {result['rounds']} round(s), median [min-max]"
    ]
    lines += render_figures(result["seconds since git clone"], "s", digits=1)
    for round_, inside in enumerate(result.get("seconds inside ReFrame per round", []), 1):
        for who, seconds in inside.items():  # files before 2026-11-27 have none
            shown = ", ".join(f"{key} {value:.0f} s" for key, value in seconds.items())
            lines.append(f"  round {round_}, {who} inside ReFrame: {shown}")
    lines += render_ratios(result["ratios"])
    lines += render_failures(result["failed checks per round"], "stored all the same")
    return "\n".join(lines)


def render_first_result(result):
    lines = [
        f"fresh clone of {result['commit']} to its first result, mirror {result['mirror']}, "
        f"user cache {result.get('user cache', 'not recorded')}, "
        f"{result['rounds']} round(s), median [min-max]"
    ]
    lines += render_figures(result["seconds since git clone"], "s", digits=1)
    if result.get("ratios"):  # files before issue 19 have none
        lines += render_ratios(result["ratios"])
    lines += render_failures(result["failed checks per round"], "stored all the same")
    return "\n".join(lines)
