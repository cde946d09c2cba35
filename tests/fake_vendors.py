"""Local fake speech-to-text vendors on 127.0.0.1 that follow each vendor's documented API.

Each fake checks the vendor's auth header (401 for a wrong key) and every documented field of
each request (tests/vendor_requests.py: method, path, query, headers, body fields and their types;
an unexpected or missing field is answered 400 and kept in ``violations``), answers with the
documented JSON, and counts billable calls (the request that creates a transcription) so tests
can prove that nothing is paid for twice. ``seen`` keeps every parsed request, so a test can
compare a request with the one the study sends. Faults queued
with ``inject`` apply to the next requests in order: ``"429"`` (with ``Retry-After``), ``"500"``,
``"slow:<seconds>"``, ``"malformed"`` (a 200 whose body is not JSON), ``"redirect:<url>"``
(a 307 to that URL), ``"401"``, ``"402"``, ``"echo-key"`` (a 500 whose body repeats the key),
``"echo:<form>"`` (a 500 repeating the key as ``quote``, ``quote_plus``, ``b64-basic`` (base64 of
``user:key``), ``b64-urlsafe`` or ``raw``), ``"retry-after:<value>"`` (a 429 with that header),
``"drop"`` (the connection is closed without an answer), ``"trickle:<seconds>"`` (a 200 whose
body arrives a byte every 0.25 s), ``"huge:<bytes>"`` (a 200 declaring and streaming that many
bytes) and ``"huge-unsized:<bytes>"`` (the same without Content-Length). ``openai-stt`` is the
OpenAI audio transcription API (``openai-compatible``).
Each request's body digest is kept (``body_sha256``), so a test can count requests per clip;
``latency_s`` delays every answer after the request is billed, and ``transcript_fn`` answers
Deepgram requests with a transcript made from the audio sent.

The fakes speak HTTP/1.1 with keep-alive, as the vendors' servers do, and count the TCP
connections they accept (``connections``), so a test can see whether a client reuses them.
``FakeVendor(..., tls=True)`` serves HTTPS with a self-signed certificate made at start-up
(``ca_file`` is the certificate to trust; ``options_for`` passes it).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.vendor_requests import AUTH_HEADERS, MODULATE_ENDPOINTS, Request, violations

VENDORS = ("deepgram", "assemblyai", "speechmatics", "elevenlabs", "gladia", "google", "azure", "modulate", "smallest")
OPENAI_STT = "openai-stt"
JUDGE_VENDORS = ("gemini", "openai")
AUTH = {**AUTH_HEADERS, "gemini": ("x-goog-api-key", "{key}"), "openai": ("authorization", "Bearer {key}")}


class FakeVendor:
    """One vendor's API on an ephemeral port."""

    def __init__(self, vendor: str, key: str, transcript: str = "hello world", polls_before_done: int = 1, tls: bool = False) -> None:
        if vendor not in (*VENDORS, *JUDGE_VENDORS, OPENAI_STT):
            raise ValueError(vendor)
        self.vendor = vendor
        self.key = key
        self.transcript = transcript
        self.polls_before_done = polls_before_done
        self.billable = 0
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.body_sha256: list[str] = []  # SHA-256 of each request's body, in the order of ``requests``
        self.latency_s = 0.0  # seconds between taking (and billing) a request and answering it
        self.transcript_fn: Any = None  # transcript_fn(audio bytes) -> transcript, when set (deepgram)
        self.faults: list[str] = []
        #: (route, parsed request) of every request that reached a route, and (route, violations) of
        #: those that did not match the vendor's documented request (answered 400)
        self.seen: list[tuple[str, Request]] = []
        self.violations: list[tuple[str, list[str]]] = []
        self.jobs: dict[str, int] = {}
        self.replies: list[str] = []  # judges: reply texts to give, in order (default below)
        self.audio_parts: list[int] = []  # judges: audio clips seen per request
        self.reply_by_size: dict[int, str] = {}  # judges: reply chosen by the first clip's WAV size in bytes
        self.reply_fn: Any = None  # judges: reply_fn(prompt text, [WAV bytes of each clip]) -> reply text, when set
        self.lock = threading.Lock()
        self.connections = 0  # TCP connections accepted
        self._tls_dir = Path(tempfile.mkdtemp(prefix="fake-tls-")) if tls else None
        self.ca_file: str | None = None
        tls_ctx = None
        if self._tls_dir is not None:
            cert, key_file = self_signed_cert(self._tls_dir)
            self.ca_file = str(cert)
            tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls_ctx.load_cert_chain(str(cert), str(key_file))
        fake = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> tuple[socket.socket, Any]:
                conn, addr = super().get_request()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # headers and body are two writes: no Nagle delay
                with fake.lock:
                    fake.connections += 1
                if tls_ctx is not None:  # the handshake happens in the connection's own thread, on its first read
                    conn = tls_ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                return conn, addr

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the vendors' servers

            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]  # a killed client is expected
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"{'https' if self.ca_file else 'http'}://127.0.0.1:{self.server.server_address[1]}"

    def inject(self, *faults: str) -> None:
        with self.lock:
            self.faults.extend(faults)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._tls_dir is not None:
            shutil.rmtree(self._tls_dir, ignore_errors=True)

    # ---- request handling -------------------------------------------------------------------

    def _send(
        self, h: BaseHTTPRequestHandler, status: int, body: Any, ctype: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self.lock:
            self.requests.append((method, h.path, headers))
            self.body_sha256.append(hashlib.sha256(body).hexdigest())
            fault = self.faults.pop(0) if self.faults else None
        if fault is not None:
            if fault == "429":
                return self._send(h, 429, {"err_msg": "rate limited"}, headers={"Retry-After": "1"})
            if fault == "500":
                return self._send(h, 500, {"err_msg": "internal"})
            if fault == "drop":  # the server closes the connection without answering (a keep-alive connection it timed out)
                h.close_connection = True
                return None
            if fault == "echo-key":
                return self._send(h, 500, f"bad request with header {headers.get(AUTH[self.vendor][0])}", ctype="text/plain")
            if fault.startswith("echo:"):
                return self._send(
                    h, 500, f"bad request; you sent {_encoded(self.key, fault.split(':', 1)[1])} (check it)", ctype="text/plain"
                )
            if fault.startswith("retry-after:"):
                return self._send(h, 429, {"err_msg": "rate limited"}, headers={"Retry-After": fault.split(":", 1)[1]})
            if fault.startswith("trickle:"):
                return _trickle(h, float(fault.split(":", 1)[1]))
            if fault.startswith(("huge:", "huge-unsized:")):
                return _huge(h, int(fault.split(":", 1)[1]), sized=fault.startswith("huge:"))
            if fault.startswith("slow:"):
                time.sleep(float(fault.split(":", 1)[1]))
            elif fault == "malformed":
                return self._send(h, 200, b"<html>upstream proxy error", ctype="text/html")
            elif fault.startswith("redirect:"):
                return self._send(h, 307, b"", headers={"Location": fault.split(":", 1)[1]})
            elif fault == "401":
                return self._send(h, 401, {"err_msg": "Invalid credentials."})
            elif fault == "402":
                return self._send(h, 402, {"err_msg": "Insufficient credits"})
        name, template = AUTH[self.vendor]
        if headers.get(name) != template.format(key=self.key):
            return self._send(h, 401, {"error": "missing or invalid API key"})
        url = urlsplit(h.path)
        route = getattr(self, f"_{self.vendor.replace('-', '_')}")
        if self.vendor in JUDGE_VENDORS:
            status, answer, *rest = route(method, url.path, parse_qs(url.query), body, headers)
        else:
            req = Request(method, url.path, parse_qs(url.query, keep_blank_values=True), headers, body)
            status, answer, *rest = route(req)
        if self.latency_s:
            time.sleep(self.latency_s)
        self._send(h, status, answer, *rest)

    def _bill(self) -> None:
        with self.lock:
            self.billable += 1

    def _job(self, prefix: str) -> str:
        job = f"{prefix}{uuid.uuid4().hex[:12]}"
        with self.lock:
            self.jobs[job] = 0
        return job

    def _poll(self, job: str) -> bool | None:
        """None for an unknown job, else whether it is finished (after ``polls_before_done`` polls)."""
        with self.lock:
            if job not in self.jobs:
                return None
            self.jobs[job] += 1
            return self.jobs[job] > self.polls_before_done

    # ---- vendors: documented paths and shapes -----------------------------------------------
    # Each route first checks the request field by field against the vendor's documented request
    # (tests/vendor_requests.py): any violation is answered 400 and kept in ``violations``.

    def _checked(self, route: str, req: Request) -> tuple[Any, ...] | None:
        """None for a correct request; else the 400 answer (the violations are recorded)."""
        found = violations(self.vendor, route, req, self.key)
        with self.lock:
            self.seen.append((route, req))
            if found:
                self.violations.append((route, found))
        return (400, {"error": "request does not match the documented API", "violations": found}) if found else None

    def _deepgram(self, req: Request) -> tuple[Any, ...]:
        if req.method != "POST" or req.path != "/v1/listen":
            return 404, {"err_msg": "not found"}
        bad = self._checked("listen", req)
        if bad:
            return bad
        self._bill()
        alt = {"transcript": self.transcript_fn(req.body) if self.transcript_fn else self.transcript, "confidence": 0.97, "words": []}
        return 200, {
            "metadata": {"request_id": uuid.uuid4().hex, "duration": 1.0, "channels": 1},
            "results": {"channels": [{"alternatives": [alt]}]},
        }

    def _assemblyai(self, req: Request) -> tuple[Any, ...]:
        if req.method == "POST" and req.path == "/v2/upload":
            return self._checked("upload", req) or (200, {"upload_url": f"https://cdn.assemblyai.com/upload/{uuid.uuid4().hex}"})
        if req.method == "POST" and req.path == "/v2/transcript":
            bad = self._checked("transcript", req)
            if bad:
                return bad
            self._bill()
            return 200, {"id": self._job("aai-"), "status": "queued"}
        if req.method == "GET" and req.path.startswith("/v2/transcript/"):
            bad = self._checked("poll", req)
            if bad:
                return bad
            job = req.path.rsplit("/", 1)[1]
            state = self._poll(job)
            if state is None:
                return 404, {"error": "Transcript not found"}
            return 200, {"id": job, "status": "completed", "text": self.transcript} if state else {
                "id": job,
                "status": "processing",
                "text": None,
            }
        return 404, {"error": "not found"}

    def _speechmatics(self, req: Request) -> tuple[Any, ...]:
        if req.method == "POST" and req.path == "/v2/jobs":
            bad = self._checked("jobs", req)
            if bad:
                return bad
            self._bill()
            return 201, {"id": self._job("sm")}
        m = re.fullmatch(r"/v2/jobs/([^/]+)(/transcript)?", req.path)
        if req.method == "GET" and m:
            bad = self._checked("transcript" if m.group(2) else "job", req)
            if bad:
                return bad
            job = m.group(1)
            if m.group(2):
                if req.query.get("format") != ["txt"]:
                    return 400, {"error": "this fake serves format=txt"}
                return 200, self.transcript + "\n", "text/plain"
            state = self._poll(job)
            if state is None:
                return 404, {"code": 404, "error": "Job not found"}
            return 200, {"job": {"id": job, "status": "done" if state else "running", "duration": 1}}
        return 404, {"error": "not found"}

    def _elevenlabs(self, req: Request) -> tuple[Any, ...]:
        if req.method != "POST" or req.path != "/v1/speech-to-text":
            return 404, {"detail": "not found"}
        bad = self._checked("convert", req)
        if bad:
            return bad
        self._bill()
        return 200, {"language_code": "en", "language_probability": 0.99, "text": self.transcript, "words": []}

    def _gladia(self, req: Request) -> tuple[Any, ...]:
        if req.method == "POST" and req.path == "/v2/upload":
            bad = self._checked("upload", req)
            if bad:
                return bad
            fid = uuid.uuid4().hex
            return 200, {
                "audio_url": f"https://api.gladia.io/file/{fid}",
                "audio_metadata": {"id": fid, "filename": "audio.wav", "audio_duration": 1.0},
            }
        if req.method == "POST" and req.path == "/v2/pre-recorded":
            bad = self._checked("prerecorded", req)
            if bad:
                return bad
            self._bill()
            job = self._job("gl-")
            return 201, {"id": job, "result_url": f"https://api.gladia.io/v2/pre-recorded/{job}"}
        if req.method == "GET" and req.path.startswith("/v2/pre-recorded/"):
            bad = self._checked("poll", req)
            if bad:
                return bad
            job = req.path.rsplit("/", 1)[1]
            state = self._poll(job)
            if state is None:
                return 404, {"message": "not found"}
            if not state:
                return 200, {"id": job, "status": "processing"}
            return 200, {"id": job, "status": "done", "result": {"transcription": {"full_transcript": self.transcript, "utterances": []}}}
        return 404, {"message": "not found"}

    def _google(self, req: Request) -> tuple[Any, ...]:
        if req.method != "POST" or not re.fullmatch(r"/v2/projects/[^/]+/locations/[^/]+/recognizers/[^/:]+:recognize", req.path):
            return 404, {"error": {"code": 404, "status": "NOT_FOUND"}}
        bad = self._checked("recognize", req)
        if bad:
            return bad
        self._bill()
        return 200, {
            "results": [{"alternatives": [{"transcript": self.transcript, "confidence": 0.9}], "languageCode": "en-us"}],
            "metadata": {"totalBilledDuration": "1s"},
        }

    def _azure(self, req: Request) -> tuple[Any, ...]:
        if req.method != "POST" or req.path != "/speechtotext/transcriptions:transcribe":
            return 404, {"error": {"code": "404", "message": "Resource not found"}}
        bad = self._checked("transcribe", req)
        if bad:
            return bad
        self._bill()
        return 200, {
            "durationMilliseconds": 1000,
            "combinedPhrases": [{"text": self.transcript}],
            "phrases": [{"offset": 0, "duration": 1000, "text": self.transcript, "locale": "en-US", "confidence": 0.9}],
        }

    def _modulate(self, req: Request) -> tuple[Any, ...]:
        endpoint = req.path.removeprefix("/api/")
        if req.method != "POST" or endpoint not in MODULATE_ENDPOINTS:
            return 404, {"detail": "Not Found"}
        bad = self._checked("stt", req)
        if bad:
            return bad
        self._bill()
        if endpoint == "velma-2-stt-batch":
            return 200, {
                "text": self.transcript,
                "duration_ms": 1000,
                "utterances": [
                    {
                        "utterance_uuid": uuid.uuid4().hex,
                        "text": self.transcript,
                        "start_ms": 0,
                        "duration_ms": 1000,
                        "speaker": 1,
                        "language": "en",
                    }
                ],
            }
        return 200, {"text": self.transcript, "duration_ms": 1000}

    def _smallest(self, req: Request) -> tuple[Any, ...]:
        if req.method != "POST" or req.path != "/waves/v1/pulse/get_text":
            return 404, {"message": "Not Found"}
        bad = self._checked("get_text", req)
        if bad:
            return bad
        self._bill()
        return 200, {
            "status": "success",
            "transcription": self.transcript,
            "words": [],
            "utterances": [],
            "metadata": {"duration": 1.0, "fileSize": len(req.body)},
        }


def _openai_stt(self: FakeVendor, req: Request) -> tuple[Any, ...]:
    """OpenAI ``POST /v1/audio/transcriptions``: multipart ``model`` and ``file``; JSON ``{"text": ...}``."""
    if req.method != "POST" or req.path != "/v1/audio/transcriptions":
        return 404, {"error": {"message": "not found", "type": "invalid_request_error"}}
    bad = self._checked("transcriptions", req)
    if bad:
        return bad
    self._bill()
    return 200, {"text": self.transcript}


def _encoded(key: str, form: str) -> str:
    """The key as a server or proxy might echo it."""
    import base64
    from urllib.parse import quote, quote_plus

    forms = {
        "raw": key,
        "quote": quote(key, safe=""),
        "quote_plus": quote_plus(key),
        "b64-basic": "Basic " + base64.b64encode(f"apiuser:{key}".encode()).decode(),
        "b64-urlsafe": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
    }
    return forms[form]


def _trickle(h: BaseHTTPRequestHandler, seconds: float) -> None:
    """A 200 whose declared 4000-byte body arrives one byte every 0.25 s, for at most ``seconds``."""
    h.close_connection = True  # the body is never finished: this connection cannot carry another answer
    try:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", "4000")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.flush()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.25)
    except OSError:
        return  # the client hung up (what a deadline does)


def _huge(h: BaseHTTPRequestHandler, n: int, sized: bool) -> None:
    """A 200 streaming ``n`` bytes (with or without Content-Length) until done or the client hangs up."""
    h.close_connection = True  # the client hangs up before the end (or, unsized, the end is the close)
    try:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        if sized:
            h.send_header("Content-Length", str(n))
        h.send_header("Connection", "close")
        h.end_headers()
        block = b" " * (1 << 20)
        sent = 0
        while sent < n:
            part = block[: min(len(block), n - sent)]
            h.wfile.write(part)
            sent += len(part)
    except OSError:
        return


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made now with the openssl program (valid one day)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _judge_reply(fake: FakeVendor, first_audio_b64: str = "", prompt: str = "", clips_b64: list[str] | None = None) -> str:
    import base64

    if fake.reply_fn is not None:
        return str(fake.reply_fn(prompt, [base64.b64decode(c) for c in clips_b64 or [first_audio_b64]]))
    with fake.lock:
        size = len(base64.b64decode(first_audio_b64)) if first_audio_b64 else -1
        if size in fake.reply_by_size:
            return fake.reply_by_size[size]
        return fake.replies.pop(0) if fake.replies else '{"answer": "same"}'


def _gemini(self: FakeVendor, method: str, path: str, q: dict[str, list[str]], body: bytes, hd: dict[str, str]) -> tuple[Any, ...]:
    if method != "POST" or not re.fullmatch(r"/v1beta/models/[^/:]+:generateContent", path):
        return 404, {"error": {"code": 404, "status": "NOT_FOUND"}}
    req = json.loads(body)
    parts = (req.get("contents") or [{}])[0].get("parts") or []
    audio = [p for p in parts if str(p.get("inline_data", {}).get("mime_type", "")).startswith("audio/") and p["inline_data"].get("data")]
    if not audio or not any("text" in p for p in parts):
        return 400, {"error": {"code": 400, "message": "contents[0].parts needs text and inline audio", "status": "INVALID_ARGUMENT"}}
    self._bill()
    with self.lock:
        self.audio_parts.append(len(audio))
    prompt = "".join(str(p["text"]) for p in parts if "text" in p)
    reply = _judge_reply(self, audio[0]["inline_data"]["data"], prompt, [a["inline_data"]["data"] for a in audio])
    cand = {"content": {"role": "model", "parts": [{"text": reply}]}, "finishReason": "STOP", "index": 0}
    return 200, {
        "candidates": [cand],
        "usageMetadata": {"promptTokenCount": 100 * len(audio), "candidatesTokenCount": 7, "totalTokenCount": 100 * len(audio) + 7},
    }


def _openai(self: FakeVendor, method: str, path: str, q: dict[str, list[str]], body: bytes, hd: dict[str, str]) -> tuple[Any, ...]:
    if method != "POST" or path != "/v1/chat/completions":
        return 404, {"error": {"message": "not found", "type": "invalid_request_error"}}
    req = json.loads(body)
    content = (req.get("messages") or [{}])[0].get("content") or []
    audio = [
        c
        for c in content
        if c.get("type") == "input_audio" and c.get("input_audio", {}).get("format") == "wav" and c["input_audio"].get("data")
    ]
    if not req.get("model") or not audio:
        return 400, {"error": {"message": "model and input_audio content are required", "type": "invalid_request_error"}}
    self._bill()
    with self.lock:
        self.audio_parts.append(len(audio))
    prompt = "".join(str(c.get("text", "")) for c in content if c.get("type") == "text")
    message = {
        "role": "assistant",
        "content": _judge_reply(self, audio[0]["input_audio"]["data"], prompt, [a["input_audio"]["data"] for a in audio]),
        "refusal": None,
    }
    return 200, {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": req["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50 * len(audio), "completion_tokens": 5, "total_tokens": 50 * len(audio) + 5},
    }


