"""Another site's accepted runs read straight from the exchange's git objects.

A run of another site is not written into ``results/`` by a pull: what the store, compare,
regressions, references and the report need of it (``report.json``,
``provenance/provenance.json``, ``provenance/topology.json``) is read from the blobs of the
run's tree as it was accepted (:meth:`sitebench.results.exchange.Exchange.accepted_runs`),
with the refusals :func:`sitebench.results.rundirs.load_run` applies to files: size caps
checked before a byte is read, JSON, depth, types. A few ``git cat-file`` calls read any
number of runs (sizes, those of ``report.json`` where a run has no ``figures.json``, then the
blobs within their caps, about :data:`CHUNK_BYTES` of them asked for at once: a run's report
is never asked for when it has its figures, as it is not fetched); a tree is immutable, so its id is the
run's identity and nothing is ever ``lstat``-ed. Git never fetches here
(:data:`~sitebench.results.exchange.NO_LAZY_FETCH`): the blobs were fetched and verified by
the pull that accepted the run.
"""

from pathlib import Path

from sitebench.results import runfiles
from sitebench.results.exchange import NO_LAZY_FETCH, Exchange
from sitebench.results.rundirs import FIGURES, INDEXED_FILES, REPORT, BadRun, parse_run
from sitebench.results.verify import BatchReader


class Unread(Exception):
    """The copy could not give a run's files (not a fault of the run: tried again)."""


#: What is read of every run; ``report.json`` only of those without ``figures.json``.
FIRST = tuple(rel for rel in INDEXED_FILES if rel != REPORT)


def _caps():
    return {
        rel: (runfiles.report_cap() if rel in (REPORT, FIGURES) else runfiles.file_cap())
        for rel in INDEXED_FILES
    }


def _sizes(ex, trees):
    """({(tree, relative): (blob id, or the UnsafeFile saying why not)}) of the indexed files
    of ``trees`` (:func:`_sized`), ``report.json`` only of a run without ``figures.json``."""
    found = _sized(ex, [(tree, rel) for tree in trees for rel in FIRST])
    older = [t for t in trees if isinstance(found[t, FIGURES], runfiles.MissingFile)]
    found.update(_sized(ex, [(tree, REPORT) for tree in older]))
    return found


def _sized(ex, wanted):
    """:func:`_sizes` of [(tree, relative)] from one ``cat-file --batch-check``: every cap is
    checked here, before a byte of any file is read. Unread when git cannot read the copy."""
    caps = _caps()
    names = [f"{tree}:{rel}" for tree, rel in wanted]
    if not names:
        return {}
    check = ex.read("cat-file", "--batch-check", stdin="".join(n + "\n" for n in names).encode())
    lines = check.stdout.decode(errors="replace").splitlines()
    if check.returncode != 0 or len(lines) != len(names):
        raise Unread(
            check.stderr.decode(errors="replace").strip().splitlines()[-1:] or "git failed"
        )
    found = {}
    for name, line in zip(names, lines):
        tree, _, rel = name.partition(":")
        fields = line.split()
        if fields[-1] == "missing":
            found[tree, rel] = runfiles.MissingFile(f"no {rel}")
        elif len(fields) != 3 or fields[1] != "blob":
            found[tree, rel] = runfiles.UnsafeFile(f"{rel} is a {fields[1]}, not a regular file")
        elif int(fields[2]) > caps[rel]:
            found[tree, rel] = runfiles.UnsafeFile(
                f"{rel} is {int(fields[2]) / runfiles.MIB:.1f} MiB, over the "
                f"{caps[rel] / runfiles.MIB:.1f} MiB cap"
            )
        else:
            found[tree, rel] = Blob(fields[0], int(fields[2]))
    return found


class Blob(tuple):
    """(id, size) of a file of a run, within its cap."""

    def __new__(cls, oid, size):
        return super().__new__(cls, (oid, size))


