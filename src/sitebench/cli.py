"""Command line: ``./sitebench <command>`` (see ``./sitebench --help``)."""

import argparse
import shlex
import subprocess
import sys

from sitebench import paths
from sitebench.errors import SitebenchError


def cmd_run(args):
    from sitebench import runner, summary

    run_dir, code = runner.run(args.site, args.scale, args.reframe_args)
    print(
        "\n==> stored "
        + str(run_dir.relative_to(paths.ROOT) if run_dir.is_relative_to(paths.ROOT) else run_dir)
    )
    print(summary.summarize(run_dir))
    print(_drift_of(run_dir))
    # A run ended by a signal (Ctrl-C: 130) says so; otherwise 1 is "a check failed".
    return code if code >= 128 else (0 if code == 0 else 1)


def _drift_of(run_dir):
    """The stored run against its site's history (a line; never fails the run)."""
    from sitebench import regress

    try:
        site, run = run_dir.parent.name, run_dir.name
        _, earlier, df = regress.check_site(site, run, warn=_warn)
        return regress.render(site, run, earlier, df)
    except SitebenchError as err:
        return f"drift from history: not judged ({err})"


def cmd_regressions(args):
    from sitebench import regress

    run, earlier, df = regress.check_site(args.site, args.run, args.history, warn=_warn)
    print(regress.render(args.site, run, earlier, df, args.format))
    worse = (df["drift"] == "worse").any()
    return 1 if worse and args.fail_on_worse else 0


def cmd_detect(args):
    from sitebench import local_site
    from sitebench import spack as spack_mod

    spack = spack_mod.setup()
    topology = local_site.detect(spack, redetect=args.redetect)
    print(
        f"site 'local': {topology.get('arch')} {topology.get('model', '')}, "
        f"{topology.get('num_cpus')} CPUs; Spack config in {local_site.spack_dir()}"
    )
    return 0


def _warn(message):
    print(f"warning: {message}", file=sys.stderr)


def cmd_compare(args):
    from sitebench.compare import Side, compare, render

    a, b = Side.parse(args.a), Side.parse(args.b)
    table = compare(a, b, job_wall=args.job_wall, warn=_warn)
    print(render(table, args.a, args.b, args.format))
    if args.format == "csv":
        for caveat in table.attrs.get("caveats", []):
            _warn(caveat)
    return 0


def cmd_references(args):
    from sitebench import propose

    path = paths.site_config_dir(args.site) / "references.yaml"
    change, notes = propose.apply(
        args.site, path, last=args.last, write=args.write, min_tolerance=args.min_tolerance
    )
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if not change:
        print(f"{path} already holds these references")
    else:
        print(change, end="")
        print(f"\n==> {'written to' if args.write else 'not written (add --write)'}: {path}")
    return 0


def cmd_import_reframe_db(args):
    from sitebench import reframe_db
    from sitebench.names import check_name

    site = check_name("site", args.site)
    config = paths.site_config_dir(site) / "reframe.py"
    db = args.db or reframe_db.default_db_path(config if config.is_file() else None)
    made = reframe_db.import_db(site, db, warn=_warn, cpu_arch=args.cpu_arch)
    for run in made:
        print(f"imported {run.relative_to(paths.ROOT) if run.is_relative_to(paths.ROOT) else run}")
    print(f"{len(made)} new session(s) of {db} stored under results/{site}/")
    return 0


def cmd_report(args):
    from sitebench import report

    out = report.build(args.out, sites=args.site or None)
    shown = out.relative_to(paths.ROOT) if out.is_relative_to(paths.ROOT) else out
    print(f"report written to {shown} (one file; open it in a browser, no server needed)")
    return 0


