"""The command line, ``./sitebench <command>``: one module per command, as Spack's
``lib/spack/spack/cmd/``. Each module names its command and help, sets up its own parser
(``setup_parser``) and holds the command (``command``); this file only dispatches.

Each module also names its ``section`` (one of :data:`SECTIONS`: ``--help`` groups the
commands by it, as ``spack help`` does) and an ``example`` (the epilog of its ``--help``);
tests/test_cli_help.py fails when a command lacks either.

The CLI is the edge of the loop: it resolves a :class:`~sitebench.sites.site.Site` once
and may import from every stage.
"""

import argparse
import importlib
import sys
import textwrap

from sitebench.cli.common import subcommands
from sitebench.common.errors import SitebenchError
from sitebench.common.terminal import shown

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
    "completion",
)

#: The sections of ``--help``, in order, with the task each groups.
SECTIONS = {
    "running": "run the benchmarks",
    "sites": "describe and check a site",
    "results": "read the stored runs",
    "exchange": "share runs between sites",
    "maintenance": "build caches, mirrors, tools, tests",
}


def modules(names=COMMANDS):
    return [importlib.import_module(f"sitebench.cli.{name}") for name in names]


def parser(only=None):
    """The whole command line; with ``only`` (a command's name), the top-level parser with
    that one command: a command then imports none of the others' modules (their imports
    cost 0.25 s of ``./sitebench compare`` on a 2-core VM, 2026-11-28), and its own
    ``--help`` and usage errors read the same."""
    names = COMMANDS if only is None else (only.replace("-", "_"),)
    commands = [(m.__name__.rsplit(".", 1)[1].replace("_", "-"), m) for m in modules(names)]
    # The grouped listing is the epilog: argparse lists subcommands in one flat block.
    width = max(len(name) for name, _ in commands) + 4
    listing = []
    for section, task in SECTIONS.items():
        listing.append(f"{section} ({task}):")
        for name, module in commands:
            if getattr(module, "section", None) == section:
                listing.append(
                    textwrap.fill(
                        module.description,
                        width=96,
                        initial_indent=f"  {name:<{width}}",
                        subsequent_indent=" " * (width + 2),
                    )
                )
        listing.append("")
    listing.append("./sitebench COMMAND --help shows a command's options and an example.")
    p = argparse.ArgumentParser(
        prog="sitebench",
        usage="%(prog)s [-h] COMMAND ...",
        description="Build the benchmarks with Spack, run them with ReFrame against the site's\n"
        "references, store every run, compare sites.",
        epilog="\n".join(listing),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(
        dest="command", required=True, metavar="COMMAND", prog="sitebench", help=argparse.SUPPRESS
    )
    for name, module in commands:
        example = getattr(module, "example", "").strip("\n")
        cmd = sub.add_parser(
            name,
            help=module.description,
            description=module.__doc__,
            epilog=f"example:\n{example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.setup_parser(cmd)
        cmd.set_defaults(func=module.command)
        # A subcommand's --help shows the example lines that use it.
        for action, subparser in subcommands(cmd).items():
            own = [line for line in example.splitlines() if f" {name} {action}" in f"{line} "]
            subparser.epilog = "example:\n" + "\n".join(own)
            subparser.formatter_class = argparse.RawDescriptionHelpFormatter
    return p


#: Commands whose arguments go unparsed to another program.
PASSTHROUGH = {"spack": "spack_args", "test": "pytest_args"}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    # A command named as written gets its parser alone; anything else (none, an option, a
    # typo) the whole parser, with its listing or its error.
    named = argv and "_" not in argv[0] and argv[0].replace("-", "_") in COMMANDS
    only = argv[0] if named else None
    if argv and argv[0] in PASSTHROUGH:
        args = parser(only).parse_args(argv[:1])
        setattr(args, PASSTHROUGH[argv[0]], argv[1:])
    else:
        args = parser(only).parse_args(argv)
    for remainder in ("reframe_args", "command_args"):
        extra = getattr(args, remainder, None)
        if extra and extra[0] == "--":
            setattr(args, remainder, extra[1:])
    try:
        return args.func(args)
    except SitebenchError as err:
        print(shown(f"sitebench: error: {err.problem}"), file=sys.stderr)
        if err.fix:
            print(shown(f"  fix: {err.fix}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sitebench: interrupted", file=sys.stderr)
        return 130
