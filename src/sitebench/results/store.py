"""The query layer over ``results/``: every figure of every run in Parquet, queried with DuckDB.

``results/`` stays the truth and is never written here. The index of a results directory
lives in ``.sitebench/results/store/<hash of its path>/<site>/`` (or ``$SITEBENCH_STORE_DIR``):
Parquet segments of figure rows (the columns of :mod:`sitebench.results.figures`), Parquet segments
of run rows (one per run: its times, CPU, host, where it came from, its provenance), and
``runs.json``, the runs already indexed with what each was made of (size, mtime, ctime and
inode of each file read, and its SHA-256). A stored run should never change, so a refresh
reads only the runs that are new since the last one and writes them as one new segment
(atomically: a temporary name, then a rename); segments are merged when there are more than
``MAX_SEGMENTS``. It checks that the others did not change all the same (an ``lstat`` per
file read; the hash where a stat differs): a run that changed is indexed anew, named, and
kept in ``altered.json`` (:func:`altered`); a run that disappeared from ``results/`` leaves
the index (the segments that held either are dropped, their other runs read again).
Runs of other sites accepted by a pull are not in ``results/``: they are indexed from the
exchange's git objects (:mod:`sitebench.results.exchange_runs`), only those accepted since
the index last read the exchange's per-site log; their identity is their tree's id, so they
are never ``lstat``-ed, and one written out by ``./sitebench show`` is not indexed again.
A refresh with many runs to index (``SHARE_FROM`` or more per core) shares its sites between
this process and forked copies of it, one per core (:mod:`sitebench.results.shares`): each
site is indexed by one process, its segments written as by one.
Runs are read defensively (:mod:`sitebench.results.runfiles`): a run that cannot be read, or
whose content is not what ReFrame writes, is reported on one line and skipped (and tried
again at the next refresh), never the others.
"""

import datetime
import functools
import itertools
import hashlib
import json
import math
import os
import re
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sitebench.results import figures

from sitebench.common import paths
from sitebench.common.names import check_name
from sitebench.common.progress import progress_bar
from sitebench.common.errors import SitebenchError
from sitebench.results import exchange_runs, refused_figures, registry, runfiles
from sitebench.results import shares, site_warnings
from sitebench.results.exchange import Exchange
from sitebench.results.rundirs import (
    INDEXED_FILES,
    BadRun,
    leftovers,
    links,
    load_run,
    run_dirs,
    site_dirs,
)

MAX_SEGMENTS = 8
#: The index's layout: a new version (new columns) makes a new index, read from results/ anew.
#: 3: runs.json keeps what each run's index was made of (stats and hashes of its files).
#: 4: figures carry their case's ``disturbed`` and ``foreign_cores``.
#: 5: runs of other sites indexed from the exchange's git objects; runs carry ``origin``.
SCHEMA_VERSION = 5
#: A site's list of runs found changed after they were indexed (:func:`altered`).
ALTERED = "altered.json"
_TIME = pa.timestamp("s", tz="UTC")
FIGURES = pa.schema(
    [
        ("site", pa.string()),
        ("run", pa.string()),
        ("started", _TIME),
        ("system", pa.string()),
        ("partition", pa.string()),
        ("environ", pa.string()),
        ("check", pa.string()),
        ("params", pa.string()),
        ("figure", pa.string()),
        ("value", pa.float64()),
        ("unit", pa.string()),
        ("reference", pa.float64()),
        ("lower", pa.float64()),
        ("upper", pa.float64()),
        ("result", pa.string()),
        ("arch", pa.string()),
        ("ref_keys", pa.string()),
        ("ref_index", pa.string()),
        ("case_vars", pa.string()),
        ("problem", pa.string()),
        ("host", pa.string()),
        ("disturbed", pa.bool_()),
        ("foreign_cores", pa.float64()),
    ]
)
RUNS = pa.schema(
    [
        ("site", pa.string()),
        ("run", pa.string()),
        ("started", _TIME),
        ("finished", _TIME),
        ("arch", pa.string()),
        ("hostname", pa.string()),
        ("source", pa.string()),
        ("emulated", pa.bool_()),
        ("cases", pa.int64()),
        ("failures", pa.int64()),
        ("provenance", pa.string()),
        # Where the run was read: "results" (its folder) or "exchange <commit> <tree>".
        ("origin", pa.string()),
    ]
)


