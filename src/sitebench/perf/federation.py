"""A federation's results history made from two real nights of the quick suite.

The input is two real runs of ``./sitebench run`` (both toolchains) kept compressed in
``perf/inputs/`` (their README says how to make them again when the suite changes). What
differs between the two is what differs between two real nights; every synthetic run is the
first of them with exactly those parts made new:

* a file the two runs hold with the same bytes is the same blob in every synthetic run;
* in a file that differs, the two are split into the same text around their numeric and
  hexadecimal tokens; a token that differs (a figure, a time, a job id, a uuid, a hash) gets,
  after the characters the two real values share, new random characters of the same kind;
  a date and time gets the first run's value moved by a random number of seconds, so it
  stays a valid time (the store parses them). When the two files do not split alike (their
  lines differ in number or shape), the lines that differ get every token made new;
* the run's own name, wherever it is written, is the synthetic run's name.

So the bytes that change per night are those that changed between the two real nights, and
what stays is what stayed: what git's packing and every reader see is a real run's shape.
"""

import datetime
import hashlib
import io
import json
import os
import random
import re
import statistics
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sitebench.common import paths
from sitebench.common.errors import SitebenchError
from sitebench.results import figures_file

#: The kept inputs; ``$SITEBENCH_PERF_INPUTS`` names another folder (another input measured
#: without replacing the kept one).
INPUTS = Path(os.environ.get("SITEBENCH_PERF_INPUTS") or paths.ROOT / "perf" / "inputs")
#: Names the real runs of the current quick suite (``perf/inputs/<name>.tar.gz``; a run
#: committed under results/local/ needs no archive).
PAIR_FILE = "pair.txt"
#: Two real nights of the suite of 2026-11-22 (7 checks, one toolchain), committed under
#: results/local/: with one input run, what differed between these two, kind by kind, is
#: how much of the input is made new per night (:func:`calibrate`).
CALIBRATION_DIR = paths.ROOT / "results" / "local"
CALIBRATION = ("20261122T152735Z-c5bfbc", "20261122T153111Z-7d0096")
#: A synthetic night's runs are made at 02:00 UTC, night 0 on this day.
EPOCH = 1767225600  # 2026-01-01T00:00:00Z

#: A time, a hexadecimal word of 8 or more characters with a digit (a uuid's part, a
#: hash, a job id) or a run of digits (1.355e+02 is 1, 355 and 02: its syntax stays).
TOKEN = re.compile(
    rb"(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}|\d{8}T\d{6}|(?=[0-9a-f]*\d)[0-9a-f]{8,}|\d+)"
)
ISO = re.compile(rb"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}")
COMPACT = re.compile(rb"\d{8}T\d{6}")
RUN_SLOT = b"\x00RUN\x00"
DIGITS = bytes(48 + i % 10 for i in range(256))


def pair():
    """The two input runs' names, as :func:`keep_inputs` wrote them."""
    path = INPUTS / PAIR_FILE
    try:
        names = path.read_text().split()
    except FileNotFoundError:
        names = []
    if len(names) not in (1, 2):
        raise SitebenchError(
            f"{paths.shown(path)} does not name the exchange benchmark's input runs (one or two)",
            "make the inputs again as perf/inputs/README.md says",
        )
    return tuple(names)


def keep_inputs(*runs):
    """Keep one or two real runs (directories) as the benchmark's input: each as
    ``perf/inputs/<name>.tar.gz``, and their names in ``pair.txt``; the kept paths."""
    INPUTS.mkdir(parents=True, exist_ok=True)
    kept = []
    for run in runs:
        if not (run / "report.json").is_file():
            raise SitebenchError(
                f"{run} is not a stored run (no report.json)",
                "name two run directories of ./sitebench run, e.g. results/local/<run>",
            )
        kept.append(tar_run(run, INPUTS / f"{run.name}.tar.gz"))
    tmp = INPUTS / f".{PAIR_FILE}.tmp"
    tmp.write_text("".join(f"{run.name}\n" for run in runs))
    tmp.replace(INPUTS / PAIR_FILE)
    return kept


