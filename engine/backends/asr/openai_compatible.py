"""OpenAI-compatible HTTP backend: POST each clip to ``{base_url}/v1/audio/transcriptions``.

Works with OpenAI and with self-hosted servers that speak the same API (vLLM, speaches,
LocalAI...). Standard library only. The API key is read from an environment variable whose
*name* is an option, at request time, and is never stored in options, ``info()`` or ``repr``.
Transient failures (429, 5xx, connection errors, timeouts) are retried with exponential backoff.
Redirects are followed only within the endpoint's origin (scheme, host and port): urllib's
default handler re-sends every request header, ``Authorization`` included, to wherever a 3xx
points, so a redirecting server or proxy could collect the key. A redirect to another origin is
refused with an error that names both origins; the key is never sent there.
"""

from __future__ import annotations

import io
import json
import logging
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import wave
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import ASRBackend, BackendInfo
from engine.backends.bundled import check_audio_batch, check_options
from engine.data import SAMPLE_RATE
from engine.errors import AuditError, BackendUnavailable, ConfigError

log = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_MAX_RETRY_AFTER_S = 60.0

_DEFAULTS: dict[str, Any] = {
    "model": None,  # server-side model name, e.g. 'whisper-1' or 'openai/whisper-large-v3'
    "base_url": "https://api.openai.com",
    "api_key_env": "OPENAI_API_KEY",  # NAME of the environment variable holding the key ('' = no key)
    "language": None,
    "prompt": None,
    "temperature": None,
    "timeout_s": 120.0,
    "max_retries": 4,
    "backoff_s": 1.0,  # first retry delay; doubles each attempt
    "verify_tls": True,
    "ca_file": None,  # extra CA bundle for private endpoints
    "batch_size": 8,  # clips sent concurrently
}


class TranscriptionRequestError(AuditError):
    """The endpoint refused a request or kept failing after the allowed retries."""


class CrossOriginRedirectError(TranscriptionRequestError):
    """The endpoint redirected to another origin; following it would hand the API key to that origin."""


def origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of a URL, default ports made explicit (https://h == https://h:443)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to the request's own origin; refuse any other before it is requested.

    The key travels as an unredirected header, so even a redirect this handler lets through
    carries it only because it is re-added here for the same origin.
    """

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> urllib.request.Request | None:
        if origin(newurl) != origin(req.full_url):
            fp.close()
            raise CrossOriginRedirectError(
                f"{req.full_url} redirected (HTTP {code}) to another origin, {newurl.split('?')[0]}; refused: the API key is "
                "never sent across origins. Set base_url to the endpoint that answers directly"
            )
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            for key, value in req.unredirected_hdrs.items():
                if key.lower() == "authorization":
                    new.add_unredirected_header(key, value)
        return new


def wav_bytes(audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> bytes:
    """16-bit PCM mono WAV, the most widely accepted upload format."""
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def _multipart(fields: dict[str, str], file_field: str, filename: str, payload: bytes) -> tuple[bytes, str]:
    boundary = f"----audit-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for key, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode())
    parts.append(
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{filename}"\r\nContent-Type: audio/wav\r\n\r\n'
        ).encode()
        + payload
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class OpenAICompatibleBackend(ASRBackend):
    """Remote transcription over the OpenAI audio API; the key never leaves its environment variable."""

    name = "openai-compatible"

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """An API key in the named environment variable (reachability is not checked)."""
        base_url = options.get("base_url", _DEFAULTS["base_url"])
        key_env = options.get("api_key_env", _DEFAULTS["api_key_env"])
        if key_env and not os.environ.get(str(key_env)):
            return Availability(False, f"set the environment variable {key_env} (API key for {base_url})")
        return Availability(True, f"HTTP endpoint {base_url} (reachability not checked)", checked=False)

    def __init__(self, **options: Any) -> None:
        if "api_key" in options:
            raise ConfigError(
                f"{self.name}: option 'api_key' is not accepted (keys must not sit in recipes or results); "
                "put the key in an environment variable and name that variable in 'api_key_env'"
            )
        check_options(self.name, options, _DEFAULTS)
        merged = {**_DEFAULTS, **options}
        if not merged["model"]:
            raise ConfigError(f"{self.name} backend needs option 'model' (the server's model name, e.g. whisper-1)")
        base_url = str(merged["base_url"] or "")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{self.name}: 'base_url' must start with http:// or https://, got {base_url!r}")
        for key in ("max_retries",):
            if not isinstance(merged[key], int) or isinstance(merged[key], bool) or merged[key] < 0:
                raise ConfigError(f"{self.name}: option '{key}' must be a non-negative integer")
        if not isinstance(merged["batch_size"], int) or merged["batch_size"] < 1:
            raise ConfigError(f"{self.name}: option 'batch_size' must be a positive integer")
        if float(merged["timeout_s"]) <= 0 or float(merged["backoff_s"]) < 0:
            raise ConfigError(f"{self.name}: 'timeout_s' must be > 0 and 'backoff_s' >= 0")
        super().__init__(**merged)
        self._ssl: ssl.SSLContext | None = None
        self._opener: urllib.request.OpenerDirector | None = None
        self._loaded = False

    @property
    def endpoint(self) -> str:
        """``{base_url}/v1/audio/transcriptions`` (no doubled ``/v1`` when base_url already ends in it)."""
        base = str(self.options["base_url"]).rstrip("/")
        return f"{base}/audio/transcriptions" if base.endswith("/v1") else f"{base}/v1/audio/transcriptions"

    def load(self) -> None:
        """Prepare TLS; no network call (the first batch reveals an unreachable endpoint)."""
        if self.options["verify_tls"]:
            self._ssl = ssl.create_default_context(cafile=self.options["ca_file"] or None)
        else:
            log.warning("%s: TLS certificate verification is OFF for %s", self.name, self.options["base_url"])
            self._ssl = ssl._create_unverified_context()
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=self._ssl), _SameOriginRedirects())
        key_env = self.options["api_key_env"]
        if key_env and not os.environ.get(str(key_env)):
            log.warning("%s: environment variable %s is not set; sending no API key", self.name, key_env)
        self._loaded = True

    def _headers(self, content_type: str) -> dict[str, str]:
        return {"Content-Type": content_type, "Accept": "application/json"}

    def _request(self, body: bytes, content_type: str) -> urllib.request.Request:
        """The POST, with the key as an unredirected header (never copied onto a redirect by urllib)."""
        request = urllib.request.Request(self.endpoint, data=body, headers=self._headers(content_type), method="POST")
        key_env = self.options["api_key_env"]
        key = os.environ.get(str(key_env)) if key_env else None
        if key:
            request.add_unredirected_header("Authorization", f"Bearer {key}")
        return request

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """One request per clip, up to ``batch_size`` in flight at once; order is preserved."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if not self._loaded:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        workers = min(int(self.options["batch_size"]), max(1, len(clips)))
        if workers == 1:
            return [self._transcribe_one(c) for c in clips]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(self._transcribe_one, clips))

    def _transcribe_one(self, clip: np.ndarray) -> str:
        fields = {"model": str(self.options["model"]), "response_format": "json"}
        for key in ("language", "prompt", "temperature"):
            if self.options[key] is not None:
                fields[key] = str(self.options[key])
        body, content_type = _multipart(fields, "file", "audio.wav", wav_bytes(clip))
        payload = self._post(body, content_type)
        try:
            data = json.loads(payload)
        except ValueError as exc:
            raise TranscriptionRequestError(f"{self.endpoint} returned non-JSON: {self._redact(payload[:4096].decode('utf-8', 'replace'))[:200]!r}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise TranscriptionRequestError(f"{self.endpoint} returned JSON without a 'text' string: {self._redact(str(data))[:200]}")
        return data["text"].strip()

    def _redact(self, text: str) -> str:
        """Server text with the API key removed (a server or proxy may echo request headers)."""
        key_env = self.options["api_key_env"]
        key = os.environ.get(str(key_env)) if key_env else None
        return text.replace(key, "[redacted]") if key else text

    def _post(self, body: bytes, content_type: str) -> bytes:
        retries = int(self.options["max_retries"])
        backoff = float(self.options["backoff_s"])
        last_problem = ""
        for attempt in range(retries + 1):
            request = self._request(body, content_type)
            retry_after: float | None = None
            opener = self._opener or urllib.request.build_opener(urllib.request.HTTPSHandler(context=self._ssl), _SameOriginRedirects())
            try:
                with opener.open(request, timeout=float(self.options["timeout_s"])) as resp:
                    return resp.read()
            except urllib.error.HTTPError as exc:
                detail = self._redact(exc.read(4096).decode("utf-8", "replace"))[:300]
                if exc.code in (401, 403):
                    raise BackendUnavailable(
                        f"{self.endpoint} refused the credentials (HTTP {exc.code}); put a valid key in the "
                        f"environment variable {self.options['api_key_env'] or '(none configured: set api_key_env)'}"
                    ) from None
                if exc.code not in _RETRY_STATUS:
                    raise TranscriptionRequestError(f"{self.endpoint}: HTTP {exc.code}: {detail}") from None
                last_problem = f"HTTP {exc.code}: {detail}"
                retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                if isinstance(reason, ssl.SSLCertVerificationError):
                    raise BackendUnavailable(
                        f"TLS verification failed for {self.endpoint} ({reason}); pass 'ca_file' for a private CA "
                        "(or verify_tls: false for a trusted test server)"
                    ) from None
                last_problem = f"{type(exc).__name__}: {reason}"
            if attempt < retries:
                delay = retry_after if retry_after is not None else backoff * (2**attempt)
                log.info("%s: %s; retry %d/%d in %.2fs", self.name, last_problem, attempt + 1, retries, delay)
                time.sleep(delay)
        raise TranscriptionRequestError(f"{self.endpoint} failed after {retries + 1} attempts: {last_problem}")

    def info(self) -> BackendInfo:
        """Endpoint, model and request settings; never the key."""
        return BackendInfo(
            backend=self.name,
            model_id=str(self.options["model"]),
            device="remote",
            dtype="unknown",
            batch_size=int(self.options["batch_size"]),
            extra={
                "endpoint": self.endpoint,
                "api_key_env": self.options["api_key_env"],
                "verify_tls": bool(self.options["verify_tls"]),
                "max_retries": self.options["max_retries"],
                "timeout_s": self.options["timeout_s"],
                "language": self.options["language"],
                "upload_format": "wav pcm_s16le 16 kHz",
            },
        )

    def close(self) -> None:
        """Nothing persistent to release (one connection per request)."""
        self._loaded = False
        self._opener = None

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleBackend(model={self.options['model']!r}, endpoint={self.endpoint!r}, "
            f"api_key_env={self.options['api_key_env']!r})"
        )


def _retry_after(value: str | None) -> float | None:
    """Seconds from a numeric Retry-After header, capped; dates and junk are ignored."""
    if not value:
        return None
    try:
        return min(max(float(value), 0.0), _MAX_RETRY_AFTER_S)
    except ValueError:
        return None
