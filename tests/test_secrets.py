"""Secrets stored nowhere: one scrubber for every artefact, error text and log line.

Every form a key can take on the way out (raw, with the CR a CRLF .env file leaves, URL-encoded,
base64 alone or as HTTP Basic ``user:key``, JSON- or HTML-escaped) is removed; a key read from
the environment is stripped before it is sent; and a whole run against a fake vendor that echoes
the key back in every encoding stores it in no file (parquet, summary, report, DuckDB, cache) and
prints it nowhere.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends import ASR_BACKENDS
from engine.backends.hosted.cache import ResponseCache
from engine.backends.hosted.scrub import REDACTED, install_log_scrubber, register_secret_env, scrub
from engine.errors import HostedAuthError, HostedRequestError
from tests.fake_vendors import OPENAI_STT, FakeVendor, options_for

REPO = Path(__file__).resolve().parents[1]
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
#: a key with characters that URL-encoding and base64 both change
KEY = "sk-live+Ab/cd=" + os.urandom(10).hex() + "&q~"
KEY_ENV = "OPENAI_API_KEY"


def forms(key: str) -> dict[str, str]:
    """Every spelling of ``key`` that must never be stored or shown."""
    q = urllib.parse.quote(key, safe="")
    out = {
        "raw": key,
        "cr": key + "\r",
        "crlf": key + "\r\n",
        "quote": q,
        "quote-lower-hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), q),
        "quote-keep-slash": urllib.parse.quote(key),
        "quote_plus": urllib.parse.quote_plus(key),
        "double-quote": urllib.parse.quote(q, safe=""),
        "b64": base64.b64encode(key.encode()).decode(),
        "b64-urlsafe-nopad": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "b64-key-colon": base64.b64encode(f"{key}:".encode()).decode(),
        "json": json.dumps(key)[1:-1],
        "html": html.escape(key),
    }
    for user in ("a", "ab", "abc"):  # the three byte alignments of the key inside base64(user:key)
        out[f"basic-{user}"] = "Basic " + base64.b64encode(f"{user}:{key}".encode()).decode()
    return out


def leaks(text: str, key: str = KEY) -> list[str]:
    """The forms of ``key`` still present in ``text`` (the form names)."""
    found = [name for name, form in forms(key).items() if name not in ("cr", "crlf") and form in text]
    core = base64.b64encode(key.encode()).decode()[4:-4]
    if core in text:
        found.append("b64-core")
    return found


@pytest.fixture()
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


@pytest.mark.parametrize("form", list(forms(KEY)))
def test_every_form_of_the_key_is_scrubbed(key: str, form: str) -> None:
    text = f"server said: <{forms(key)[form]}> end"
    out = scrub(text)
    assert leaks(out) == [], out
    assert out.startswith("server said: <") and out.endswith("> end") and REDACTED in out


def test_only_secrets_are_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short value under a secret-looking name and an ordinary variable are left alone; a name a
    backend registered is scrubbed whatever it is called."""
    monkeypatch.setenv("SOME_TOKEN", "abc")
    monkeypatch.setenv("AUDIT_TEST_PLAIN_SETTING", "hello world and more")
    monkeypatch.setenv("AUDIT_TEST_ODD_NAME", "zz-private-value-123")
    assert scrub("abc hello world and more zz-private-value-123") == "abc hello world and more zz-private-value-123"
    register_secret_env("AUDIT_TEST_ODD_NAME")
    assert scrub("abc zz-private-value-123") == f"abc {REDACTED}"