def run_files(name):
    """{relative path: bytes} of the kept input run ``name`` (or of a run committed under
    ``results/local/``, the calibration pair's), without its ``figures.json``."""
    path = INPUTS / f"{name}.tar.gz"
    committed = CALIBRATION_DIR / name
    if not path.is_file() and committed.is_dir():
        return {
            p.relative_to(committed).as_posix(): p.read_bytes()
            for p in sorted(committed.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != figures_file.FIGURES_FILE
        }
    if not path.is_file():
        raise SitebenchError(
            f"the exchange benchmark's input {paths.shown(path)} is missing",
            "make it again as perf/inputs/README.md says",
        )
    files = {}
    with tarfile.open(path) as tar:
        for member in tar:
            if not member.isfile():
                continue
            top, _, rel = member.name.partition("/")
            if top == name and rel:
                files[rel] = tar.extractfile(member).read()
    # Made anew from each synthetic run's own report (:func:`synthetic_run`).
    files.pop(figures_file.FIGURES_FILE, None)
    return files


@dataclass
class Varying:
    """A file that differs between the two real nights: its text in pieces, between which
    ``slots`` stand (constant bytes, or (first run's token, characters kept))."""

    pieces: list
    volatile_bytes: int = 0


@dataclass
class Template:
    names: tuple  # the real runs: the first is the template, the second what differs
    files: list = field(default_factory=list)  # [(rel, bytes or Varying)]
    calibration: dict = None  # with one run: :func:`calibrate`'s rates it was made by

    @property
    def bytes(self):
        return sum(len(_plain(v)) for _r, v in self.files)

    @property
    def volatile_bytes(self):
        return sum(v.volatile_bytes for _r, v in self.files if isinstance(v, Varying))

    @property
    def varying(self):
        return [rel for rel, v in self.files if isinstance(v, Varying)]


def _plain(value):
    if isinstance(value, bytes):
        return value
    return b"".join(p if isinstance(p, bytes) else p[0] for p in value.pieces)


def _shared_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _split(text, run):
    return TOKEN.split(text.replace(run.encode(), RUN_SLOT))


def _aligned(parts_a, parts_b, out):
    """Slots of two texts split alike; False when they are not."""
    if len(parts_a) != len(parts_b):
        return False
    if any(parts_a[i] != parts_b[i] for i in range(0, len(parts_a), 2)):
        return False
    for i, piece in enumerate(parts_a):
        if i % 2 == 0 or piece == parts_b[i]:
            out.append(piece)
        else:
            out.append((piece, _shared_prefix(piece, parts_b[i])))
    return True


def _varying(data_a, data_b, run_a, run_b):
    pieces = []
    parts_a, parts_b = _split(data_a, run_a), _split(data_b, run_b)
    if not _aligned(parts_a, parts_b, pieces):
        pieces = []
        lines_a = data_a.split(b"\n")
        lines_b = data_b.split(b"\n")
        same_count = len(lines_a) == len(lines_b)
        for i, line in enumerate(lines_a):
            end = b"\n" if i < len(lines_a) - 1 else b""
            la, lb = _split(line, run_a), _split(lines_b[i], run_b) if same_count else None
            if lb is not None and (la == lb or _aligned(la, lb, pieces)):
                if la == lb:
                    pieces.extend(la)
                pieces.append(end)
                continue
            pieces.extend(p if k % 2 == 0 else (p, 0) for k, p in enumerate(la))
            pieces.append(end)
    merged, volatile = [], 0
    for piece in pieces:
        if isinstance(piece, bytes):
            if merged and isinstance(merged[-1], bytes):
                merged[-1] += piece
            else:
                merged.append(piece)
        else:
            volatile += len(piece[0]) - piece[1]
            merged.append(piece)
    # The run's own name is filled in per run (RUN_SLOT), not counted as varying bytes.
    return Varying(merged, volatile)


def template(names=None):
    """The first run of ``names`` (default :func:`pair`), each file constant or
    :class:`Varying` against the second; with one run, against the calibration's rates."""
    names = tuple(names or pair())
    if len(names) == 1:
        return _template_alone(names[0], calibrate(CALIBRATION))
    run_a, run_b = names
    a, b = run_files(run_a), run_files(run_b)
    files = []
    for rel in sorted(a):
        data = a[rel]
        other = b.get(rel)
        if other == data and run_a.encode() not in data:
            files.append((rel, data))
        elif other is None:
            # Only in the first run (a new case or log): as if every token changed.
            files.append((rel, _varying(data, b"", run_a, run_b)))
        else:
            files.append((rel, _varying(data, other, run_a, run_b)))
    return Template((run_a, run_b), files)


def _file_kind(rel):
    """A file's kind across runs and suites: its name without ReFrame's test hashes, and
    its top folder (rfm_job.out of any check is one kind; perflogs one kind)."""
    top, name = rel.split("/")[0], rel.rsplit("/", 1)[-1]
    if top == "perflogs":
        return "perflogs"
    return f"{top}/{re.sub(r'_[0-9a-f]{8}', '', name)}"


def _token_kind(token, before):
    if ISO.fullmatch(token) or COMPACT.fullmatch(token):
        return "time"
    if len(token) >= 8:
        return "long"  # a hash, uuid, epoch time or job id
    return "fraction" if before.endswith(b".") else "integer"


def _share(key, salt):
    """A fraction in [0, 1) fixed by ``key``: which file or token of a kind is chosen."""
    digest = hashlib.blake2b(f"{salt}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def calibrate(names):
    """What differed between two real nights, kind by kind: {"files": {kind: share of
    files that differed}, "tokens": {kind: (share of tokens that differed, share of their
    characters the two shared)}} over the files that differed."""
    tmpl = template(names)
    files, tokens = {}, {}
    for rel, value in tmpl.files:
        files.setdefault(_file_kind(rel), []).append(not isinstance(value, bytes))
        if isinstance(value, bytes):
            continue
        before = b""
        for piece in value.pieces:
            if isinstance(piece, bytes):
                parts = TOKEN.split(piece)
                for i in range(1, len(parts), 2):
                    tokens.setdefault(_token_kind(parts[i], parts[i - 1]), []).append(None)
                before = parts[-1]
                continue
            token, kept = piece
            tokens.setdefault(_token_kind(token, before), []).append(kept / len(token))
            before = b""
    return {
        "runs": list(names),
        "files": {k: sum(v) / len(v) for k, v in files.items()},
        "tokens": {
            k: (
                sum(x is not None for x in v) / len(v),
                statistics.median([x for x in v if x is not None] or [0.0]),
            )
            for k, v in tokens.items()
        },
    }


def _template_alone(name, rates):
    """One real run made :class:`Varying` by the calibration's rates: a file of a kind that
    differed in that share of cases (chosen by its path; a kind the calibration never saw
    differs), and in it each token of a kind in that share (chosen by its place), keeping
    the share of characters the two real values shared."""
    files = []
    for rel, data in sorted(run_files(name).items()):
        if _share(rel, "file") >= rates["files"].get(_file_kind(rel), 1.0):
            named = name.encode() in data  # the run's own name is the synthetic run's
            files.append((rel, Varying(_split(data, name), 0) if named else data))
            continue
        parts = _split(data, name)
        pieces, volatile = [], 0
        for i, part in enumerate(parts):
            if i % 2 == 0:
                pieces.append(part)
                continue
            kind = _token_kind(part, parts[i - 1])
            share, kept = rates["tokens"].get(kind, (1.0, 0.0))
            if _share(f"{rel}\0{i}", "token") < share:
                keep = int(len(part) * kept)
                pieces.append((part, keep))
                volatile += len(part) - keep
            else:
                pieces.append(part)
        merged = []
        for piece in pieces:
            if isinstance(piece, bytes) and merged and isinstance(merged[-1], bytes):
                merged[-1] += piece
            else:
                merged.append(piece)
        files.append((rel, Varying(merged, volatile)))
    return Template((name,), files, rates)


def _new_time(token, rng):
    shift = datetime.timedelta(seconds=rng.randrange(1, 7200))
    if ISO.fullmatch(token):
        text = token.decode()
        sep = text[10]
        when = datetime.datetime.strptime(text.replace(" ", "T"), "%Y-%m-%dT%H:%M:%S")
        return (when + shift).strftime(f"%Y-%m-%d{sep}%H:%M:%S").encode()
    when = datetime.datetime.strptime(token.decode(), "%Y%m%dT%H%M%S")
    return (when + shift).strftime("%Y%m%dT%H%M%S").encode()


def _new_token(token, kept, rng):
    if ISO.fullmatch(token) or COMPACT.fullmatch(token):
        return _new_time(token, rng)
    tail = rng.randbytes(len(token) - kept)
    digits = tail.translate(DIGITS)
    if len(token) >= 8:
        # A hash or uuid: its digits made new, its letters kept (a long number's mantissa
        # ends in the exponent's e: 2.9714314220072646e-06 stays a number).
        digits = bytes(
            token[kept + i] if token[kept + i] > 57 else digits[i] for i in range(len(digits))
        )
    elif any(c > 57 for c in token[kept:]):
        return token  # a short token with a letter (1e in 1e+05): a number's syntax, kept
    new = token[:kept] + digits
    if kept == 0 and len(new) > 1 and token[0] != 48 and new[0] == 48:
        new = b"1" + new[1:]  # no leading zero where there was none (JSON numbers)
    return new


def fill(value, run_name, rng):
    """The bytes of a template file for one synthetic run."""
    if isinstance(value, bytes):
        return value
    name = run_name.encode()
    out = []
    for piece in value.pieces:
        if isinstance(piece, bytes):
            out.append(piece)
        else:
            out.append(_new_token(piece[0], piece[1], rng))
    return b"".join(out).replace(RUN_SLOT, name)


def run_name(night, site):
    stamp = time.strftime("%Y%m%dT020000Z", time.gmtime(EPOCH + night * 86400))
    return f"{stamp}-{site:02d}{night:04x}"


def site_name(site):
    return f"site{site:02d}"


def synthetic_run(tmpl, night, site):
    """[(rel, bytes)] of ``site``'s run of ``night``, the same bytes every time it is made:
    the template's files in its order, then the ``figures.json`` its report gives, made by
    the function a stored run's is made by (:func:`figures_file.derive`)."""
    name = run_name(night, site)
    rng = random.Random(night * 1000003 + site)
    files = [(rel, fill(value, name, rng)) for rel, value in tmpl.files]
    report = dict(files).get(figures_file.REPORT_FILE)
    if report is not None:
        derived = figures_file.derive(json.loads(report))
        files.append((figures_file.FIGURES_FILE, figures_file.encode(derived)))
    return name, files


def write_run(tmpl, night, site, parent):
    """The synthetic run written as a directory under ``parent``; its path."""
    name, files = synthetic_run(tmpl, night, site)
    run = parent / name
    for rel, data in files:
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(data)
    return run


def fast_import(bare, tmpl, nights, sites):
    """Append one commit per site and night (that site's run of that night, unsigned) to
    ``main``; the signing is :func:`sign`. Blobs of one file are written site after site so
    that fast-import stores each as a delta of the one before, as a repack would."""
    proc = subprocess.Popen(
        ["git", "-C", str(bare), "fast-import", "--quiet", "--done"], stdin=subprocess.PIPE
    )
    out = proc.stdin
    constant = {}
    mark = 0
    head = _rev(bare, "refs/heads/main")
    for i, (rel, value) in enumerate(tmpl.files):
        if isinstance(value, bytes):
            mark += 1
            constant[rel] = mark
            out.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(value)) + value + b"\n")
    for night in nights:
        made = [synthetic_run(tmpl, night, site) for site in sites]
        # The template's files, then those made per run (figures.json): constant or not.
        rels = [rel for rel, _ in made[0][1]] if made else []
        marks = {}
        for k, rel in enumerate(rels):
            if rel in constant:
                continue
            for s, (_name, files) in enumerate(made):
                mark += 1
                marks[s, k] = mark
                data = files[k][1]
                out.write(b"blob\nmark :%d\ndata %d\n" % (mark, len(data)) + data + b"\n")
        for s, site in enumerate(sites):
            name, _files = made[s]
            lines = []
            for k, rel in enumerate(rels):
                path = f"{site_name(site)}/{name}/{rel}".encode()
                used = constant[rel] if rel in constant else marks[s, k]
                lines.append(b"M 100644 :%d %s\n" % (used, path))
            msg = f"results: {site_name(site)}: 1 run ({name})\n".encode()
            out.write(b"commit refs/heads/main\n")
            out.write(
                b"committer perf <perf@sitebench> %d +0000\n" % (EPOCH + night * 86400 + 7200)
            )
            out.write(b"data %d\n%s\n" % (len(msg), msg))
            if head:
                out.write(b"from %s\n" % head.encode())
                head = None
            out.write(b"".join(lines))
    out.write(b"done\n")
    out.close()
    if proc.wait() != 0:
        raise SitebenchError("git fast-import failed", "see its message above")


