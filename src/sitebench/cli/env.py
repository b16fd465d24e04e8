"""Print the exports that set up a shell to type spack and reframe by hand, as sitebench
runs them: ``eval "$(./sitebench env)"``."""

import shlex

description = "print exports to use spack/reframe by hand like sitebench"

EXPORTED = (
    "PATH",
    "SPACK_USER_CONFIG_PATH",
    "SPACK_SYSTEM_CONFIG_PATH",
    "SPACK_USER_CACHE_PATH",
    "SPACK_PYTHON",
)

section = "maintenance"

example = """
  ./sitebench env                               # the exports, to read or keep
  eval "$(./sitebench env)"                     # then spack and reframe by hand
  spack -e environments/local install
"""


def setup_parser(_p):
    pass


def command(_args):
    from sitebench.spack import pinned

    env = pinned.setup().environ()
    for name in EXPORTED:
        print(f"export {name}={shlex.quote(env[name])}")
    return 0
