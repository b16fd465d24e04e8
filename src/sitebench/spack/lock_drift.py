"""Lock drift: would a committed environment still concretize to its ``spack.lock``?

A site commits ``environments/<site>/spack.lock`` so that every night builds the same
specs. Spack, the builtin packages, our recipes or the site's config can move under it;
the lock then no longer says what a fresh concretization would build. This re-concretizes
a copy of the environment (``--fresh``, in a temporary directory laid out like the
checkout, so relative includes resolve; the committed files are never touched) and
compares it with the lock, root by root and package by package: version, variants,
target, compiler and dependencies added or gone.
"""

import json
import subprocess
import tempfile
from pathlib import Path

from sitebench.common import paths

#: What a lock node says about how a package is built (the rest is bookkeeping).
NODE_FIELDS = ("version", "parameters", "arch", "namespace")


def committed_environments():
    """The sites whose ``spack.lock`` is tracked by git (the detected ``local`` is not)."""
    proc = subprocess.run(
        ["git", "ls-files", "environments/*/spack.lock"],
        cwd=paths.ROOT,
        capture_output=True,
        text=True,
    )
    return sorted(Path(line).parent.name for line in proc.stdout.split())


def _nodes(lock):
    """{root spec: {package name: node}} of a lock: each root with everything it links."""
    specs = lock.get("concrete_specs", {})
    result = {}
    for root in lock.get("roots", []):
        seen, stack = {}, [root["hash"]]
        while stack:
            node = specs.get(stack.pop())
            if node is None or node["name"] in seen:
                continue
            seen[node["name"]] = node
            stack.extend(dep["hash"] for dep in node.get("dependencies", []))
        result[root["spec"]] = seen
    return result


def _describe(node):
    params = node.get("parameters", {})
    variants = {k: v for k, v in params.items() if v not in ([], None) and k != "build_system"}
    target = node.get("arch", {}).get("target")
    target = target.get("name") if isinstance(target, dict) else target
    return f"{node['name']}@{node.get('version')} {variants} target={target}"


def compare_locks(old, new):
    """Human-readable differences between two locks; empty when they build the same."""
    before, after = _nodes(old), _nodes(new)
    lines = []
    for spec in sorted(set(before) | set(after)):
        if spec not in after:
            lines.append(f"root {spec!r}: in the lock, not in the environment any more")
            continue
        if spec not in before:
            lines.append(f"root {spec!r}: new in the environment, not in the lock")
            continue
        was, now = before[spec], after[spec]
        for name in sorted(set(was) | set(now)):
            if name not in now:
                lines.append(f"{spec}: {name} no longer a dependency ({_describe(was[name])})")
            elif name not in was:
                lines.append(f"{spec}: {name} is a new dependency ({_describe(now[name])})")
            elif any(was[name].get(f) != now[name].get(f) for f in NODE_FIELDS):
                lines.append(f"{spec}: {_describe(was[name])} -> {_describe(now[name])}")
    return lines


def fresh_lock(spack, env_dir):
    """The lock a fresh concretization of ``env_dir``'s spack.yaml gives today."""
    env_dir = Path(env_dir).resolve()
    checkout = env_dir.parent.parent
    with tempfile.TemporaryDirectory(prefix="sitebench-drift-") as tmp:
        copy = Path(tmp) / "environments" / env_dir.name
        copy.mkdir(parents=True)
        (copy / "spack.yaml").write_text((env_dir / "spack.yaml").read_text())
        # The includes and repos are relative to the checkout: mirror its layout.
        for name in ("site-configs", "spack-repo"):
            (Path(tmp) / name).symlink_to(checkout / name)
        spack.run("-e", copy, "concretize", "--fresh", capture=True)
        return json.loads((copy / "spack.lock").read_text())


def drift(spack, env_dir):
    """Differences between ``env_dir``'s committed lock and a fresh concretization."""
    lock = json.loads((Path(env_dir) / "spack.lock").read_text())
    return compare_locks(lock, fresh_lock(spack, env_dir))