def cmd_lock_drift(args):
    from sitebench import lock_drift, qemu_site, site_settings
    from sitebench import spack as spack_mod

    sites = args.site or lock_drift.committed_environments()
    emulated = [s for s in sites if qemu_site.elsewhere(s, site_settings.load(s))]
    for site in emulated:
        print(
            f"environments/{site}: emulated site, not concretizable on this host; run "
            f"`./sitebench qemu-shell --site {site} -- ./sitebench lock-drift {site}`"
        )
    sites = [s for s in sites if s not in emulated]
    if not sites:
        print("no environment commits a spack.lock (git ls-files environments/*/spack.lock)")
        return 0
    spack = spack_mod.setup()
    drifted = 0
    for site in sites:
        lines = lock_drift.drift(spack, paths.environment_dir(site))
        drifted += bool(lines)
        print(f"environments/{site}: " + ("no drift" if not lines else f"{len(lines)} change(s)"))
        for line in lines:
            print(f"  {line}")
    return 1 if drifted else 0


def cmd_mirror(args):
    from sitebench import mirror

    url = mirror.create(args.site, args.directory)
    print(
        f"mirror of environments/{args.site} in {url}; "
        f"site-configs/{args.site}/spack/mirrors.yaml points at it"
    )
    return 0


def cmd_perf(args):
    from sitebench import perf_suite

    if args.rounds is None:
        args.rounds = 1 if args.benchmark == "first-result" else 3
    for flag, value in (
        ("--rounds", args.rounds),
        ("--first-result-rounds", args.first_result_rounds),
    ):
        if value is not None and value < 1:
            raise SitebenchError(f"{flag} {value}: nothing would be measured", "use 1 or more")
    return perf_suite.run(args)


def cmd_cluster(args):
    from sitebench.slurm.cluster import LocalCluster

    cluster = LocalCluster(args.dir)
    if args.action == "start":
        started = cluster.start(nodes=args.nodes, accounting=args.accounting, port=args.port)
        nodes = ", ".join(f"{n.name} ({n.address}, {n.cpus} CPUs)" for n in started.nodes)
        print(f"Slurm cluster up in {cluster.layout.root}: {nodes}; accounting {args.accounting}")
        print(f"use it: export SLURM_CONF={cluster.layout.slurm_conf}")
    elif args.action == "stop":
        stopped = cluster.stop()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    elif args.action == "status":
        running = cluster.running()
        if not running:
            print(f"no cluster running from {cluster.layout.root}")
            return 1
        for label, pid in running.items():
            print(f"{label}: pid {pid}")
        for node, state in cluster.sinfo().items():
            print(f"node {node}: {state}")
    else:  # env
        print(f"export SLURM_CONF={shlex.quote(str(cluster.layout.slurm_conf))}")
    return 0


def cmd_spack(args):
    from sitebench import spack as spack_mod

    spack = spack_mod.setup()
    return subprocess.run([spack.executable, *args.spack_args], env=spack.environ()).returncode


def cmd_env(_args):
    from sitebench import spack as spack_mod

    spack = spack_mod.setup()
    env = spack.environ()
    for name in (
        "PATH",
        "SPACK_USER_CONFIG_PATH",
        "SPACK_SYSTEM_CONFIG_PATH",
        "SPACK_USER_CACHE_PATH",
        "SPACK_PYTHON",
    ):
        print(f"export {name}={shlex.quote(env[name])}")
    return 0


def cmd_test(args):
    # Test files or directories named on the command line replace the whole suite.
    named = [a for a in args.pytest_args if not a.startswith("-") and "tests" in a]
    where = [] if named else [str(paths.ROOT / "tests")]
    cmd = [sys.executable, "-m", "pytest", *where, *args.pytest_args]
    return subprocess.run(cmd, cwd=paths.ROOT).returncode