def test_log_lines_and_tracebacks_are_scrubbed(key: str) -> None:
    install_log_scrubber()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("audit.test.secrets")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("retrying with %s and %s", key, urllib.parse.quote(key, safe=""))
        try:
            raise ValueError(f"Invalid header value b'Bearer {key}\\r'")
        except ValueError:
            logger.exception("request failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "retrying with" in text and "Invalid header value" in text
    assert leaks(text) == [], text


def test_cache_records_are_scrubbed(key: str, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path, "x")
    cache.put("ab" * 32, {"text": f"echo {key}", "response": {"debug": [urllib.parse.quote_plus(key)], key: 1}, "model": "m"})
    stored = (tmp_path / "x" / "ab" / f"{'ab' * 32}.json").read_text()
    assert leaks(stored) == [] and REDACTED in stored


# -- through the shared client ---------------------------------------------------------------------


@pytest.fixture()
def fake(key: str) -> Iterator[FakeVendor]:
    f = FakeVendor(OPENAI_STT, key)
    yield f
    f.close()


def stt(fake: FakeVendor, tmp_path: Path, **extra: Any) -> Any:
    b = ASR_BACKENDS.get("openai-compatible")(**options_for(fake, cache_dir=str(tmp_path / "cache"), **extra))
    b.load()
    return b


CLIP = (0.1 * np.sin(np.arange(8000) / 3.0)).astype(np.float32)


@pytest.mark.parametrize("form", ["raw", "quote", "quote_plus", "b64-basic", "b64-urlsafe"])
def test_key_echoed_in_any_encoding_is_not_in_the_error(fake: FakeVendor, tmp_path: Path, form: str) -> None:
    b = stt(fake, tmp_path, max_retries=0)
    fake.inject(f"echo:{form}")
    with pytest.raises(HostedRequestError) as info:
        b.transcribe_batch([CLIP])
    msg = str(info.value)
    assert "you sent" in msg and REDACTED in msg and leaks(msg) == [], msg


def test_key_with_a_stray_cr_is_stripped_before_sending(fake: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY + "\r")  # a CRLF .env file
    assert stt(fake, tmp_path).transcribe_batch([CLIP]) == ["hello world"]
    assert fake.requests[-1][2]["authorization"] == f"Bearer {KEY}"


def test_key_that_cannot_be_a_header_is_refused_by_name(fake: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY[:8] + "\n" + KEY[8:])
    b = stt(fake, tmp_path)
    with pytest.raises(HostedAuthError, match=f"environment variable {KEY_ENV}") as info:
        b.transcribe_batch([CLIP])
    assert leaks(str(info.value), KEY[8:]) == [] and KEY[8:] not in str(info.value)
    assert fake.requests == []  # nothing was sent


# -- a whole run: nothing stored, nothing printed ----------------------------------------------------


def _librivox(n: int) -> list[Path]:
    return sorted(LIBRIVOX.glob("*.wav"))[:n]


@pytest.mark.slow
def test_crlf_key_and_echoing_server_leave_no_trace_in_a_run(tmp_path: Path) -> None:
    """`audit run` with the key in a CRLF-style variable against a server that echoes it URL- and
    base64-encoded in errors and in a transcript: the run finishes and no form of the key is in
    utterances.parquet, summary.json, report.md/html, the DuckDB file, the cache or the console."""
    if not LIBRIVOX.is_dir():
        pytest.skip("pocketsphinx-testdata is not installed")
    fake = FakeVendor(OPENAI_STT, KEY, transcript=f"the key is {urllib.parse.quote(KEY, safe='')} ok")
    try:
        fake.inject("echo:quote", "echo:b64-basic", "echo:quote_plus")  # the batch, then two clips alone
        clips = _librivox(3)
        manifest = tmp_path / "manifest.jsonl"
        manifest.write_text(
            "".join(json.dumps({"utt_id": f"u{i}", "audio_filepath": str(p), "text": "some words"}) + "\n" for i, p in enumerate(clips))
        )
        cfg = tmp_path / "configs"
        shutil.copytree(REPO / "audit_configs", cfg)
        opts = {
            "model": "whisper-1",
            "base_url": fake.base_url,
            "max_retries": 0,
            "batch_size": 1,
            "cache_dir": str(tmp_path / "hosted-cache"),
        }
        (cfg / "models" / "remote.yaml").write_text(
            json.dumps({"models": {"remote-asr": {"backend": "openai-compatible", "options": opts, "batch_size": 3}}})
        )
        recipe = tmp_path / "remote.yaml"
        recipe.write_text(f"name: remote\ndataset: {{path: {manifest}}}\nmodels: [remote-asr]\nscoring: {{n_boot: 20}}\n")
        env = dict(os.environ, AUDIT_CONFIG_DIR=str(cfg), COLUMNS="200", AUDIT_CACHE=str(tmp_path / "audit-cache"))
        env[KEY_ENV] = KEY + "\r"
        audit = Path(sys.executable).with_name("audit")
        proc = subprocess.run(
            [str(audit), "-v", "run", str(recipe), "--out", str(tmp_path / "run")],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        fake.close()
    console = proc.stdout + proc.stderr
    assert proc.returncode == 0, console[-3000:]
    assert all(r[2].get("authorization") == f"Bearer {KEY}" for r in fake.requests)  # sent stripped
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "run" / "utterances.parquet").to_pylist()
    errors = [r["error"] for r in rows if r["error"]]
    assert len(errors) == 2 and all("you sent" in e and REDACTED in e for e in errors), errors
    assert any(r["hyp_raw"] and REDACTED in r["hyp_raw"] for r in rows)
    assert leaks(json.dumps(rows, default=str)) == []
    assert leaks(console) == [], console[-2000:]
    files = [p for root in (tmp_path / "run", tmp_path / "hosted-cache") for p in root.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"utterances.parquet", "summary.json", "report.md", "report.html", "results.duckdb"} <= names, names
    for p in files:
        data = p.read_bytes().decode("latin-1")
        assert leaks(data) == [], p
    import duckdb

    con = duckdb.connect(str(tmp_path / "run" / "exports" / "results.duckdb"), read_only=True)
    try:
        for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
            text = json.dumps(con.execute(f'SELECT * FROM "{table}"').fetchall(), default=str)
            assert leaks(text) == [], table
    finally:
        con.close()
