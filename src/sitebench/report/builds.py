"""HPL builds by optimisation level: a readable label for the flags a run's HPL was built with.

The sitebench HPL recipe (``spack-repo/.../hpl/package.py``) chooses the flags from its
``level`` variant (1, 2: -O0 without vector ISA; 3, tuned: -O3 with the target's SIMD, or as
``simd`` says); older builds of the recipe had an ``optimization`` variant instead. The BLAS
is the one the installed spec depends on (the run's ``provenance/specs.json``).
"""

import json
import re

_VARIANT = re.compile(r"\b(level|simd|optimization)=(\S+)")
_HASH = re.compile(r"/([a-z0-9]{7,32})\s*$")
_SIMD = {"auto": "target SIMD", "neon": "NEON only", "none": "no SIMD"}


def hpl_flags(concrete_spec):
    """The build flags of an ``hpl@...`` concrete spec, e.g. ``-O3 + target SIMD``."""
    variants = dict(_VARIANT.findall(concrete_spec or ""))
    level = variants.get("level")
    simd = _SIMD.get(variants.get("simd", "auto"), variants.get("simd"))
    if level in ("1", "2"):
        return f"level {level}: -O0, no SIMD"
    if level == "3":
        return "level 3: -O3 + target SIMD"
    if level == "tuned":
        return f"-O3 + {simd}"
    if "optimization" in variants:
        return f"-{variants['optimization']} + {simd}"
    return "unknown flags"


def blas_of(concrete_spec, specs_text):
    """The BLAS package the spec (matched by its hash in specs.json) links, or ``None``."""
    found = _HASH.search(concrete_spec or "")
    if not found or not specs_text:
        return None
    try:
        nodes = json.loads(specs_text)
    except json.JSONDecodeError:
        return None
    for node in nodes if isinstance(nodes, list) else []:
        if isinstance(node, dict) and str(node.get("hash", "")).startswith(found.group(1)):
            for dep in node.get("dependencies") or []:
                if "blas" in ((dep.get("parameters") or {}).get("virtuals") or []):
                    return dep.get("name")
    return None


def hpl_build_label(concrete_spec, specs_text):
    """``-O3 + target SIMD, openblas``: what the optimisation-level chart groups by."""
    blas = blas_of(concrete_spec, specs_text)
    return hpl_flags(concrete_spec) + (f", {blas}" if blas else "")
