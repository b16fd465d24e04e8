"""A shared results repository that protects itself, for centres that host it.

``./sitebench exchange init-remote PATH`` makes a bare repository whose git refuses what
no site may do, before any site's pull has to: ``receive.fsckObjects`` (malformed objects,
``.git`` or ``..`` tree entries), ``receive.denyNonFastForwards`` (history rewrites),
``receive.denyDeletes``, and a ``pre-receive`` hook that is :mod:`sitebench.results.verify`
itself, applying the same rules as every pull (paths, sizes, signatures) with a copy of the
trust list it is given, kept in ``PATH/sitebench/`` where no push can change it.
"""

import json
import shutil
import subprocess
from pathlib import Path

from sitebench.common.errors import SitebenchError
from sitebench.results import verify
from sitebench.results.trust import RULES_DIR, check_one_key_per_site


def _git(bare, *args, stdin=None):
    proc = subprocess.run(
        [
            "git",
            "-c",
            "user.name=sitebench",
            "-c",
            "user.email=sitebench@localhost",
            "--git-dir",
            str(bare),
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SitebenchError(
            f"git {args[0]} failed in {bare}: {proc.stderr.strip()}",
            "check that the directory is writable and git is installed",
        )
    return proc.stdout.strip()


def init_remote(path, trust_file, branch="main", unsigned_sites=(), max_file=None, max_run=None):
    """Make the protected bare repository at ``path`` (new or empty); return its path."""
    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise SitebenchError(
            f"{path} exists and is not empty",
            "name a new directory: init-remote never changes an existing repository",
        )
    trusted = verify.read_allowed_signers(trust_file)
    check_one_key_per_site(trusted, trust_file)
    if not trusted and not unsigned_sites:
        raise SitebenchError(
            f"{trust_file} trusts no key",
            "name an allowed_signers file with the sites' keys (./sitebench trust list shows "
            "yours: ~/.config/sitebench/trust/allowed_signers), or --allow-unsigned SITE",
        )
    # --shared=group at creation: git makes its directories group-writable and setgid now,
    # and every object directory a push adds later (config alone after init does not).
    subprocess.run(
        ["git", "init", "--quiet", "--bare", "--shared=group", "-b", branch, str(path)],
        check=True,
    )
    for key, value in (
        ("receive.fsckObjects", "true"),
        ("receive.denyNonFastForwards", "true"),
        ("receive.denyDeletes", "true"),
        # Sites fetch commits and trees, then a run's blobs by id when asked (partial clone).
        ("uploadpack.allowFilter", "true"),
        ("uploadpack.allowAnySHA1InWant", "true"),
        # show asks a run's sizes before fetching its bulk (protocol v2 object-info).
        ("transfer.advertiseObjectInfo", "true"),
    ):
        _git(path, "config", key, value)
    rules_dir = path / RULES_DIR
    rules_dir.mkdir()
    shutil.copyfile(trust_file, rules_dir / "allowed_signers")
    settings = {
        "branch": branch,
        "prefix": "",
        "max_file": max_file or verify.MAX_FILE,
        "max_run": max_run or verify.MAX_RUN,
        "unsigned_sites": sorted(unsigned_sites),
        # The federation's registry may only be rooted in this host's key (trust register).
        "registry_host": _host_fingerprint(),
    }
    (rules_dir / "rules.json").write_text(json.dumps(settings, indent=2) + "\n")
    _install_hook(path)
    # The first commit, made here: sites then only ever add runs on top of it.
    empty = _git(path, "hash-object", "-t", "tree", "-w", "--stdin", stdin="")
    root = _git(path, "commit-tree", empty, "-m", "results repository (sitebench exchange)")
    _git(path, "update-ref", f"refs/heads/{branch}", root)
    return path


def _install_hook(path):
    """The pre-receive hook: this sitebench's verify.py, written aside then renamed, so a
    push arriving meanwhile meets the old hook or the new one, never half of one."""
    hook = path / "hooks" / "pre-receive"
    aside = hook.with_name(".pre-receive.new")
    shutil.copyfile(verify.__file__, aside)
    aside.chmod(0o755)
    aside.replace(hook)
    return hook


def upgrade_remote(path):
    """Give the repository init-remote made at ``path`` this sitebench's checks (its hook);
    its trust list, limits and history are left as they are. Needed when a new version
    lets runs carry a file the old hook refuses (``figures.json``)."""
    path = Path(path)
    if not (path / RULES_DIR / "rules.json").is_file() or not (path / "hooks").is_dir():
        raise SitebenchError(
            f"{path} is not a results repository made by ./sitebench exchange init-remote",
            "name the bare repository sites push to (it holds sitebench/rules.json)",
        )
    return _install_hook(path)


def _host_fingerprint():
    from sitebench.results import registry

    _, public = registry.host_key()
    return verify.fingerprint(public)
