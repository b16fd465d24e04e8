"""A centre's binary cache: a site's binaries built once, signed, installed on its other
clusters of the same target after their signatures are checked.

:func:`export` pushes every spec of an installed environment (roots and dependencies) to a
directory, signed with the one signing key of Spack's keyring (``spack gpg create``, or a
centre's key imported with ``spack gpg trust``); Spack puts the public key beside them and
rebuilds the directory's index. :func:`import_` installs the environment from that directory
alone with ``--use-buildcache only`` (nothing is built, nothing fetched from elsewhere),
Spack checking each binary's signature against the keys it trusts; an unsigned binary, or
one signed by a key it does not trust, stops the import before anything is installed,
unless ``allow_unsigned``. What was imported is then pushed to the machine cache
(:mod:`buildcache`), so every checkout of the machine takes it.

A binary is only offered for its exact hash, and the target is part of the hash: a cache
made for another CPU is never installed (its specs are simply not the environment's).
"""

import tempfile
from pathlib import Path

import yaml

from sitebench.common.errors import SitebenchError
from sitebench.spack import buildcache

NAME = "sitebench-centre"


def _url(directory):
    return f"file://{Path(directory).resolve()}"


def export(spack, env_dir, directory, env=None):
    """Push the installed environment ``env_dir`` to ``directory``, signed; return its URL."""
    directory = Path(directory).resolve()
    if directory.exists() and not directory.is_dir():
        raise SitebenchError(
            f"{directory} exists and is not a directory", "give a new or existing directory"
        )
    directory.mkdir(parents=True, exist_ok=True)
    proc = spack.run(
        "-e", env_dir, "buildcache", "push", "--update-index", _url(directory),
        capture=True, check=False, env=env,
    )  # fmt: skip
    if proc.returncode == 0:
        return _url(directory)
    said = (proc.stdout + proc.stderr).strip()
    if "No default key" in said or "PickKey" in said or "more than one" in said:
        fix = (
            "make one signing key for this centre (`./sitebench spack gpg create NAME EMAIL`) "
            "or import it (`./sitebench spack gpg trust SECRET.key`); a keyring with several "
            "secret keys is ambiguous"
        )
    elif "not installed" in said.lower():
        fix = "install the site's environment first (`./sitebench run --site SITE`)"
    else:
        fix = "read Spack's message above"
    raise SitebenchError(f"could not export the binaries to {directory}:\n{said[-2000:]}", fix)


def check_cache(directory):
    """``directory`` resolved, if it is a Spack binary cache; else a clear error."""
    directory = Path(directory).resolve()
    if not (directory / "v3" / "layout.json").is_file():
        raise SitebenchError(
            f"{directory} is not a Spack binary cache (no v3/layout.json)",
            "give the directory `./sitebench buildcache push DIR` wrote",
        )
    return directory


def unsigned_specs(directory):
    """Names of the specs whose manifest in the cache ``directory`` is not signed (a signed
    one is a clearsigned PGP message, an unsigned one plain JSON)."""
    found = []
    for manifest in sorted((Path(directory) / buildcache.SPECS).glob("*/*.spec.manifest.json")):
        with open(manifest, "rb") as fp:
            if not fp.read(64).startswith(b"-----BEGIN PGP SIGNED MESSAGE-----"):
                found.append(manifest.name.removesuffix(".spec.manifest.json"))
    return found


def _scope(workdir, directory, signed):
    """A command-line scope (-C) whose mirrors are exactly ``directory``'s binaries."""
    mirrors = {NAME: {"url": _url(directory), "source": False, "binary": True, "signed": signed}}
    body = yaml.safe_dump(mirrors, sort_keys=False)
    (Path(workdir) / "mirrors.yaml").write_text(
        "mirrors::\n" + "".join(f"  {line}\n" for line in body.splitlines())
    )
    return workdir


def import_(spack, env_dir, directory, trust=None, allow_unsigned=False, env=None):
    """Install ``env_dir`` from ``directory``'s binaries alone, signatures checked; push
    them to the machine cache. ``trust``: a public key file to trust first."""
    directory = check_cache(directory)
    unsigned = unsigned_specs(directory)
    if unsigned and not allow_unsigned:
        raise SitebenchError(
            f"{directory} holds {len(unsigned)} unsigned binaries ({', '.join(unsigned[:3])}"
            + (", ..." if len(unsigned) > 3 else "")
            + ")",
            "ask for a signed cache (`./sitebench buildcache push` with a Spack key); "
            "--allow-unsigned only for a cache you made yourself",
        )
    if trust:
        spack.run("gpg", "trust", Path(trust).resolve(), capture=True, env=env)
    with tempfile.TemporaryDirectory(prefix="sitebench-import-") as workdir:
        scope = _scope(workdir, directory, signed=not allow_unsigned)
        unchecked = ["--no-check-signature"] if allow_unsigned else []
        proc = spack.run(
            "-C", scope, "-e", env_dir, "install", "--use-buildcache", "only", *unchecked,
            capture=True, check=False, env=env,
        )  # fmt: skip
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).strip()
        if "signature" in said.lower() or "public key" in said.lower():
            fix = (
                "trust the key the cache was signed with (`--trust PUBLIC.key`, from the "
                "machine that pushed it); a cache you made yourself unsigned needs "
                "--allow-unsigned"
            )
        else:
            fix = (
                "the cache lacks a binary this environment needs (another target, another "
                "recipe or toolchain): push it from a machine where the environment is "
                "installed, with the same commit and target"
            )
        raise SitebenchError(f"could not import the binaries of {directory}:\n{said[-2000:]}", fix)
    cache = spack.buildcache
    if cache is not None and cache.writable:
        spack.run(
            "-e", env_dir, "buildcache", "push", "--unsigned", "--update-index", cache.url,
            capture=True, check=False, env=env,
        )  # fmt: skip
        buildcache.refresh_index(spack, cache)
    return proc
