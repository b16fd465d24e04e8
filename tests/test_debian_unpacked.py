"""The Debian packages the tests prepare themselves (tests/debian_unpacked.py): fetched and
unpacked once per user even when two test workers ask at once, and a package apt cannot
fetch is a reason to skip, leaving nothing behind."""

import multiprocessing
import os
import shutil
import stat
from pathlib import Path

import pytest

import debian_unpacked

APT_GET = shutil.which("apt-get")


def _counting_apt_get(tmp_path):
    """A bin/ whose apt-get logs each call to ``calls`` and runs the real one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "apt-get"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\nexec {APT_GET} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def _envmod_in(cache, path, queue):
    os.environ["SITEBENCH_CACHE_DIR"] = str(cache)
    os.environ["PATH"] = path
    try:
        queue.put(str(debian_unpacked.envmod()))
    except debian_unpacked.Unavailable as err:
        queue.put(f"unavailable: {err}")


@pytest.mark.skipif(APT_GET is None, reason="no apt-get: not a Debian machine")
def test_two_workers_at_once_fetch_once_and_both_get_the_whole_tree(tmp_path):
    cache = tmp_path / "cache"
    path = f"{_counting_apt_get(tmp_path)}:{os.environ['PATH']}"
    queue = multiprocessing.get_context("fork").Queue()
    workers = [
        multiprocessing.get_context("fork").Process(target=_envmod_in, args=(cache, path, queue))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    got = [queue.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    if got[0].startswith("unavailable"):
        pytest.skip(got[0])
    tree = cache / "test-debs" / "environment-modules"
    assert got == [str(tree)] * 2
    assert (tree / debian_unpacked.COMPLETE).is_file()
    assert (tree / "usr/lib/x86_64-linux-gnu/modulecmd.tcl").is_file()
    assert (tmp_path / "calls").read_text().splitlines() == ["download environment-modules"]
    # Nothing half-made left beside it; the next ask finds it without apt.
    assert sorted(p.name for p in tree.parent.iterdir()) == [
        ".environment-modules.lock",
        "environment-modules",
    ]
    os.environ["SITEBENCH_CACHE_DIR"] = str(cache)
    try:
        assert debian_unpacked.envmod() == tree
    finally:
        del os.environ["SITEBENCH_CACHE_DIR"]
    assert len((tmp_path / "calls").read_text().splitlines()) == 1


@pytest.mark.skipif(APT_GET is None, reason="no apt-get: not a Debian machine")
def test_a_package_apt_cannot_fetch_is_a_reason_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SITEBENCH_CACHE_DIR", str(tmp_path))
    with pytest.raises(debian_unpacked.Unavailable) as err:
        debian_unpacked.unpacked("ghost", ("sitebench-no-such-package",))
    assert "apt-get download sitebench-no-such-package failed" in str(err.value)
    assert "sitebench-no-such-package" in str(err.value).split("failed", 1)[1]
    assert not (tmp_path / "test-debs" / "ghost").exists()
    assert [p.name for p in (tmp_path / "test-debs").iterdir()] == [".ghost.lock"]


@pytest.mark.skipif(APT_GET is None, reason="no apt-get: not a Debian machine")
def test_no_reachable_mirror_is_a_reason(tmp_path, monkeypatch):
    """apt's mirror unreachable (a proxy nobody listens on): said, nothing left behind."""
    monkeypatch.setenv("SITEBENCH_CACHE_DIR", str(tmp_path))
    conf = tmp_path / "apt.conf"
    conf.write_text('Acquire::http::Proxy "http://127.0.0.1:9/"; Acquire::Retries "0";\n')
    monkeypatch.setenv("APT_CONFIG", str(conf))
    with pytest.raises(debian_unpacked.Unavailable) as err:
        debian_unpacked.envmod()
    assert "apt-get download environment-modules failed" in str(err.value)
    assert "cannot reach a Debian mirror" in str(err.value)
    assert not (tmp_path / "test-debs" / "environment-modules").exists()


def test_apt_get_missing_is_a_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("SITEBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(debian_unpacked.Unavailable, match="apt-get download environment-"):
        debian_unpacked.envmod()
    assert not Path(tmp_path / "test-debs" / "environment-modules").exists()
