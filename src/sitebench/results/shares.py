"""Work shared between this process and forked copies of it, one per core.

The store's refresh after a first pull indexes thousands of runs, each mostly Python
(parsing its JSON, making its figure rows): one core's work. Its sites are independent
(one folder of segments each), so they are shared out, by weight, between this process and
``fork``-ed copies of it: a copy inherits what the refresh already read (no pickling of
the work in), and hands back only a small result. A copy that dies (killed, out of memory)
leaves its share to the caller, told by a None result: nothing half done is taken.
"""

import os
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
import multiprocessing

#: How long the caller waits for a copy once its own share is done: this many times what its
#: own took, and never less than ``MIN_WAIT_S``. The shares are of about equal weight, so a
#: copy far slower than that is stuck (a lock another thread held at the fork): it is
#: killed and its share done here, as for a copy that died.
WAIT_FACTOR = 4
MIN_WAIT_S = 120.0

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
    the same time. A share whose copy died, or did not end within the wait
    (:data:`WAIT_FACTOR`, :data:`MIN_WAIT_S`) and was killed, gives None; an exception
    raised by ``work`` is raised here (once every copy is done)."""
    global _SHARES
    if len(shares) < 2:
        return [work(share) for share in shares]
    _SHARES = shares, work
    try:
        # fork: the copies inherit the work as it is in memory (the sites' state read, the
        # reader of runs), none of it sent; only results come back.
        context = multiprocessing.get_context("fork")
        pool = ProcessPoolExecutor(len(shares) - 1, mp_context=context)
        stuck = False
        try:
            futures = [pool.submit(_in_copy, at) for at in range(1, len(shares))]
            started = time.monotonic()
            results = [work(shares[0])]
            waited = max(MIN_WAIT_S, WAIT_FACTOR * (time.monotonic() - started))
            deadline = time.monotonic() + waited
            for future in futures:
                try:
                    left = max(0.0, deadline - time.monotonic())
                    results.append(future.result(timeout=left))
                except BrokenProcessPool:
                    results.append(None)
                except FutureTimeout:
                    stuck = True
                    results.append(None)
        finally:
            if stuck:
                # The executor has no public way to stop a worker that never returns.
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.kill()
            pool.shutdown(wait=not stuck, cancel_futures=True)
        return results
    finally:
        _SHARES = None