def _rev(bare, ref):
    return subprocess.run(
        ["git", "-C", str(bare), "rev-parse", "-q", "--verify", ref],
        capture_output=True,
        text=True,
    ).stdout.strip()


def sign(bare, since, key_of):
    """Sign every commit after ``since`` (None: all) as its site's publish does (``git
    commit-tree -S`` with the site's SSH key), rewriting the chain; the new tip is main."""
    spec = f"{since}..main" if since else "main"
    listing = subprocess.run(
        ["git", "-C", str(bare), "log", "--reverse", "--format=%H %T %ct%x00%B%x00", spec],
        capture_output=True,
        check=True,
    ).stdout.split(b"\x00")
    parent = since
    for i in range(0, len(listing) - 1, 2):
        head, message = listing[i].decode().strip(), listing[i + 1].decode()
        _commit, tree, when = head.split()
        site = message.split(":")[1].strip()
        key = key_of(site)
        args = ["git", "-C", str(bare), "-c", "gpg.format=ssh", "-c", f"user.signingKey={key}"]
        args += ["-c", "user.name=sitebench", "-c", f"user.email=sitebench@{site}"]
        args += ["commit-tree", "-S", tree, *(["-p", parent] if parent else []), "-F", "-"]
        parent = (
            subprocess.run(
                args,
                input=message.encode(),
                capture_output=True,
                check=True,
                env={
                    **_env(),
                    "GIT_COMMITTER_DATE": f"{when} +0000",
                    "GIT_AUTHOR_DATE": f"{when} +0000",
                },
            )
            .stdout.decode()
            .strip()
        )
    subprocess.run(["git", "-C", str(bare), "update-ref", "refs/heads/main", parent], check=True)
    return parent


def _env():
    import os

    return dict(os.environ)


def gz_size(name):
    """Bytes of the kept archive of ``name`` (None: a committed run of results/local/)."""
    path = INPUTS / f"{name}.tar.gz"
    return path.stat().st_size if path.is_file() else None


def tar_run(run_dir, dest):
    """Keep a real run as ``dest`` (``<name>.tar.gz``): its files only, in name order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as tar:
        for path in sorted(p for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()):
            info = tar.gettarinfo(str(path), f"{run_dir.name}/{path.relative_to(run_dir)}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(path, "rb") as handle:
                tar.addfile(info, handle)
    dest.write_bytes(buf.getvalue())
    return dest
