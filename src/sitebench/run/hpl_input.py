"""HPL input: problem size from memory, process grid from ranks, HPL.dat.

The lines after N, NB and the grid come from the site's HPL settings
(``site-configs/<site>/hpl.yaml``, :mod:`sitebench.sites.hpl_settings`; HPL's recommended
values where a site has none), in HPL 2.3's documented order (its ``TUNING`` file).
"""

import math

from sitebench.sites import hpl_settings

HPL_DAT = """HPLinpack benchmark input file
Written by sitebench for {n} x {n}, NB={nb}, {p} x {q} ranks
HPL.out      output file name (if any)
6            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
{pmap}            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
{pfact}            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
{nbmin:<13d}NBMINs (>= 1)
1            # of panels in recursion
{ndiv:<13d}NDIVs
1            # of recursive panel fact.
{rfact}            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
{bcast}            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
{depth:<13d}DEPTHs (>=0)
{swap}            SWAP (0=bin-exch,1=long,2=mix)
{swap_threshold:<13d}swapping threshold
{l1}            L1 in (0=transposed,1=no-transposed) form
{u}            U  in (0=transposed,1=no-transposed) form
{equilibration}            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
"""


def problem_size(memory_bytes, fraction, nb, cap=None):
    """Largest N, a multiple of NB, whose matrix fills ``fraction`` of memory."""
    n = int(math.sqrt(fraction * memory_bytes / 8))
    if cap:
        n = min(n, cap)
    return max(nb, n // nb * nb)


def process_grid(ranks):
    """P x Q = ranks with P <= Q and P as close to sqrt(ranks) as possible."""
    p = max(d for d in range(1, int(math.isqrt(ranks)) + 1) if ranks % d == 0)
    return p, ranks // p


def hpl_dat(n, nb, p, q, settings=None):
    """HPL.dat for one N, one NB and one P x Q grid; the other lines from ``settings`` (a
    mapping of :mod:`sitebench.sites.hpl_settings` keys; HPL's recommended values where a
    key is missing)."""
    given = {**hpl_settings.DEFAULTS, **(settings or {})}
    codes = {k: hpl_settings.CHOICES[k][given[k]] for k in hpl_settings.CHOICES}
    return HPL_DAT.format(
        n=n,
        nb=nb,
        p=p,
        q=q,
        nbmin=given["nbmin"],
        ndiv=given["ndiv"],
        depth=given["depth"],
        swap_threshold=given["swap_threshold"],
        equilibration=int(bool(given["equilibration"])),
        **codes,
    )
