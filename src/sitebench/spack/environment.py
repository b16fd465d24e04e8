"""A site's Spack environment is concretized once and reused by every test.

``spack.lock`` is rewritten only when something that decides the concrete
specs changed: the environment's ``spack.yaml``, the config it includes and the
site's, the recipes in ``spack-repo/``, Spack or the builtin repository. A stamp
next to the lock records the hash of those inputs.

A user's other checkouts reuse it too: the lock is kept in the user's cache
(``~/.cache/sitebench/spack-locks/<Spack commit>-<spack-packages commit>/``) under
that hash, whose files are named as their checkout names them, so a second clone of
the same commit on the same machine copies the lock instead of concretizing again
(44 s of a fresh clone's first run, perf/results/first-result-20261125T165852Z.json).
Concretization is ``--fresh``: its result depends on those inputs alone, not on what
is installed or cached. Spack's own concretization cache would do this, but in Spack
1.1 it is off by default and keyed without the recipes' hashes (spack/spack#51553).
"""

import hashlib
import json
import sys
import time

import yaml

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic
from sitebench.spack import repo_index

STAMP = ".sitebench-concretized.json"


def inputs_hash(env_dir, site_dir, identity):
    """The hash of what decides the concrete specs: ``identity`` (Spack's and the builtin
    repository's), the environment's ``spack.yaml``, the Spack config it includes and the
    site's (mirrors left out: they decide where sources come from, not what is built), and
    ``spack-repo/``. Each file is named as the checkout names it (an include as written,
    a recipe relative to ``spack-repo/``), so another checkout of the same files has the
    same hash."""
    digest = hashlib.sha256()
    digest.update(f"{identity}\n".encode())
    repo = paths.ROOT / "spack-repo"
    files = [("environment/spack.yaml", env_dir / "spack.yaml")]
    files += _included(env_dir, [("site", site_dir / "spack")])
    files += [
        (f"spack-repo/{p.relative_to(repo)}", p)
        for p in sorted([*repo.rglob("*.py"), *repo.rglob("repo.yaml")])
    ]
    for name, path in files:
        digest.update(name.encode() + b"\0" + _canonical(path) + b"\0")
    return digest.hexdigest()


def _included(env_dir, extra):
    """[(name, file)] of the config the environment includes (its ``include:`` entries,
    resolved from ``env_dir``) and of the ``extra`` (name, folder) pairs, each file once."""
    try:
        manifest = yaml.safe_load((env_dir / "spack.yaml").read_text()) or {}
        entries = (manifest.get("spack") or {}).get("include") or []
    except (yaml.YAMLError, AttributeError):
        entries = []  # Spack will say what is wrong with it; the bytes are hashed anyway
    wanted = [(str(e), e) for e in entries if isinstance(e, str)]
    wanted += [(str(e["path"]), e["path"]) for e in entries if isinstance(e, dict) and "path" in e]
    found, seen = [], set()
    for name, place in [*wanted, *((n, str(p)) for n, p in extra)]:
        path = env_dir / place  # an absolute place stays itself
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path] * path.is_file()
        for file in files:
            if file.name != "mirrors.yaml" and file.resolve() not in seen:
                seen.add(file.resolve())
                found.append((f"{name}/{file.name}", file))
    return found


def _canonical(path):
    """A ``packages.yaml``'s data with its mappings' keys sorted (Spack's detection lists
    the same packages in another order from run to run: seen in two clones' files, which
    then missed each other's lock), other files' bytes. Only there: the order of some
    other mappings matters to Spack (``repos:``, a precedence)."""
    if path.name != "packages.yaml":
        return path.read_bytes()
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return path.read_bytes()  # Spack will say what is wrong with it
    return json.dumps(data, sort_keys=True, default=str).encode()


def lock_key(spack, env_dir, site_dir, spack_version, builtin_repo):
    """(hash of the inputs, the user's shared lock of them or None). Shared only where Spack
    and the builtin repository are clean checkouts of commits (:func:`repo_index.pinned_id`);
    otherwise the hash names the builtin repository by its path, for this checkout alone."""
    pinned = repo_index.pinned_id(spack, builtin_repo)
    wanted = inputs_hash(env_dir, site_dir, pinned or f"spack {spack_version} {builtin_repo}")
    if not pinned:
        return wanted, None
    return wanted, paths.user_cache_dir() / "spack-locks" / pinned / f"{wanted}.lock"


def _valid_lock(text):
    """True when ``text`` is a Spack lock whose every root is among its concrete specs."""
    try:
        lock = json.loads(text)
        specs = lock["concrete_specs"]
        return bool(lock["roots"]) and all(root["hash"] in specs for root in lock["roots"])
    except (ValueError, KeyError, TypeError):
        return False


def _take_shared(shared, lock):
    """Copy the user's lock ``shared`` to ``lock``; False where there is none to trust."""
    try:
        text = shared.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    if not _valid_lock(text):
        print(f"==> ignoring {shared}: not a whole Spack lock", file=sys.stderr)
        return False
    write_atomic(lock, text)
    return True


def _keep_shared(lock, shared):
    try:
        shared.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(shared, lock.read_text())
    except OSError:
        pass  # a cache only: the next checkout concretizes


def ensure_concretized(spack, env_dir, site_dir, spack_version, builtin_repo):
    """Concretize the environment ``env_dir`` (with the Spack config of the site folder
    ``site_dir``) unless its lock is current; return ``env_dir``."""
    if not (env_dir / "spack.yaml").is_file():
        raise SitebenchError(
            f"no Spack environment: {paths.shown(env_dir / 'spack.yaml')} is missing",
            "create environments/<site>/spack.yaml (see environments/README.md)",
        )
    wanted, shared = lock_key(spack, env_dir, site_dir, spack_version, builtin_repo)
    lock, stamp = env_dir / "spack.lock", env_dir / STAMP
    if lock.is_file() and stamp.is_file():
        try:
            if json.loads(stamp.read_text()).get("inputs") == wanted:
                print(
                    f"==> reusing {paths.shown(lock)} (inputs unchanged)",
                    file=sys.stderr,
                )
                return env_dir
        except json.JSONDecodeError:
            pass  # a damaged stamp only costs one concretization
    if shared and _take_shared(shared, lock):
        print(
            f"==> reusing {shared}: concretized from the same inputs by another checkout",
            file=sys.stderr,
        )
        write_atomic(stamp, json.dumps({"inputs": wanted, "from": str(shared)}))
        return env_dir
    print(f"==> concretizing {paths.shown(env_dir)}", file=sys.stderr)
    start = time.monotonic()
    spack.run("-e", env_dir, "concretize", "--force", "--fresh")
    write_atomic(
        stamp, json.dumps({"inputs": wanted, "seconds": round(time.monotonic() - start, 1)})
    )
    if shared:
        _keep_shared(lock, shared)
    return env_dir
