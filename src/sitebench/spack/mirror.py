"""A source mirror of one site's environment, for sites without internet.

``./sitebench mirror --site <site> <dir>`` concretizes the site's environment
(once, as for a run), has Spack copy the source of every concrete spec into
``<dir>`` (``spack mirror create --all`` in the environment: the layout Spack
fetches from, sha256-named archives, checksums verified on the way in and
again at every later install), and writes ``site-configs/<site>/spack/
mirrors.yaml`` so the site's environment uses it. Carry ``<dir>`` to the
site; nothing is fetched there. With ``--binaries`` the installed environment's binaries
go in too, signed, so the site installs them instead of building (``./sitebench
buildcache``).
"""

from pathlib import Path

import yaml

from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic
from sitebench.spack import signed_cache


def create(spack, env_dir, directory, mirrors_file, name, committed=True, binaries=False):
    """Fill ``directory`` with the sources of the concretized environment ``env_dir`` and
    point ``mirrors_file`` (a site's ``spack/mirrors.yaml``) at it as mirror ``name``;
    return its URL. ``committed``: the site's files are in git (the local site's are not).
    ``binaries``: the installed environment's binaries too, signed (:mod:`signed_cache`),
    and the mirror serves them, their signatures checked at install."""
    directory = Path(directory).resolve()
    if directory.exists() and not directory.is_dir():
        raise SitebenchError(
            f"{directory} exists and is not a directory",
            "give a new or existing directory for the mirror",
        )
    directory.mkdir(parents=True, exist_ok=True)
    spack.run("-e", env_dir, "mirror", "create", "--all", "-d", directory)
    if binaries:
        signed_cache.export(spack, env_dir, directory)
    url = f"file://{directory}"
    mirrors_file.parent.mkdir(parents=True, exist_ok=True)
    note = "# Written by `sitebench mirror`" + ("" if committed else " (local site: not in git)")
    entry = {"url": url, "source": True, "binary": binaries}
    if binaries:
        entry["signed"] = True
    mirrors = {"mirrors": {name: entry}}
    write_atomic(mirrors_file, note + ".\n" + yaml.safe_dump(mirrors, sort_keys=False))
    return url