FakeVendor._gemini = _gemini  # type: ignore[attr-defined]
FakeVendor._openai = _openai  # type: ignore[attr-defined]
FakeVendor._openai_stt = _openai_stt  # type: ignore[attr-defined]

#: backend registry name and model of each fake vendor, for building test registries
BACKENDS = {
    "deepgram": ("deepgram", "nova-3"),
    "assemblyai": ("assemblyai", "universal-3-pro"),
    "speechmatics": ("speechmatics", "enhanced"),
    "elevenlabs": ("elevenlabs", "scribe_v2"),
    "gladia": ("gladia", "solaria-1"),
    "google": ("google-stt-v2", "chirp_3"),
    "azure": ("azure-fast", "azure-speech"),
    "modulate": ("modulate", "velma-2-stt-batch-english-vfast"),
    "smallest": ("smallest", "pulse"),
}
KEY_ENV = {
    "deepgram": "DEEPGRAM_API_KEY",
    "assemblyai": "ASSEMBLYAI_API_KEY",
    "speechmatics": "SPEECHMATICS_API_KEY",
    "elevenlabs": "ELEVENLABS_API_KEY",
    "gladia": "GLADIA_API_KEY",
    "google": "GOOGLE_API_KEY",
    "azure": "AZURE_SPEECH_KEY",
    "modulate": "MODULATE_API_KEY",
    "smallest": "SMALLEST_API_KEY",
    OPENAI_STT: "OPENAI_API_KEY",
}


def options_for(fake: FakeVendor, cache_dir: str | None = None, **extra: Any) -> dict[str, Any]:
    """Backend options that point one backend at its fake (fast polling and backoff)."""
    backend, model = {**BACKENDS, OPENAI_STT: ("openai-compatible", "whisper-1")}[fake.vendor]
    opts: dict[str, Any] = {
        "model": model,
        "base_url": fake.base_url,
        "poll_interval_s": 0.01,
        "backoff_s": 0.01,
        "max_retries": 3,
        "timeout_s": 5.0,
    }
    if fake.vendor == "google":
        opts["project"] = "test-project"
    if fake.ca_file:
        opts["ca_file"] = fake.ca_file
    if cache_dir is not None:
        opts["cache_dir"] = cache_dir
    return {**opts, **extra}