def store_dir(results_root=None):
    """The index of ``results_root`` (default: the project's results/), under
    ``$SITEBENCH_STORE_DIR`` (default ``.sitebench/store``)."""
    root = Path(results_root or paths.results_dir()).resolve()
    # One index per results directory: tests and other checkouts never share one.
    # Another SCHEMA_VERSION: another index (old segments lack the new columns).
    digest = hashlib.sha256(f"{root}\0v{SCHEMA_VERSION}".encode()).hexdigest()[:16]
    return Path(os.environ.get("SITEBENCH_STORE_DIR", paths.state_dir() / "store")) / digest


def _time(text):
    """ReFrame's "20261122T153115+0000" or ISO 8601; NaT if neither."""
    return _parse_time(text) if isinstance(text, str) else pd.NaT


_REFRAME_TIME = re.compile(r"\d{8}T\d{6}[+-]\d{4}")


@functools.lru_cache(maxsize=4096)
def _parse_time(text):
    # Cached: every figure row of a run carries its start, parsed once instead of per row.
    if _REFRAME_TIME.fullmatch(text):
        try:  # ReFrame's own form by the standard library: a tenth of pandas' time
            return pd.Timestamp(datetime.datetime.strptime(text, "%Y%m%dT%H%M%S%z")).tz_convert(
                "UTC"
            )
        except ValueError:
            pass  # not a date (month 13): as pandas reads it
    for fmt in ("%Y%m%dT%H%M%S%z", None):
        stamp = pd.to_datetime(text, format=fmt, utc=True, errors="coerce")
        if not pd.isna(stamp):
            return stamp
    return pd.NaT


def _times(values):
    """A timestamp column from ReFrame's or ISO 8601 text (or Timestamps), each distinct
    value parsed once; cast to the index's seconds as ``Table.from_pandas`` did (safe)."""
    parsed = {}
    stamps = []
    for value in values:
        key = value if isinstance(value, str) else id(value)
        if key not in parsed:
            stamp = _time(value) if isinstance(value, str) else value
            parsed[key] = None if stamp is None or pd.isna(stamp) else stamp
        stamps.append(parsed[key])
    return pa.array(stamps, type=pa.timestamp("ns", tz="UTC")).cast(_TIME)


