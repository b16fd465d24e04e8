"""Lock drift: a committed spack.lock against a fresh concretization of its environment."""

import copy
import json

import pytest

from conftest import FIXTURES, sitebench
from sitebench.discovery import local_site
from sitebench.spack import lock_drift
from sitebench.common import paths

LOCK = json.loads((FIXTURES / "lock-drift/stream-hpl.spack.lock").read_text())


def node(lock, name):
    return next(n for n in lock["concrete_specs"].values() if n["name"] == name)


def test_the_same_lock_has_no_drift():
    assert lock_drift.compare_locks(LOCK, copy.deepcopy(LOCK)) == []


def test_a_version_and_variant_change_is_named():
    new = copy.deepcopy(LOCK)
    stream = node(new, "stream")
    stream["version"] = "5.9"
    stream["parameters"]["openmp"] = False
    lines = lock_drift.compare_locks(LOCK, new)
    assert len(lines) == 1
    assert (
        "stream@5.10" in lines[0] and "-> stream@5.9" in lines[0] and "'openmp': False" in lines[0]
    )


def test_a_changed_target_and_a_lost_dependency_are_named():
    new = copy.deepcopy(LOCK)
    hpl = node(new, "hpl")
    hpl["arch"]["target"] = "zen3"
    blas = [d for d in hpl["dependencies"] if d["name"] == "openblas"]
    assert blas, "the fixture's HPL links OpenBLAS"
    hpl["dependencies"] = [d for d in hpl["dependencies"] if d["name"] != "openblas"]
    lines = lock_drift.compare_locks(LOCK, new)
    assert any("target=zen3" in line and line.startswith("hpl:") for line in lines)
    assert any("openblas no longer a dependency" in line for line in lines)


def test_roots_added_and_removed_are_named():
    new = copy.deepcopy(LOCK)
    new["roots"] = [r for r in new["roots"] if r["spec"] != "hpl"]
    assert lock_drift.compare_locks(LOCK, new) == [
        "root 'hpl': in the lock, not in the environment any more"
    ]
    assert lock_drift.compare_locks(new, LOCK) == [
        "root 'hpl': new in the environment, not in the lock"
    ]


@pytest.mark.spack
def test_a_fresh_concretization_matches_its_lock_and_an_old_lock_drifts(spack, tmp_path):
    # An environment laid out like the checkout, concretized now: no drift against itself;
    # its lock aged by hand (an older STREAM) drifts, and the drift names it.
    # The environment includes the local site's detected config (made on a first run).
    local_site.detect(spack)
    env = tmp_path / "environments" / "tiny"
    env.mkdir(parents=True)
    (env / "spack.yaml").write_text(
        (FIXTURES / "lock-drift/spack.yaml").read_text().replace("  - hpl\n", "")
    )
    for name in ("site-configs", "spack-repo"):
        (tmp_path / name).symlink_to(paths.ROOT / name)
    lock = lock_drift.fresh_lock(spack, env)
    (env / "spack.lock").write_text(json.dumps(lock))
    assert lock_drift.drift(spack, env) == []
    node(lock, "stream")["version"] = "5.9"
    (env / "spack.lock").write_text(json.dumps(lock))
    lines = lock_drift.drift(spack, env)
    assert len(lines) == 1 and "stream@5.9" in lines[0] and "-> stream@5.10" in lines[0]


def _emulated(site):
    from sitebench.sites.site import Site

    return bool(Site.resolve(site).emulation)


# An emulated site's lock is concretized inside its root, under QEMU: slow.
COMMITTED = [
    pytest.param(site, marks=[pytest.mark.slow, pytest.mark.qemu]) if _emulated(site) else site
    for site in lock_drift.committed_environments()
]


@pytest.mark.spack
@pytest.mark.parametrize("site", COMMITTED)
def test_committed_environments_still_concretize_to_their_locks(site, request):
    """Every committed lock is what its environment concretizes to today. A native site's
    here; an emulated site's externals are of its architecture, so its lock is concretized
    again inside its root, as `./sitebench qemu-shell` runs it (about 3 min under QEMU). The
    arm64 lock had drifted unseen for three days (STREAM's default went from -O3 to -O2)."""
    from sitebench.sites import qemu_site
    from sitebench.sites.site import Site

    emulation = Site.resolve(site).emulation
    if not emulation:
        spack = request.getfixturevalue("spack")
        drift = lock_drift.drift(spack, paths.environment_dir(site))
        assert drift == [], f"environments/{site}/spack.lock drifted:\n" + "\n".join(drift)
        return
    root = emulation["root"]
    if not qemu_site.done(root, "externals"):
        pytest.skip(f"no prepared root at {root}: run ./sitebench qemu-run --site {site}")
    proc = sitebench(
        "qemu-shell", "--site", site, "--", str(paths.ROOT / "sitebench"), "lock-drift", site
    )
    said = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0 and f"environments/{site}: no drift" in proc.stdout, said


def test_the_committed_environments_are_found():
    # The detected site's lock is made per machine and never committed.
    assert "local" not in lock_drift.committed_environments()
