"""The one trusted reader of a finished run directory: ``summary.json`` and ``utterances.parquet``.

A run directory holds figures (``summary.json``) and the rows they were computed from
(``utterances.parquet``). Anything that reads a finished run (``api.load``, ``api.compare``,
``audit report``, ``audit query``, ``audit tracks``) reads it through ``read_run``, which checks
two digests the run wrote:

* ``summary.json`` → ``digest.sha256``: the SHA-256 of the summary's own content (every key but
  ``digest``, as canonical JSON: sorted keys, no spaces, UTF-8), so a figure edited after the run
  is caught;
* ``summary.json`` → ``rows.sha256``: the SHA-256 of ``utterances.parquet``'s bytes when the rows
  were scored, so rows changed after scoring are caught.

A mismatch, or a summary without either digest, is refused (``RunIntegrityError``, naming the
file and what to do) by the commands whose results are trusted downstream (the API, merges,
tracks); the report-only commands (``audit report`` on one run, ``audit query``) read it anyway
and warn loudly, since they only show what the files hold. A file that is not JSON, not a JSON
object, or not readable Parquet (truncated, corrupt) is always an engine error naming the file,
never a parser's traceback.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from engine.errors import ConfigError

log = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"
ROWS_FILE = "utterances.parquet"
DIGEST_KEY = "digest"
DIGEST_OF = "every other key of summary.json as canonical JSON (sorted keys, separators ',' and ':', UTF-8)"


class RunIntegrityError(ConfigError):
    """A run directory whose files no longer match the digests the run recorded (or that has none)."""


def canonical_json(summary: Mapping[str, Any]) -> bytes:
    """The bytes the summary digest is taken of: every key but ``digest``, sorted, compact, UTF-8."""
    body = {k: v for k, v in summary.items() if k != DIGEST_KEY}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def summary_digest(summary: Mapping[str, Any]) -> str:
    """SHA-256 of the summary's content as a reader of summary.json sees it (after a JSON round trip)."""
    plain = json.loads(json.dumps({k: v for k, v in summary.items() if k != DIGEST_KEY}))
    return hashlib.sha256(canonical_json(plain)).hexdigest()


def seal(summary: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Add (or replace) ``digest`` in place: what ``write_summary`` does before the file is written."""
    summary.pop(DIGEST_KEY, None)
    summary[DIGEST_KEY] = {"sha256": summary_digest(summary), "of": DIGEST_OF}
    return summary


def rows_fingerprint(path: Path) -> str:
    """SHA-256 of ``utterances.parquet``'s bytes (a folder of parts: of each part's name and bytes, in name order),
    recorded in summary.json when the run is scored."""
    path = Path(path)
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode("utf-8") + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class LoadedRun:
    """A run directory as read: its summary, its rows, and what did not check out (only when not strict)."""

    path: Path
    summary: dict[str, Any]
    table: pd.DataFrame
    problems: tuple[str, ...] = ()


def read_summary_file(run_dir: Path) -> dict[str, Any]:
    """``summary.json`` as a mapping; a missing, unreadable, truncated or non-object file is a ``ConfigError`` naming it."""
    path = Path(run_dir) / SUMMARY_FILE
    if not path.is_file():
        raise ConfigError(f"{run_dir}: no {SUMMARY_FILE} (is this a run directory? run `audit run ... --out {run_dir}` first)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); the file is corrupt; re-run the recipe into {run_dir}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); the file is truncated or corrupt; "
            f"re-run the recipe into {run_dir} (finished units are reused) to write it again"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a summary (a JSON object), but a JSON {type(data).__name__}")
    return data


def read_rows_file(run_dir: Path) -> pd.DataFrame:
    """``utterances.parquet`` (a file or a folder of parts); a missing, truncated or corrupt file is a ``ConfigError`` naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(run_dir) / ROWS_FILE
    if not path.exists():
        raise ConfigError(f"{run_dir}: no {ROWS_FILE} (is this a run directory written by `audit run`?)")
    try:
        return pq.read_table(path).to_pandas()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ConfigError(
            f"{path}: not a readable Parquet table ({type(exc).__name__}: {str(exc)[:200]}); the file is truncated or "
            f"corrupt; re-run the recipe into {run_dir} to write it again"
        ) from None


def integrity_problems(run_dir: Path, summary: Mapping[str, Any], rows: bool = True) -> list[str]:
    """What does not check out: the summary's own digest, and (``rows``) the rows' digest. Empty when both hold."""
    run_dir = Path(run_dir)
    spath = run_dir / SUMMARY_FILE
    problems = []
    sealed = summary.get(DIGEST_KEY)
    if not isinstance(sealed, Mapping) or not isinstance(sealed.get("sha256"), str):
        problems.append(
            f"{spath} has no digest of its content (written by an engine older than this check, or the digest was removed), "
            "so an edit cannot be ruled out"
        )
    elif sealed["sha256"] != summary_digest(summary):
        problems.append(f"{spath} was changed after the run wrote it: its content no longer matches its digest.sha256")
    if rows:
        rpath = run_dir / ROWS_FILE
        recorded = summary.get("rows")
        sha = recorded.get("sha256") if isinstance(recorded, Mapping) else None
        if not isinstance(sha, str):
            problems.append(f"{spath} records no digest of {rpath} (rows.sha256), so rows changed after scoring cannot be ruled out")
        elif rpath.exists() and sha != rows_fingerprint(rpath):
            problems.append(f"{rpath} changed after the run was scored: its SHA-256 differs from {spath}'s rows.sha256")
    return problems


def read_run(run_dir: Path, *, strict: bool = True, warn: Callable[[str], None] | None = None) -> LoadedRun:
    """Read a run directory (summary and rows) through its digests (see the module docstring).

    ``strict``: refuse (``RunIntegrityError``) a run whose digests do not hold or are missing;
    otherwise each problem is logged as a warning, passed to ``warn`` and kept in ``problems``.
    """
    run_dir = Path(run_dir)
    summary = read_summary_file(run_dir)
    if not (run_dir / ROWS_FILE).exists():
        raise ConfigError(f"{run_dir}: no {ROWS_FILE} (is this a run directory written by `audit run`?)")
    problems = integrity_problems(run_dir, summary)
    if problems and strict:
        raise RunIntegrityError(
            "; ".join(problems) + f". The figures cannot be trusted as the run's own: re-run the recipe into {run_dir} "
            "(finished units are reused; the rows are scored again and summary.json rewritten), or run `audit report` on it to "
            "read it anyway with a warning"
        )
    for p in problems:
        log.warning("%s", p)
        if warn is not None:
            warn(p)
    return LoadedRun(run_dir, summary, read_rows_file(run_dir), tuple(problems))
