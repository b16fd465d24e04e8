"""A site's Spack environment is concretized once and reused by every test.

``spack.lock`` is rewritten only when something that decides the concrete
specs changed: the environment's ``spack.yaml``, the site's Spack config, the
recipes in ``spack-repo/``, the Spack version or the builtin repository. A
stamp next to the lock records the hash of those inputs.
"""

import hashlib
import json
import sys
import time

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.common.files import write_atomic

STAMP = ".sitebench-concretized.json"


def inputs_hash(env_dir, site_dir, spack_version, builtin_repo):
    digest = hashlib.sha256()
    digest.update(f"spack {spack_version}\nbuiltin {builtin_repo}\n".encode())
    files = [env_dir / "spack.yaml"]
    # Mirrors decide where sources come from, not what is built.
    files += sorted(p for p in (site_dir / "spack").glob("*.yaml") if p.name != "mirrors.yaml")
    files += sorted((paths.ROOT / "spack-repo").rglob("*.py"))
    files += sorted((paths.ROOT / "spack-repo").rglob("repo.yaml"))
    for path in files:
        digest.update(paths.shown(path).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def ensure_concretized(spack, env_dir, site_dir, spack_version, builtin_repo):
    """Concretize the environment ``env_dir`` (with the Spack config of the site folder
    ``site_dir``) unless its lock is current; return ``env_dir``."""
    if not (env_dir / "spack.yaml").is_file():
        raise SitebenchError(
            f"no Spack environment: {paths.shown(env_dir / 'spack.yaml')} is missing",
            "create environments/<site>/spack.yaml (see environments/README.md)",
        )
    wanted = inputs_hash(env_dir, site_dir, spack_version, builtin_repo)
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
    print(f"==> concretizing {paths.shown(env_dir)}", file=sys.stderr)
    start = time.monotonic()
    spack.run("-e", env_dir, "concretize", "--force", "--fresh")
    write_atomic(
        stamp, json.dumps({"inputs": wanted, "seconds": round(time.monotonic() - start, 1)})
    )
    return env_dir