def parser():
    p = argparse.ArgumentParser(
        prog="sitebench",
        description="Build the benchmarks with Spack, run them with ReFrame against the "
        "site's references, store every run, compare sites.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="build, run and store the suite on a site")
    run.add_argument("--site", default="local", help="site under site-configs/ (default: local)")
    run.add_argument("--scale", default="quick", help="quick (default) or full")
    run.add_argument(
        "reframe_args",
        nargs=argparse.REMAINDER,
        help="after --: extra ReFrame options, e.g. -- -n StreamCheck",
    )
    run.set_defaults(func=cmd_run)

    det = sub.add_parser("detect", help="detect this machine as the 'local' site")
    det.add_argument("--redetect", action="store_true", help="detect again even if done")
    det.set_defaults(func=cmd_detect)

    cmp_ = sub.add_parser(
        "compare",
        help="compare two sites, partitions, runs or time ranges from results/",
        description="Each side: SITE, SITE:PARTITION, SITE/RUN or SITE@SINCE..UNTIL "
        "(ISO 8601 UTC; an end may be empty). Per figure: runs, median, IQR, B/A and a "
        "two-sided Mann-Whitney U test (p < 0.01: beyond noise).",
    )
    cmp_.add_argument("a", help="side A, e.g. local or local@2026-11-01..2026-11-08")
    cmp_.add_argument("b", help="side B, e.g. local-slurm:srun or local/<run>")
    cmp_.add_argument("--format", choices=("table", "csv", "json"), default="table")
    cmp_.add_argument(
        "--job-wall",
        action="store_true",
        help="also compare each case's job wall time (submit to finish): between a site "
        "and the same machine behind a scheduler, the scheduler's overhead per check",
    )
    cmp_.set_defaults(func=cmd_compare)

    reg = sub.add_parser(
        "regressions",
        help="flag figures of a run that drifted beyond noise from the site's recent runs",
    )
    reg.add_argument("site", help="site under results/")
    reg.add_argument("--run", help="the run to judge (default: the newest)")
    reg.add_argument("--history", type=int, default=20, help="earlier runs (default 20)")
    reg.add_argument("--format", choices=("table", "csv", "json"), default="table")
    reg.add_argument(
        "--fail-on-worse", action="store_true", help="exit 1 when a figure drifted to worse"
    )
    reg.set_defaults(func=cmd_regressions)

    ref = sub.add_parser(
        "references", help="propose a site's references from its last runs (diff, --write)"
    )
    ref.add_argument("site", help="site under site-configs/ and results/")
    ref.add_argument("--last", type=int, default=5, help="runs to use (default 5, at least 3)")
    ref.add_argument("--write", action="store_true", help="write the file after the diff")
    ref.add_argument(
        "--min-tolerance",
        type=float,
        default=0.05,
        help="smallest tolerance, a fraction (default 0.05; raise it on shared machines)",
    )
    ref.set_defaults(func=cmd_references)

    rep = sub.add_parser(
        "report", help="a static HTML report of results/ (plots, provenance), one file"
    )
    rep.add_argument(
        "--out",
        default=str(paths.state_dir() / "report" / "index.html"),
        help="where to write it (default: .sitebench/report/index.html; never in results/)",
    )
    rep.add_argument("--site", action="append", help="only this site (repeatable)")
    rep.set_defaults(func=cmd_report)

    imp = sub.add_parser(
        "import-reframe-db",
        help="store the sessions of ReFrame's own results database as runs of a site",
    )
    imp.add_argument("site", help="the site the sessions ran on (results/<site>/)")
    imp.add_argument(
        "db",
        nargs="?",
        help="the database (default: where ReFrame keeps it for the site's configuration: "
        "$RFM_SQLITE_DB_FILE, storage/sqlite_db_file, ~/.reframe/reports/results.db)",
    )
    imp.add_argument(
        "--cpu-arch",
        help="the site's CPU microarchitecture (e.g. zen3), where the reports do not say",
    )
    imp.set_defaults(func=cmd_import_reframe_db)

    drf = sub.add_parser(
        "lock-drift",
        help="re-concretize committed environments and show how they drifted from spack.lock",
    )
    drf.add_argument("site", nargs="*", help="sites (default: every committed spack.lock)")
    drf.set_defaults(func=cmd_lock_drift)

    from sitebench import onboard, qemu_site, validate

    onboard.add_parser(sub)
    validate.add_parser(sub)
    qemu_site.add_parser(sub)

    mir = sub.add_parser("mirror", help="make a source mirror of a site's environment")
    mir.add_argument("directory", help="where to put the mirror (carry it to the site)")
    mir.add_argument("--site", default="local", help="site under site-configs/ (default: local)")
    mir.set_defaults(func=cmd_mirror)

    prf = sub.add_parser("perf", help="performance benchmark: ratios measured side by side")
    prf.add_argument(
        "benchmark",
        nargs="?",
        default="all",
        choices=("all", "hpl", "stream", "store", "harness", "first-result"),
        help="all (default): each below in turn, then a table of every ratio; hpl: our HPL "
        "against hpcc, Spack's builtin and DGEMM; stream: our STREAM against Spack's builtin "
        "and hpcc's SingleSTREAM; store: the results store on 10 million synthetic figures; "
        "harness: the quick suite's wall time against its benchmarks' own, a no-change "
        "install against the first; first-result: a fresh clone to its first figure",
    )
    prf.add_argument("--n", type=int, default=8000, help="HPL matrix order (default 8000)")
    prf.add_argument("--nb", type=int, default=192, help="HPL block size (default 192)")
    prf.add_argument(
        "--no-levels",
        dest="levels",
        action="store_false",
        help="HPL: leave out the study's levels 1-3 (level 1 is ~12x slower than the rest)",
    )
    prf.add_argument(
        "--rounds", type=int, default=None, help="repetitions (default 3; first-result: 1)"
    )
    prf.add_argument(
        "--first-result-rounds",
        type=int,
        default=None,
        help="fresh clones built under `all` (default 1: each builds the whole suite)",
    )
    prf.set_defaults(func=cmd_perf)

    clu = sub.add_parser("cluster", help="start, inspect or stop a private Slurm cluster here")
    clu.add_argument("action", choices=("start", "stop", "status", "env"))
    clu.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="slurmd nodes (>1: one network " "namespace and a share of the CPUs each; default 1)",
    )
    clu.add_argument(
        "--accounting",
        choices=("slurmdbd", "none"),
        default="slurmdbd",
        help="slurmdbd on a private MariaDB (default; sacct works) or none",
    )
    clu.add_argument("--port", type=int, default=None, help="first of 3 ports (default 6817)")
    clu.add_argument(
        "--dir",
        default=None,
        help="where everything lives " "(default .sitebench/slurm, or $SITEBENCH_SLURM_DIR)",
    )
    clu.set_defaults(func=cmd_cluster)

    sp = sub.add_parser("spack", help="run Spack with sitebench's isolated configuration")
    sp.add_argument("spack_args", nargs=argparse.REMAINDER)
    sp.set_defaults(func=cmd_spack)

    env = sub.add_parser("env", help="print exports to use spack/reframe by hand like sitebench")
    env.set_defaults(func=cmd_env)

    test = sub.add_parser("test", help="run the test suite (pytest)")
    test.add_argument("pytest_args", nargs=argparse.REMAINDER)
    test.set_defaults(func=cmd_test)
    return p


#: Commands whose arguments go unparsed to another program.
PASSTHROUGH = {"spack": "spack_args", "test": "pytest_args"}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PASSTHROUGH:
        args = parser().parse_args(argv[:1])
        setattr(args, PASSTHROUGH[argv[0]], argv[1:])
    else:
        args = parser().parse_args(argv)
    extra = getattr(args, "reframe_args", None)
    if extra and extra[0] == "--":
        args.reframe_args = extra[1:]
    try:
        return args.func(args)
    except SitebenchError as err:
        print(f"sitebench: error: {err.problem}", file=sys.stderr)
        if err.fix:
            print(f"  fix: {err.fix}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sitebench: interrupted", file=sys.stderr)
        return 130
