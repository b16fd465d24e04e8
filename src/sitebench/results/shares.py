"""Work shared between this process and forked copies of it, one per core.

The store's refresh after a first pull indexes thousands of runs, each mostly Python
(parsing its JSON, making its figure rows): one core's work. Its sites are independent
(one folder of segments each), so they are shared out, by weight, between this process and
``fork``-ed copies of it: a copy inherits what the refresh already read (no pickling of
the work in), and hands back only a small result. A copy that dies (killed, out of memory)
leaves its share to the caller, told by a None result: nothing half done is taken.
"""

import multiprocessing
import os
import time
from multiprocessing.connection import wait as wait_for

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


def _in_copy(send, index):
    """A forked copy's whole life: its share's result (or the exception ``work`` raised)
    sent to the caller through ``send``."""
    shares, work = _SHARES
    try:
        outcome = (True, work(shares[index]))
    except BaseException as err:  # handed to the caller, raised there
        outcome = (False, err)
    try:
        send.send(outcome)
    except Exception as err:  # a result or exception pickle cannot carry
        send.send((False, RuntimeError(f"share {index} not sent back: {err}")))
    finally:
        send.close()


def _start_copies(count):
    """``count`` forked copies, share 1 to ``count``: [(process, receiving end)]."""
    # fork: the copies inherit the work as it is in memory (the sites' state read, the
    # reader of runs), none of it sent; only results come back.
    context = multiprocessing.get_context("fork")
    copies = []
    for index in range(1, count + 1):
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_in_copy, args=(send, index), daemon=True)
        process.start()
        send.close()  # the copy's end: EOF here once the copy is gone
        copies.append((process, receive))
    return copies


def _collect(copies, deadline):
    """[(ok, value) or None] of each copy, in order: None for one that died or was not done
    by ``deadline`` (then killed). Every copy has ended on return."""
    outcomes = [None] * len(copies)
    waiting = {receive: at for at, (_, receive) in enumerate(copies)}
    while waiting:
        ready = wait_for(list(waiting), timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            break  # the copies left are stuck
        for receive in ready:
            at = waiting.pop(receive)
            try:
                outcomes[at] = receive.recv()  # read before the join: a large result
            except (EOFError, OSError):  # fills the pipe and holds its copy until then
                outcomes[at] = None  # it died before sending
    for process, receive in copies:
        if receive in waiting:
            process.kill()
        process.join()
        receive.close()
    return outcomes


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
        copies = _start_copies(len(shares) - 1)
        started = time.monotonic()
        try:
            mine = work(shares[0])
        except BaseException:
            _collect(copies, time.monotonic() + MIN_WAIT_S)  # none left behind
            raise
        waited = max(MIN_WAIT_S, WAIT_FACTOR * (time.monotonic() - started))
        outcomes = _collect(copies, time.monotonic() + waited)
    finally:
        _SHARES = None
    for outcome in outcomes:
        if outcome is not None and not outcome[0]:
            raise outcome[1]
    return [mine] + [outcome[1] if outcome else None for outcome in outcomes]
