"""Stage 2, onboarding: a new site's files written from what discovery found
(``./sitebench onboard``), and every site's files proved before anything runs
(``./sitebench validate``, a toolchain's modules against its Spack externals)."""
