"""Run Spack with sitebench's isolated configuration (its user and system scopes, caches
and install tree under .sitebench/): ``./sitebench spack <args>``."""

import argparse
import subprocess

description = "run Spack with sitebench's isolated configuration"

section = "maintenance"

example = """
  ./sitebench spack find -lv                    # Spack, isolated as sitebench runs it
"""


def setup_parser(p):
    p.add_argument("spack_args", nargs=argparse.REMAINDER)


def command(args):
    from sitebench.spack import pinned

    spack = pinned.setup()
    return subprocess.run([spack.executable, *args.spack_args], env=spack.environ()).returncode
