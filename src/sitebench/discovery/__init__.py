"""Stage 2, discovery: what a machine offers, found (the local site's detection on PATH,
environment modules walked whole and made Spack externals, each MPI's own prefix, the
toolchains proposed from them). It reads sites as data (:mod:`sitebench.sites`) and never
writes a site's reviewed files: onboarding does (:mod:`sitebench.onboarding`)."""
