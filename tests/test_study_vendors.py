"""The two hosted systems of the study line-up against local fakes of their documented APIs:
Modulate Velma-2 STT batch (multipart ``upload_file``, ``X-API-Key``) and Smallest AI Pulse (raw
audio as application/octet-stream, settings as query parameters, ``Authorization: Bearer``)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from engine.backends import ASR_BACKENDS
from engine.errors import BackendUnavailable

KEY = "sk-study-test-0123456789"


class Fake:
    """One vendor on 127.0.0.1: checks the documented request and answers with the documented JSON."""

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        self.seen: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer = fake.answer(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        url = urlsplit(path)
        self.seen.append({"path": url.path, "query": parse_qs(url.query), "headers": headers, "body": body})
        if self.vendor == "modulate":
            if headers.get("x-api-key") != KEY:
                return 401, {"detail": "invalid API key"}
            if url.path != "/api/velma-2-stt-batch" or not headers.get("content-type", "").startswith("multipart/form-data"):
                return 400, {"detail": "bad request"}
            if b'name="upload_file"' not in body or b"RIFF" not in body:
                return 422, {"detail": "upload_file is required"}
            return 200, {"text": "Hello everyone.", "duration_ms": 1000,
                "utterances": [{"start_ms": 0, "end_ms": 1000, "speaker": 1, "text": "Hello everyone."}]}
        if headers.get("authorization") != f"Bearer {KEY}":
            return 401, {"message": "Unauthorized"}
        if (url.path != "/waves/v1/pulse/get_text" or headers.get("content-type") != "application/octet-stream"
                or not body.startswith(b"RIFF")):
            return 400, {"message": "bad request"}
        return 200, {"status": "success", "transcription": "Hello world.", "words": [], "metadata": {"duration": 1.0}}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Fake]]:
    out = {v: Fake(v) for v in ("modulate", "smallest")}
    monkeypatch.setenv("MODULATE_API_KEY", KEY)
    monkeypatch.setenv("SMALLEST_API_KEY", KEY)
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    yield out
    for f in out.values():
        f.close()


def _clip() -> np.ndarray:
    t = np.arange(16000, dtype=np.float32) / 16000
    return (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.mark.parametrize(("vendor", "model", "expected"),
    [("modulate", "velma-2-stt-batch", "Hello everyone."), ("smallest", "pulse", "Hello world.")])
def test_study_vendor_sends_the_documented_request(fakes: dict[str, Fake], vendor: str, model: str, expected: str) -> None:
    fake = fakes[vendor]
    backend = ASR_BACKENDS.get(vendor)(model=model, base_url=fake.base_url, backoff_s=0.01, max_retries=1,
        language="en" if vendor == "smallest" else None)
    backend.load()
    assert backend.transcribe_batch([_clip()]) == [expected]
    (req,) = fake.seen
    if vendor == "smallest":
        assert req["query"] == {"language": ["en"]}
    else:
        assert re.search(rb'name="upload_file"; filename="audio.wav"', req["body"])
    assert KEY not in json.dumps(backend.info().as_dict())


def test_study_vendor_without_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMALLEST_API_KEY", raising=False)
    avail = ASR_BACKENDS.get("smallest").availability({"model": "pulse"})
    assert not avail.runnable and "SMALLEST_API_KEY" in avail.reason
    with pytest.raises(BackendUnavailable, match="SMALLEST_API_KEY"):
        ASR_BACKENDS.get("smallest")(model="pulse").load()
