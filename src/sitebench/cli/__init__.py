"""The command line, ``./sitebench <command>``: one module per command, as Spack's
``lib/spack/spack/cmd/``. Each module names its command and help, sets up its own parser
(``setup_parser``) and holds the command (``command``); this file only dispatches.

The CLI is the edge of the loop: it resolves a :class:`~sitebench.sites.site.Site` once
and may import from every stage.
"""

import argparse
import importlib
import sys

from sitebench.common.errors import SitebenchError

#: Command modules, in the order ``--help`` lists them (module name: ``-`` as ``_``).
COMMANDS = (
    "run",
    "nightly",
    "publish",
    "pull",
    "show",
    "trust",
    "exchange",
    "compare",
    "regressions",
    "references",
    "report",
    "detect",
    "onboard",
    "validate",
    "import_reframe_db",
    "lock_drift",
    "mirror",
    "buildcache",
    "cluster",
    "qemu_prepare",
    "qemu_run",
    "qemu_shell",
    "perf",
    "tune",
    "spack",
    "env",
    "test",
)


def modules():
    return [importlib.import_module(f"sitebench.cli.{name}") for name in COMMANDS]


def parser():
    p = argparse.ArgumentParser(
        prog="sitebench",
        description="Build the benchmarks with Spack, run them with ReFrame against the "
        "site's references, store every run, compare sites.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for module in modules():
        name = module.__name__.rsplit(".", 1)[1].replace("_", "-")
        cmd = sub.add_parser(name, help=module.description, description=module.__doc__)
        module.setup_parser(cmd)
        cmd.set_defaults(func=module.command)
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
    for remainder in ("reframe_args", "command_args"):
        extra = getattr(args, remainder, None)
        if extra and extra[0] == "--":
            setattr(args, remainder, extra[1:])
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