class _Reader:
    """The blobs of many runs from one ``git cat-file --batch`` kept open, one held at a
    time, never fetching (:class:`~sitebench.results.verify.BatchReader`)."""

    def __init__(self, ex):
        self.batch = BatchReader(["git", *NO_LAZY_FETCH, "--git-dir", str(ex.git_dir)])

    def get(self, oid):
        try:
            found = self.batch.read(oid)
        except OSError as err:
            raise Unread(str(err)) from None
        if found is None:
            raise Unread(f"git could not read {oid}")
        return found[1]

    def get_many(self, oids):
        """{oid: bytes or the Unread saying why not} of ``oids``, asked for at once (one
        round trip to git for all, not one per file); one at a time where git failed, so
        that only the object it cannot give is named."""
        try:
            answers = self.batch.read_many(oids)
        except OSError:
            answers = None
        if answers is None:
            found = {}
            for oid in oids:
                try:
                    found[oid] = self.get(oid)
                except Unread as err:
                    found[oid] = err
            return found
        return {
            oid: Unread(f"git could not read {oid}") if answer is None else answer[1]
            for oid, answer in zip(oids, answers)
        }

    def close(self):
        self.batch.close()


def stream(results_root, entries):
    """(entry, Run or the exception that says why not) for each of ``entries`` of the
    exchange's log ((site, run, tree, commit)), in their order, one run read at a time: a
    run that cannot be read is named, never the others stopped. Unread where the copy
    itself failed (the run is read again next time)."""
    if not entries:
        return
    ex = Exchange(results_root)
    trees = sorted({entry[2] for entry in entries})
    try:
        sizes = _sizes(ex, trees)
    except Unread:
        sizes = {}
        for tree in trees:  # find the run the copy cannot give; the others are read
            try:
                sizes.update(_sizes(ex, [tree]))
            except Unread as err:
                sizes.update({(tree, rel): err for rel in INDEXED_FILES})
    reader = _Reader(ex)
    try:
        for chunk in _chunks(entries, sizes):
            wanted = [
                b
                for e in chunk
                for rel in INDEXED_FILES
                if isinstance(b := sizes.get((e[2], rel)), Blob)
            ]
            read = reader.get_many(list(dict.fromkeys(oid for oid, _size in wanted)))
            for entry in chunk:
                yield entry, _one(results_root, entry, sizes, read)
    finally:
        reader.close()


#: The bytes of runs' files read from git at once (then parsed, one run at a time).
CHUNK_BYTES = 8 * runfiles.MIB


def _chunks(entries, sizes):
    """``entries`` in order, in chunks of about :data:`CHUNK_BYTES` of files (at least one
    run each): a night's runs in a few round trips to git, never all of a history in memory."""
    chunk, held = [], 0
    for entry in entries:
        chunk.append(entry)
        held += sum(
            b[1] for rel in INDEXED_FILES if isinstance(b := sizes.get((entry[2], rel)), Blob)
        )
        if held >= CHUNK_BYTES:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def _one(results_root, entry, sizes, read):
    site, run, tree, _commit = entry
    blobs = {}
    for rel in INDEXED_FILES:
        if (tree, rel) not in sizes:
            continue  # report.json of a run with figures.json: never read
        found = sizes[tree, rel]
        blobs[rel] = read[found[0]] if isinstance(found, Blob) else found
    for rel in (FIGURES, REPORT):
        if isinstance(blobs.get(rel), Unread):
            return blobs[rel]

    def read(relative, limit):
        data = blobs.get(relative, runfiles.MissingFile(f"no {relative}"))
        if isinstance(data, Exception):
            raise data
        if len(data) > limit:
            raise runfiles.UnsafeFile(f"{relative} is over the {limit / runfiles.MIB:.1f} MiB cap")
        return data

    try:
        return parse_run(site, run, _shown(results_root, site, run), read)
    except (BadRun, Unread) as err:
        return err


def load(results_root, entries):
    """:func:`stream`'s pairs as a list (for a few runs: each is held in memory)."""
    return list(stream(results_root, entries))


def _shown(results_root, site, run):
    """How messages name a run read from git: where ``./sitebench show`` would write it."""
    return Path(results_root) / site / run
