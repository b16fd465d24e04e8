"""Work shared between this process and forked copies of it, one per core.

The store's refresh after a first pull indexes thousands of runs, each mostly Python
(parsing its JSON, making its figure rows): one core's work. Its sites are independent
(one folder of segments each), so they are shared out, by weight, between this process and
``fork``-ed copies of it: a copy inherits what the refresh already read (no pickling of
the work in), and hands back only a small result. A copy that dies (killed, out of memory)
leaves its share to the caller, told by a None result: nothing half done is taken.
"""

import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
import multiprocessing

#: The shares of the running :func:`run` (a forked copy reads its own from here).
_SHARES = None


def cores():
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def split(items, weight, count):
    """``items`` in ``count`` shares of about equal total ``weight(item)`` (the heaviest
    first, each to the lightest share), each share in the items' order; empty ones left out."""
    shares = [[] for _ in range(count)]
    loads = [0] * count
    for at in sorted(range(len(items)), key=lambda i: -weight(items[i])):
        lightest = loads.index(min(loads))
        shares[lightest].append(at)
        loads[lightest] += weight(items[at])
    return [[items[i] for i in sorted(share)] for share in shares if share]


def _in_copy(index):
    shares, work = _SHARES
    return work(shares[index])


def run(shares, work):
    """[work(share)] of each share: the first here, the others each in a forked copy, at
    the same time. A share whose copy died gives None; an exception raised by ``work``
    is raised here (once every copy is done)."""
    global _SHARES
    if len(shares) < 2:
        return [work(share) for share in shares]
    _SHARES = shares, work
    try:
        # fork: the copies inherit the work as it is in memory (the sites' state read, the
        # reader of runs), none of it sent; only results come back.
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(len(shares) - 1, mp_context=context) as pool:
            futures = [pool.submit(_in_copy, at) for at in range(1, len(shares))]
            results = [work(shares[0])]
            for future in futures:
                try:
                    results.append(future.result())
                except BrokenProcessPool:
                    results.append(None)
        return results
    finally:
        _SHARES = None
