"""Print, as JSON, the flags the suite gets per target. Run: spack -e ENV python hpl_flags.py

For the concrete roots of the environment (x86_64 targets this host can
concretize for): the target of every package built for a ``sitebench-suite``
root, the target flags Spack's compiler wrapper injects, and the recipe's
own HPL flags. For aarch64 targets, which cannot be concretized on
an x86_64 host: the wrapper flags and the recipe's SIMD logic per choice,
from archspec's description of those CPUs.
"""

import json
import sys

import spack.environment
import spack.repo
import spack.vendor.archspec.cpu as archspec

COMPILER = ("gcc", "12.2.0")
env = spack.environment.active_environment()
out = {"concrete": [], "aarch64": {}, "suites": []}
for root in env.concrete_roots():
    if root.name == "sitebench-suite":
        built = [s for s in root.traverse(root=False) if not s.external]
        out["suites"].append(
            {
                "target": str(root.target),
                "packages": {s.name: str(s.target) for s in built},
                "wrapper": root.target.optimization_flags(*COMPILER),
            }
        )
    for spec in (s for s in root.traverse() if s.name == "hpl"):
        out["concrete"].append(
            {
                "target": str(spec.target),
                "level": spec.variants["level"].value,
                "blas": spec["blas"].name,
                "wrapper": spec.target.optimization_flags(*COMPILER),
                "hpl": spec.package.hpl_flags(),
            }
        )
module = sys.modules[spack.repo.PATH.get_pkg_class("hpl").__module__]
for name in ("neoverse_n1", "neoverse_v1", "a64fx"):
    target = archspec.TARGETS[name]
    out["aarch64"][name] = {
        "wrapper": target.optimization_flags(*COMPILER),
        **{
            choice: module.simd_flags(target, choice, *COMPILER)
            for choice in ("auto", "neon", "none")
        },
    }
print(json.dumps(out))
