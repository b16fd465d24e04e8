"""HPL input: problem size from memory, process grid from ranks, HPL.dat."""

import math

HPL_DAT = """HPLinpack benchmark input file
Written by sitebench for {n} x {n}, NB={nb}, {p} x {q} ranks
HPL.out      output file name (if any)
6            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
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


def hpl_dat(n, nb, p, q):
    """HPL.dat for one N, one NB and one P x Q grid (the other settings are HPL's defaults)."""
    return HPL_DAT.format(n=n, nb=nb, p=p, q=q)
