"""Another site's accepted runs read straight from the exchange's git objects.

A run of another site is not written into ``results/`` by a pull: what the store, compare,
regressions, references and the report need of it (``report.json``,
``provenance/provenance.json``, ``provenance/topology.json``) is read from the blobs of the
run's tree as it was accepted (:meth:`sitebench.results.exchange.Exchange.accepted_runs`),
with the refusals :func:`sitebench.results.rundirs.load_run` applies to files: size caps
checked before a byte is read, JSON, depth, types. Two ``git cat-file`` calls read any number
of runs (sizes, then the blobs within their caps); a tree is immutable, so its id is the
run's identity and nothing is ever ``lstat``-ed. Git never fetches here
(:data:`~sitebench.results.exchange.NO_LAZY_FETCH`): the blobs were fetched and verified by
the pull that accepted the run.
"""

from pathlib import Path

from sitebench.results import runfiles
from sitebench.results.exchange import Exchange
from sitebench.results.rundirs import INDEXED_FILES, REPORT, BadRun, parse_run


class Unread(Exception):
    """The copy could not give a run's files (not a fault of the run: tried again)."""


def _caps():
    return {
        rel: (runfiles.report_cap() if rel == REPORT else runfiles.file_cap())
        for rel in INDEXED_FILES
    }


def _blobs(ex, trees):
    """{(tree, relative): bytes, or an UnsafeFile saying why not} of the indexed files of
    ``trees``; Unread when git cannot read the copy (a blob it lacks, a damaged copy)."""
    caps = _caps()
    names = [f"{tree}:{rel}" for tree in trees for rel in INDEXED_FILES]
    check = ex.read("cat-file", "--batch-check", stdin="".join(n + "\n" for n in names).encode())
    lines = check.stdout.decode(errors="replace").splitlines()
    if check.returncode != 0 or len(lines) != len(names):
        raise Unread(
            check.stderr.decode(errors="replace").strip().splitlines()[-1:] or "git failed"
        )
    found, wanted = {}, []
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
            wanted.append((tree, rel, fields[0]))
    if not wanted:
        return found
    proc = ex.read(
        "cat-file", "--batch", stdin="".join(f"{oid}\n" for _, _, oid in wanted).encode()
    )
    if proc.returncode != 0:
        raise Unread(
            proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or "git failed"
        )
    out, at = proc.stdout, 0
    for tree, rel, oid in wanted:
        header_end = out.index(b"\n", at)
        sha, _kind, size = out[at:header_end].decode().split()
        if sha != oid:
            raise Unread(f"git returned {sha} for {oid}")
        found[tree, rel] = out[header_end + 1 : header_end + 1 + int(size)]
        at = header_end + 2 + int(size)
    return found


def load(results_root, entries):
    """[(entry, Run or the exception that says why not)] for ``entries`` of the exchange's
    log ((site, run, tree, commit)): a run that cannot be read is named, never the others
    stopped. Unread where the copy itself failed (the run is read again next time)."""
    ex = Exchange(results_root)
    trees = sorted({entry[2] for entry in entries})
    try:
        blobs = _blobs(ex, trees)
    except Unread:
        blobs = {}
        for tree in trees:  # find the run the copy cannot give; the others are read
            try:
                blobs.update(_blobs(ex, [tree]))
            except Unread as err:
                blobs.update({(tree, rel): err for rel in INDEXED_FILES})
    loaded = []
    for entry in entries:
        site, run, tree, _commit = entry

        def read(relative, limit, tree=tree):
            data = blobs[tree, relative]
            if isinstance(data, Exception):
                raise data
            if len(data) > limit:
                raise runfiles.UnsafeFile(
                    f"{relative} is over the {limit / runfiles.MIB:.1f} MiB cap"
                )
            return data

        if isinstance(blobs.get((tree, REPORT)), Unread):
            loaded.append((entry, blobs[tree, REPORT]))
            continue
        try:
            loaded.append((entry, parse_run(site, run, _shown(results_root, site, run), read)))
        except BadRun as err:
            loaded.append((entry, err))
    return loaded


def _shown(results_root, site, run):
    """How messages name a run read from git: where ``./sitebench show`` would write it."""
    return Path(results_root) / site / run
