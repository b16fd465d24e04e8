"""Stage 1, build: the pinned, isolated Spack and what it does for a site's environment
(concretize once, lock drift, source mirror, installed roots). Knows paths, not sites."""