def _table(columns, schema):
    """The table of ``schema`` from {column: cleaned values}, built by Arrow directly: the
    same values and types as through a pandas DataFrame, at a fifth of the cost (a run's
    445 figure rows spent 20 ms in pandas)."""
    arrays = []
    for field_ in schema:
        values = columns.get(field_.name, [])
        if field_.type == _TIME:
            arrays.append(_times(values))
        else:
            arrays.append(pa.array(values, type=field_.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _figure_table(columns):
    """The figures' table from {column: values} (:func:`clean_columns`)."""
    # Typed even when empty: a run without a figure (every build failed) is indexed too.
    return _table(columns, FIGURES)


def _run_row(run, origin="results"):
    info = run.report.get("session_info") or {}
    prov = run.provenance
    return {
        "site": run.site,
        "run": run.name,
        "started": (
            _time(info.get("time_start")) if info.get("time_start") else _time(prov.get("started"))
        ),
        "finished": (
            _time(info.get("time_end")) if info.get("time_end") else _time(prov.get("finished"))
        ),
        "arch": prov.get("cpu_arch"),
        "hostname": (prov.get("host") or {}).get("hostname") or info.get("hostname"),
        "source": prov.get("source", "sitebench"),
        "emulated": bool(prov.get("emulated", False)),
        "cases": info.get("num_cases"),
        "failures": info.get("num_failures"),
        "provenance": json.dumps(prov, sort_keys=True),
        "origin": origin,
    }


def _text(value):
    # A lone surrogate (JSON allows "\ud800") cannot be written as UTF-8: replaced.
    return value.encode("utf-8", "replace").decode("utf-8") if isinstance(value, str) else None


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _whole(value):
    ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    return value if ok else None


def _stamp(value):
    return value if isinstance(value, (str, pd.Timestamp)) else None


def _flag(value):
    # Not bool(): a report from elsewhere saying "false" must not read as true.
    return value if isinstance(value, bool) else None


_CLEAN = {
    pa.string(): _text,
    pa.float64(): _number,
    pa.int64(): _whole,
    _TIME: _stamp,
    pa.bool_(): _flag,
}


@functools.lru_cache(maxsize=None)
def _cleaners(schema):
    return [(f.name, _CLEAN[f.type]) for f in schema]


def clean(row, schema, wrong=None):
    """``row`` with every value of the type its column holds, or None: a report from
    elsewhere may put a list where a number belongs, and one bad value must not fail the
    segment of every run indexed with it. Each value so dropped is added to ``wrong``."""
    out = {}
    for name, cleaner in _cleaners(schema):
        value = row.get(name)
        kept = out[name] = cleaner(value)
        if kept is None and value is not None and value is not pd.NaT and wrong is not None:
            wrong.append((name, row, value))
    return out


#: Per column type, the Python types whose values need no cleaning one by one (checked
#: for the whole column at once: text encodable as UTF-8, numbers finite).
_AS_IS = {
    pa.string(): {str, type(None)},
    pa.float64(): {float, type(None)},
    pa.int64(): {type(None)},
    _TIME: {str, type(None)},
    pa.bool_(): {bool, type(None)},
}


def _as_is(values, kind):
    if not set(map(type, values)) <= _AS_IS[kind]:
        return False
    present = [v for v in values if v is not None]
    if kind == pa.string():
        try:
            "".join(present).encode("utf-8")
        except UnicodeEncodeError:
            return False  # a lone surrogate: replaced value by value
    elif kind == pa.float64():
        return all(map(math.isfinite, present))
    return True


def clean_columns(rows, schema, wrong=None):
    """{column: values} of ``rows``, each value cleaned as :func:`clean` cleans it, a whole
    column at once where its values need nothing (a run's 445 figures: 23 checks of a list
    instead of 10,000 calls); ``wrong`` gets what was dropped, row by row as :func:`clean`."""
    columns = {field_.name: [row.get(field_.name) for row in rows] for field_ in schema}
    return clean_column_lists(columns, schema, wrong, rows.__getitem__)


def clean_column_lists(columns, schema, wrong=None, row_at=None):
    """:func:`clean_columns` of rows given as {column: values} (as
    :func:`figures.columns_of_run` makes them); ``row_at(i)`` gives row i for ``wrong``
    (default: a dict of the columns' values at i)."""
    if row_at is None:

        def row_at(i):
            return {name: values[i] for name, values in columns.items()}

    out, dropped = {}, []
    for at, field_ in enumerate(schema):
        name, cleaner = field_.name, _CLEAN[field_.type]
        values = columns.get(name)
        if values is None:
            values = [None] * len(next(iter(columns.values()), []))
        if _as_is(values, field_.type):
            out[name] = values
            continue
        out[name] = cleaned = [cleaner(v) for v in values]
        for i, (value, kept) in enumerate(zip(values, cleaned)):
            if kept is None and value is not None and value is not pd.NaT:
                dropped.append((i, at, name, value))
    if wrong is not None:
        for i, _at, name, value in sorted(dropped, key=lambda item: item[:2]):
            wrong.append((name, row_at(i), value))
    return out


def _wrong_note(wrong):
    """'3 values of the wrong type stored as null (first: value of StreamCheck Copy: 'x')'."""
    column, row, value = wrong[0]
    where = f"{row.get('check')} {row.get('figure')}" if "figure" in row else "the run"
    return (
        f"{len(wrong)} value(s) of the wrong type stored as null (first: {column} of "
        f"{str(where)[:80]}: {repr(value)[:60]})"
    )


def _write_atomic(table, path):
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def one_line(message):
    """A warning on one line, whatever a run's name or file put in it."""
    text = " ".join(str(message).split())
    return text if len(text) <= 400 else text[:397] + "..."


def _signature(path, files=INDEXED_FILES):
    """What the index of a run was made of: per file it read, (size, mtime_ns, ctime_ns,
    inode) or None where the file is absent, "unsafe: why" where it is not a plain file."""
    found = {}
    for relative, st in runfiles.stats(path, files).items():
        if isinstance(st, os.stat_result):
            found[relative] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        else:
            found[relative] = st
    return found


def _digest(path, relative):
    try:
        data = runfiles.read_bytes(path, relative, runfiles.report_cap())
    except runfiles.UnsafeFile:
        return None
    return hashlib.sha256(data).hexdigest()


def _change(path, indexed):
    """(why the run's files differ from what was indexed, or None; the signature now).

    Cheap when nothing changed: one ``lstat`` per file read. A changed stat (a copy, a
    ``touch``, a ``chmod``) is checked against the content's hash, so only a change of
    content is reported."""
    # The files it was made of (report.json is not among them where figures.json was read).
    files = [rel for rel in INDEXED_FILES if rel in indexed] or INDEXED_FILES
    now = _signature(path, files)
    stats = {rel: e[:4] if isinstance(e, list) else e for rel, e in indexed.items()}
    if now == stats:
        return None, indexed
    changed = []
    for relative in files:
        before, after = indexed.get(relative), now.get(relative)
        if isinstance(after, list):
            digest = _digest(path, relative)
            now[relative] = [*after, digest]
            if not isinstance(before, list):
                changed.append(f"{relative} appeared")
            elif digest != before[4]:
                changed.append(f"{relative} changed")
        elif after != before:
            changed.append(f"{relative} {'removed' if after is None else after}")
    return "; ".join(changed) or None, now


def _read_known(known_file):
    """(runs indexed: {run: signature}, notes: {run: what was wrong in it}); (None, {})
    where the list is missing or not of this layout."""
    known, notes, _ = _read_index(known_file)
    return known, notes


def _read_index(known_file, with_segments=False):
    """:func:`_read_known` and where the index is in the exchange's log of accepted runs:
    {"offset": bytes read, "pending": [entries to read again]}; ``with_segments``: and the
    run segments the list was written with (None where it does not say)."""
    try:
        known = json.loads(known_file.read_text())
    except (OSError, ValueError):
        known = None
    if not isinstance(known, dict) or not isinstance(known.get("runs"), dict):
        return (None, {}, {}, None) if with_segments else (None, {}, {})
    found = known["runs"], known.get("notes") or {}, known.get("exchange") or {}
    segments = known.get("segments")
    ok = isinstance(segments, list) and all(isinstance(n, str) for n in segments)
    return (*found, segments if ok else None) if with_segments else found


def _write_json(path, data):
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    tmp.replace(path)


def _index_run(path, say):
    """(figure columns, run row, signature) of one run; raises on anything it cannot read."""
    before = _signature(path)
    run, wrong = load_run(path), []
    rows = clean_column_lists(figures.columns_of_run(run, job_wall=True), FIGURES, wrong)
    run_row = clean(_run_row(run), RUNS, wrong)
    note = f"{run.site}/{run.name}: {_wrong_note(wrong)}" if wrong else None
    if note:
        say(note)
    # The files read, and those absent or refused (one appearing later is a change).
    signature = {
        rel: [*st, run.digests.get(rel)] if isinstance(st, list) else st
        for rel, st in before.items()
        if rel in run.digests or not isinstance(st, list)
    }
    return rows, run_row, signature, note


def _why(err):
    if isinstance(err, BadRun):
        return str(err)
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def _from_exchange(signature):
    """Whether an index entry is a run read from the exchange (its tree: immutable)."""
    return isinstance(signature, dict) and "tree" in signature


def _exchange_entries(site, results_root, state, known):
    """(entries (site, run, tree, commit) of ``site`` accepted since the index last read
    the exchange's log, with those to read again; the log's end). Only what arrived since
    is read: a refresh after a pull costs what the pull brought."""
    ex = Exchange(results_root or paths.results_dir())
    if not ex.exists:
        return [], 0
    offset = state.get("offset", 0)
    entries, end = ex.runs_since(site, offset if isinstance(offset, int) else 0)
    pending = [tuple(e) for e in state.get("pending", []) if isinstance(e, list) and len(e) == 4]
    fresh, seen = [], set()
    for entry in pending + [e for e in entries if e[0] == site]:
        if entry[1] not in known and entry[1] not in seen:
            seen.add(entry[1])
            fresh.append(entry)
    return fresh, end


def refresh(
    site, results_root=None, store=None, warn=None, progress=None, read_runs=exchange_runs.stream
):
    """Bring ``site``'s index up to date with its runs; return the number of runs indexed.

    Runs in ``results/<site>/`` are read from their files; runs of the site accepted from
    the exchange (:mod:`sitebench.results.exchange_runs`) from git, only those accepted
    since the last refresh (a run is indexed once: from the exchange where it is there).
    A run whose files changed since it was indexed is indexed anew and reported (``warn``)
    as altered, and kept in the site's list of altered runs (:func:`altered`). Any error
    reading one run skips that run with a one-line warning, never the others. ``read_runs``
    reads the accepted runs (:func:`refresh_all` says how)."""
    job = _SiteRefresh(site, results_root, store, warn, progress)
    return job.finish(read_runs(job.root, job.incoming))


class _SiteRefresh:
    """One site's refresh in two steps, so that :func:`refresh_all` reads the exchange's
    runs of every site in one pass: what the site needs (``incoming``: runs accepted from
    the exchange since its last refresh), then :meth:`finish` with those runs read."""

    def __init__(self, site, results_root, store, warn, progress):
        check_name("site", site)
        self.site, self.progress = site, progress
        self.root = results_root or paths.results_dir()
        self.base = base = Path(store or store_dir(results_root)) / site
        # One line per site (flushed at the end), whatever the number of runs warned about.
        self.say = say = site_warnings.BySite(
            lambda message: warn(one_line(message)) if warn else None,
            site,
            grouped=not getattr(warn, "every_run", False),  # the report lists each, then groups
        )
        # Half-assembled runs of a killed or failed writer: never indexed, never removed.
        for path, why in leftovers(site, results_root):
            say(f"{path} is not a run ({why}); remove it once inspected")
        site_dir = Path(self.root) / site
        for link in links(site_dir):
            what = site if link == site_dir else f"{site}/{link.name}"
            say(
                f"skipped {what}: a symbolic link, never followed (runs are read from real "
                "directories only)"
            )
        self.known_file = base / "runs.json"
        known, self.notes, state, segments = _read_index(self.known_file, with_segments=True)
        if known is None and base.exists():
            shutil.rmtree(base)  # an index of another layout, or a damaged list: made anew
        known = known or {}
        self.state = state = state if known else {}
        self.on_disk = on_disk = {p.name: p for p in run_dirs(site, results_root)}
        from_disk = {name for name, sig in known.items() if not _from_exchange(sig)}
        stale = from_disk - set(on_disk)  # removed from results/: its figures must go
        restated = False
        for name in sorted(from_disk & set(on_disk)):
            why, now = _change(on_disk[name], known[name])
            if why:
                stale.add(name)
                say(altered_message(site, name, why))
                _note_altered(base, name, why)
            elif now is not known[name]:
                known[name], restated = now, True  # same content, new stat (a copy): kept
        base.mkdir(parents=True, exist_ok=True)
        listed = len(known)
        self.retracted = retracted = _retracted(site, results_root)
        if retracted:
            # Runs a revoked key signed from its revocation on: kept in the exchange, never
            # in compare, regressions or references.
            stale |= {name for name in known if name in retracted}
            say(retracted_message(site, retracted))
        refused = _figures_refused(site, results_root)
        if refused:
            # Runs whose report show found not backing their figures: out, said each time.
            stale |= {name for name in known if name in refused}
            say(refused_figures.message(site, refused))
        self.set_aside = set_aside = set(retracted) | set(refused)
        before_drop = known
        self.known = known = _drop_segments(base, known, stale, segments if known else None)
        restated = restated or len(known) != listed
        incoming, self.log_end = _exchange_entries(site, results_root, state, known)
        gone = stale - set(on_disk)
        if gone:
            # A copy of an accepted run dropped from results/ (exchange prune): its figures
            # are read again from the exchange's objects, as for a run never written out.
            ex = Exchange(self.root)
            accepted = ex.accepted_runs(site).get(site, {}) if ex.exists else {}
            arriving = {entry[1] for entry in incoming}
            incoming += [
                (site, name, *accepted[name])
                for name in sorted(gone)
                if name in accepted and name not in arriving
            ]
        # Runs of the exchange that shared a dropped segment with a retracted one: read again
        # (none when no segment was dropped: not a walk of every run held, night after night).
        coming = {entry[1] for entry in incoming}
        incoming += [
            (site, name, sig["tree"], sig["commit"])
            for name, sig in (sorted(before_drop.items()) if known is not before_drop else [])
            if _from_exchange(sig)
            and name not in known
            and name not in stale
            and name not in coming
        ]
        self.incoming = [entry for entry in incoming if entry[1] not in set_aside]
        # What finish reads: the runs accepted since, and the folders not yet indexed.
        self.waiting = len(self.incoming) + len(set(on_disk) - set(known) - set_aside)
        self.restated = restated or self.log_end != state.get("offset", 0)

    def finish(self, loaded):
        """Index the site's new runs (``loaded``: (entry, run) of each of ``incoming``, in
        order); the number of runs indexed."""
        site, say, notes = self.site, self.say, self.notes
        # A run of another site written out by ./sitebench show is the accepted one: read once.
        arriving = {entry[1] for entry in self.incoming}
        new = [
            p
            for name, p in sorted(self.on_disk.items())
            if name not in self.known and name not in arriving and name not in self.set_aside
        ]
        figure_rows, run_rows, added = {name: [] for name in FIGURES.names}, [], {}

        def take(name, rows, run_row, signature, note):
            for column, values in rows.items():
                figure_rows[column].extend(values)
            run_rows.append(run_row)
            added[name] = signature
            notes.pop(name, None)
            if note:
                notes[name] = one_line(note)

        for path in progress_bar(new, f"indexing {site}", self.progress):
            try:
                take(path.name, *_index_run(path, say))
            except SitebenchError:
                raise  # a setting to fix (a bad cap), not this run
            except Exception as err:  # one run's data, whatever it holds, never stops the others
                say(f"skipped {site}/{path.name}: {_why(err)}")
        pending = []
        for entry, run in loaded:
            try:
                if isinstance(run, Exception):
                    raise run
                take(entry[1], *_index_loaded(run, entry, say))
            except SitebenchError:
                raise
            except Exception as err:  # as for a folder: named, skipped, read again next time
                say(f"skipped {site}/{entry[1]} (exchange): {_why(err)}")
                pending.append(list(entry))
        base, known_file = self.base, self.known_file
        if added:
            _write_segment(base, figure_rows, run_rows)
        # The runs list follows the segments: after a crash between them, the next refresh
        # drops the segments of runs not in the list and reads those runs again.
        changed = added or self.restated or pending != self.state.get("pending", [])
        indexed = {**self.known, **added}
        if changed or not known_file.exists():
            self._write(indexed, pending)
        if len(list(base.glob("fig-*.parquet"))) > MAX_SEGMENTS:
            compact(base)
            self._write(indexed, pending)  # the list of segments it holds
        say.flush()
        return len(added)

    def _write(self, indexed, pending):
        notes = {run: why for run, why in self.notes.items() if run in indexed}
        exchange = {"offset": self.log_end, "pending": pending}
        segments = sorted(p.name for p in self.base.glob("run-*.parquet"))
        _write_json(
            self.known_file,
            {"runs": indexed, "notes": notes, "exchange": exchange, "segments": segments},
        )


def _retracted(site, results_root):
    """{run: (commit, key, since)} of ``site``'s runs retracted here (a revoked key)."""
    ex = Exchange(results_root or paths.results_dir())
    return registry.retracted(ex).get(site, {}) if ex.exists else {}


def _figures_refused(site, results_root):
    """{run: (tree, why)} of ``site``'s runs whose figures show refused here."""
    ex = Exchange(results_root or paths.results_dir())
    return refused_figures.listed(ex).get(site, {}) if ex.exists else {}


def retracted_message(site, runs):
    """The one line naming a site's retracted runs."""
    keys = sorted({(key, since) for _, key, since in runs.values()})
    return (
        f"{len(runs)} run(s) of {site} retracted, kept aside, out of compare, regressions "
        f"and references: signed by {', '.join(f'{k} at or after {s}' for k, s in keys)} "
        f"(revoked in the federation's registry): {', '.join(sorted(runs)[:3])}"
        + (", ..." if len(runs) > 3 else "")
    )


def _index_loaded(run, entry, say):
    """(figure columns, run row, identity, note) of a run read from the exchange."""
    _site, _run, tree, commit = entry
    wrong = []
    rows = clean_column_lists(figures.columns_of_run(run, job_wall=True), FIGURES, wrong)
    run_row = clean(_run_row(run, f"exchange {commit} {tree}"), RUNS, wrong)
    note = f"{run.site}/{run.name}: {_wrong_note(wrong)}" if wrong else None
    if note:
        say(note)
    return rows, run_row, {"tree": tree, "commit": commit}, note


def _write_segment(base, figure_rows, run_rows):
    number = _next_segment(base)
    runs_table = _table({name: [row.get(name) for row in run_rows] for name in RUNS.names}, RUNS)
    _write_atomic(_figure_table(figure_rows), base / f"fig-{number:06d}.parquet")
    _write_atomic(runs_table, base / f"run-{number:06d}.parquet")


def _drop_segments(base, known, stale, listed=None):
    """Drop the segments holding a stale run or a run not in ``known`` (a crash between a
    segment and the list); return ``known`` less the runs no segment holds any more.
    ``listed``: the run segments the list was written with; when nothing is stale and each
    is still there, only the segments not among them (a crash's) are read: a refresh costs
    what arrived, not what the index holds."""
    files = sorted(base.glob("run-*.parquet"))
    if not stale and listed is not None and sorted(listed) == [p.name for p in files]:
        for path in base.glob(".*.tmp"):
            path.unlink()
        return known  # the segments the list was written with, no other: none to drop
    kept = set()
    for runs_file in files:
        runs = set(pq.read_table(runs_file, columns=["run"])["run"].to_pylist())
        if runs <= set(known) - stale:
            kept |= runs
            continue
        runs_file.with_name(runs_file.name.replace("run-", "fig-", 1)).unlink(True)
        runs_file.unlink()
    for path in base.glob(".*.tmp"):
        path.unlink()
    return {name: sig for name, sig in known.items() if name in kept}


def _note_altered(base, run, why):
    base.mkdir(parents=True, exist_ok=True)
    path = base / ALTERED
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        found = []
    when = pd.Timestamp.now(tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    _write_json(path, [*found, {"run": run, "detected": when, "why": why}])


def flagged(sites=None, results_root=None, store=None):
    """[(site, run, what was wrong)] of the runs indexed with values of the wrong type left
    out (stored as null): a report from elsewhere that no ReFrame wrote as it is."""
    root = Path(store or store_dir(results_root))
    found = []
    for site in _index_sites(root, sites):
        _runs, notes = _read_known(root / site / "runs.json")
        found += [(site, run, why) for run, why in sorted(notes.items())]
    return found


def _index_sites(root, sites):
    if sites is not None:
        return sorted(sites)
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def altered_message(site, run, why):
    """The one line that names an altered run, on stderr and in the report."""
    return one_line(
        f"{site}/{run} changed after it was indexed ({why}): indexed anew; runs are never "
        "modified, find out who changed it"
    )


def altered(sites=None, results_root=None, store=None):
    """[(site, run, when detected, why)] of every run found changed after it was indexed
    (oldest first): runs are never modified, so each is one to look into."""
    root = Path(store or store_dir(results_root))
    found = []
    for site in _index_sites(root, sites):
        try:
            entries = json.loads((root / site / ALTERED).read_text())
        except (OSError, ValueError):
            continue
        found += [(site, e["run"], e["detected"], e["why"]) for e in entries]
    return sorted(found, key=lambda item: item[2])


def sites(results_root=None):
    """The sites with runs here: folders of ``results/`` and sites accepted from the
    exchange (whose runs stay in git until ``./sitebench show`` writes one out)."""
    found = {p.name for p in site_dirs(results_root)}
    ex = Exchange(results_root or paths.results_dir())
    if ex.exists:
        found |= set(ex.accepted_sites())
    return sorted(found)


def refresh_all(
    results_root=None, store=None, warn=None, progress=None, read_runs=exchange_runs.stream
):
    """Refresh every site of ``results_root``; return {site: new runs}. The runs every site
    accepted from the exchange since its last refresh are read in one pass (one ``git
    cat-file`` for all, one run held at a time): after a pull of a night of 100 sites the
    cost is the night's runs, not 100 refreshes. ``read_runs(results_root, entries)`` yields
    (entry, Run or the exception that says why not) for each (site, run, tree, commit) entry
    in order: git's objects (:func:`exchange_runs.stream`), or runs made in memory by
    ``perf exchange`` (:mod:`sitebench.perf.compare_history`). With ``SHARE_FROM`` runs or
    more to index per core, the sites are shared between processes (one per core), each
    reading its sites' runs in one pass; the warnings are said afterwards, site by site."""
    root = results_root or paths.results_dir()
    jobs = [
        _SiteRefresh(site, results_root, store, warn, progress) for site in sites(results_root)
    ]
    waiting = sum(job.waiting for job in jobs)
    count = min(shares.cores(), waiting // SHARE_FROM)
    if count < 2:
        counts = _finish_jobs(jobs, root, read_runs)
    else:
        counts = _finish_shared(jobs, root, read_runs, count, warn)
        # A share whose process died: its sites again here, from what reached the disk.
        for job in jobs:
            if job.site not in counts:
                again = _SiteRefresh(job.site, results_root, store, warn, progress)
                # With the runs the dead copy indexed and listed before it died.
                listed = max(0, len(again.known) - len(job.known))
                counts[job.site] = _finish_jobs([again], root, read_runs)[job.site] + listed
        counts = {job.site: counts[job.site] for job in jobs}
    for link in links(root):
        if warn:
            warn(one_line(f"skipped {link.name}: a symbolic link, never followed"))
    return counts


#: Runs to index per process from which a refresh shares its sites between processes, one
#: per core (:mod:`sitebench.results.shares`): below, a forked copy costs more than it saves.
SHARE_FROM = 25


def _finish_jobs(jobs, root, read_runs):
    """{site: runs indexed} of ``jobs``, their runs of the exchange read in one pass."""
    loaded = read_runs(root, [e for job in jobs for e in job.incoming])
    try:
        return {job.site: job.finish(itertools.islice(loaded, len(job.incoming))) for job in jobs}
    finally:
        loaded.close()


def _finish_shared(jobs, root, read_runs, count, warn):
    """:func:`_finish_jobs` with the sites shared between ``count`` processes; each site's
    warnings are said here afterwards, in the sites' order. A site of a share whose process
    died is left out of the counts."""
    for job in jobs:
        job.said = said = []
        if warn:
            job.say.warn = lambda message, said=said: said.append(one_line(message))
    parts = shares.split(jobs, lambda job: job.waiting + 1, count)
    for part in parts[1:]:
        for job in part:
            job.progress = False  # one bar at a time: the first share's

    def work(part):
        counts = _finish_jobs(part, root, read_runs)
        return [(job.site, counts[job.site], job.said) for job in part]

    counts, said = {}, {}
    for result in shares.run(parts, work):
        for site, indexed, messages in result or []:
            counts[site], said[site] = indexed, messages
    for job in jobs:
        for message in said.get(job.site, []):
            warn(message)
    return counts


def _next_segment(base):
    numbers = [int(p.stem.split("-")[1]) for p in Path(base).glob("fig-*.parquet")]
    return max(numbers) + 1 if numbers else 0


def compact(base):
    """Merge a site's segments into one (duplicates of a crashed refresh dropped)."""
    base = Path(base)
    figs, runs = sorted(base.glob("fig-*.parquet")), sorted(base.glob("run-*.parquet"))
    if len(figs) < 2:
        return
    con = duckdb.connect()
    number = _next_segment(base)
    fig_files, run_files = [str(p) for p in figs], [str(p) for p in runs]
    merged_figs = con.sql(
        'SELECT DISTINCT ON (run, partition, environ, "check", params, figure) * '
        f"FROM read_parquet({fig_files!r})"
    ).to_arrow_table()
    merged_runs = con.sql(
        f"SELECT DISTINCT ON (run) * FROM read_parquet({run_files!r})"
    ).to_arrow_table()
    _write_atomic(merged_figs, base / f"fig-{number:06d}.parquet")
    _write_atomic(merged_runs, base / f"run-{number:06d}.parquet")
    for path in figs + runs:
        path.unlink()


def _view(con, name, files, schema):
    if files:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({files!r})")
        return
    columns = ", ".join(f'NULL::{_duck(f.type)} AS "{f.name}"' for f in schema)
    con.execute(f"CREATE VIEW {name} AS SELECT * FROM (SELECT {columns}) WHERE false")


def connect(store=None, sites=None, results_root=None):
    """A DuckDB connection with views ``figures`` and ``runs`` over the index.

    ``sites``: only those: only their folders are looked at and only their segments are in
    the views, so a query over two sites costs the same whatever the number of sites in the
    index (a view over every site's segments makes DuckDB open every segment's footer even
    for a query that names one site). Call :func:`refresh` (or :func:`open_store`) first.
    """
    root = Path(store or store_dir(results_root))
    if sites is None:
        chosen = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    else:
        names = sorted({check_name("site", site) for site in sites})
        chosen = [root / site for site in names if (root / site).is_dir()]
    con = duckdb.connect()
    _view(
        con, "figures", [str(p) for d in chosen for p in sorted(d.glob("fig-*.parquet"))], FIGURES
    )
    _view(con, "runs", [str(p) for d in chosen for p in sorted(d.glob("run-*.parquet"))], RUNS)
    return con


def open_store(sites=None, results_root=None, warn=None, progress=None):
    """Refresh the index of ``sites`` (default: all) and connect to it."""
    store = store_dir(results_root)
    if sites is None:
        refresh_all(results_root, store, warn, progress)
    else:
        for site in sites:
            refresh(site, results_root, store, warn, progress)
    return connect(store, sites)


def _duck(arrow_type):
    return {
        pa.string(): "VARCHAR",
        pa.float64(): "DOUBLE",
        pa.int64(): "BIGINT",
        pa.bool_(): "BOOLEAN",
        _TIME: "TIMESTAMPTZ",
    }[arrow_type]
