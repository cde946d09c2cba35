"""What every hosted ASR backend shares: options, credentials, the response cache and cost counters.

A vendor backend only says how to turn one WAV payload into text (``_recognize``) and which
headers carry its key. This class does the rest: option checks, the API key read from an
environment variable at request time (never stored in options, ``info()``, rows or ``repr``),
the shared HTTP client (``http.py``), the response cache (``cache.py``), and the usage figures
that reach ``summary.json`` (audio seconds sent, billable calls, cache hits, estimated cost,
API RTFx = audio seconds over request wall time, network included).
"""

from __future__ import annotations

import io
import logging
import math
import os
import ssl
import threading
import time
import wave
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import ASRBackend, AsrCapabilities, BackendInfo
from engine.backends.bundled import audit_cache_dir, check_audio_batch, check_options
from engine.backends.hosted.cache import ResponseCache, audio_digest, options_digest
from engine.backends.hosted.http import DEFAULT_MAX_RESPONSE_BYTES, HostedClient, check_transport, checked_origin
from engine.backends.hosted.scrub import clean_key, register_secret_env
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError, HostedRequestError

log = logging.getLogger(__name__)

#: Options every hosted backend accepts. Those in TRANSPORT change how a request travels, not
#: what it asks, so they are left out of the cache key.
COMMON_DEFAULTS: dict[str, Any] = {
    "model": None,
    "base_url": None,  # the vendor's public endpoint unless set (tests point it at a local fake)
    "api_key_env": None,  # NAME of the environment variable holding the key
    "language": None,
    "timeout_s": 120.0,  # whole-request deadline of one attempt (connect, upload, answer)
    "max_response_bytes": DEFAULT_MAX_RESPONSE_BYTES,  # larger answers are refused, never read whole
    "max_retries": 5,
    "backoff_s": 1.0,
    "max_backoff_s": 60.0,
    "max_concurrency": 4,  # requests in flight per vendor and base_url, in this process
    "requests_per_minute": None,
    "poll_interval_s": 1.0,  # job-style APIs (AssemblyAI, Speechmatics, Gladia)
    "poll_timeout_s": 900.0,
    "price_per_audio_hour_usd": None,  # list price used for the cost estimate
    "price_note": None,  # where and when the price was read
    "cache": True,
    "cache_dir": None,  # default: $AUDIT_CACHE/hosted
    "verify_tls": True,
    "ca_file": None,
}
TRANSPORT = frozenset(
    {
        "api_key_env",
        "timeout_s",
        "max_response_bytes",
        "max_retries",
        "backoff_s",
        "max_backoff_s",
        "max_concurrency",
        "requests_per_minute",
        "poll_interval_s",
        "poll_timeout_s",
        "price_per_audio_hour_usd",
        "price_note",
        "cache",
        "cache_dir",
        "verify_tls",
        "ca_file",
    }
)
USAGE_COUNTERS = (
    "clips",
    "billable_calls",
    "cache_hits",
    "http_requests",
    "retries",
    "failed_calls",
    "audio_s_billed",
    "audio_s_cached",
    "request_wall_s",
)


def _finite(value: Any) -> bool:
    """A real number, not a bool, not NaN or infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def wav_bytes(audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> bytes:
    """16-bit PCM mono WAV: accepted by every vendor, and a stable payload to hash for the cache."""
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def usage_summary(counters: Mapping[str, float], price: float | None) -> dict[str, Any]:
    """Counters plus the derived figures: audio hours, estimated cost and API RTFx."""
    out: dict[str, Any] = {k: (round(float(counters.get(k, 0)), 3) if "_s" in k else int(counters.get(k, 0))) for k in USAGE_COUNTERS}
    billed_h = float(counters.get("audio_s_billed", 0.0)) / 3600.0
    out["audio_hours_billed"] = round(billed_h, 6)
    out["price_per_audio_hour_usd"] = price
    out["estimated_cost_usd"] = None if price is None else round(billed_h * float(price), 6)
    served = float(counters.get("audio_s_billed", 0.0)) + float(counters.get("audio_s_cached", 0.0))
    wall = float(counters.get("request_wall_s", 0.0))
    out["api_rtfx"] = round(served / wall, 3) if wall > 0 else None
    return out


def combine_usage(previous: Mapping[str, Any] | None, current: Mapping[str, Any]) -> dict[str, Any]:
    """Usage of earlier sessions of the same run plus this session's (a resumed run keeps counting)."""
    if not previous:
        return dict(current)
    summed = {k: float(previous.get(k) or 0) + float(current.get(k) or 0) for k in USAGE_COUNTERS}
    return usage_summary(summed, current.get("price_per_audio_hour_usd"))


class HostedASRBackend(ASRBackend):
    """One clip per API call; answers cached on disk; no warm-up call (it would be billed)."""

    name = "hosted"
    capabilities = AsrCapabilities(hosted=True, families=("hosted",))
    vendor: ClassVar[str] = "hosted"
    default_base_url: ClassVar[str] = ""
    default_key_env: ClassVar[str] = ""
    #: vendor-specific options and their defaults (part of the cache key unless in TRANSPORT)
    vendor_defaults: ClassVar[dict[str, Any]] = {}
    #: ``api_key_env: ""`` means "send no key" (self-hosted servers); otherwise a key is required
    key_optional: ClassVar[bool] = False
    #: vendor options that must be true or false, and those that must be one of a set of values
    #: (checked when the backend is built: a string "false" never counts as true)
    bool_options: ClassVar[tuple[str, ...]] = ()
    choice_options: ClassVar[dict[str, tuple[Any, ...]]] = {}

    @classmethod
    def _merged(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        return {**COMMON_DEFAULTS, **cls.vendor_defaults, **dict(options)}

    @classmethod
    def key_env_name(cls, options: Mapping[str, Any]) -> str:
        if cls.key_optional and options.get("api_key_env") == "":
            return ""
        return str(options.get("api_key_env") or cls.default_key_env)

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """Runnable when the API key's environment variable is set (the endpoint is not contacted)."""
        env = cls.key_env_name(options)
        if not env and cls.key_optional:
            base = options.get("base_url") or cls.default_base_url
            return Availability(True, f"{cls.vendor} API at {base}, no key (api_key_env is empty; reachability not checked)", checked=False)
        if not clean_key(os.environ.get(env)):
            return Availability(False, f"set the environment variable {env} (API key for {cls.vendor})")
        base = options.get("base_url") or cls.default_base_url
        return Availability(True, f"{cls.vendor} API at {base}, key in ${env} (reachability not checked)", checked=False)

    def __init__(self, **options: Any) -> None:
        if "api_key" in options or "key" in options:
            raise ConfigError(
                f"{self.name}: an API key option is not accepted (keys must not sit in recipes or results); "
                f"put the key in an environment variable and name it in 'api_key_env' (default {self.default_key_env})"
            )
        check_options(self.name, options, [*COMMON_DEFAULTS, *self.vendor_defaults])
        merged = self._merged(options)
        check_transport(self.name, merged)  # the typed option layer (http.TRANSPORT_FIELDS): no NaN, no infinity, no rate of 0
        if not merged["model"]:
            raise ConfigError(f"{self.name} backend needs option 'model' (the vendor's model name)")
        merged["base_url"] = str(merged["base_url"] or self.resolve_base_url(merged)).rstrip("/")
        if not merged["base_url"].startswith(("http://", "https://")):
            raise ConfigError(f"{self.name}: 'base_url' must start with http:// or https://, got {merged['base_url']!r}")
        try:
            checked_origin(merged["base_url"], f"{self.name}: 'base_url'")
        except HostedRequestError as exc:
            raise ConfigError(str(exc)) from None
        merged["api_key_env"] = self.key_env_name(merged)
        register_secret_env(merged["api_key_env"])  # its value is scrubbed from every artefact and log line
        for key in ("max_retries",):
            if not isinstance(merged[key], int) or isinstance(merged[key], bool) or merged[key] < 0:
                raise ConfigError(f"{self.name}: option '{key}' must be a non-negative integer, got {merged[key]!r}")
        if not isinstance(merged["max_concurrency"], int) or isinstance(merged["max_concurrency"], bool) or merged["max_concurrency"] < 1:
            raise ConfigError(f"{self.name}: option 'max_concurrency' must be a positive integer, got {merged['max_concurrency']!r}")
        for key in ("timeout_s", "poll_interval_s", "poll_timeout_s"):
            if not _finite(merged[key]) or merged[key] <= 0:
                raise ConfigError(f"{self.name}: option '{key}' must be a positive finite number, got {merged[key]!r}")
        for key in ("backoff_s", "max_backoff_s", "price_per_audio_hour_usd", "requests_per_minute"):
            value = merged[key]
            if value is not None and (not _finite(value) or value < 0):
                raise ConfigError(f"{self.name}: option '{key}' must be a non-negative finite number or null, got {value!r}")
        for key in self.bool_options:
            if not isinstance(merged[key], bool):
                raise ConfigError(f"{self.name}: option '{key}' must be true or false, got {merged[key]!r}")
        for key, allowed in self.choice_options.items():
            if merged[key] not in allowed:
                raise ConfigError(f"{self.name}: option '{key}' must be one of {', '.join(map(repr, allowed))}, got {merged[key]!r}")
        cap = merged["max_response_bytes"]
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1024:
            raise ConfigError(f"{self.name}: option 'max_response_bytes' must be an integer of at least 1024 (bytes), got {cap!r}")
        super().__init__(**merged)
        self.client: HostedClient | None = None
        self.cache: ResponseCache | None = None
        self._counters: dict[str, float] = dict.fromkeys(USAGE_COUNTERS, 0.0)
        self._lock = threading.Lock()
        self._fatal: Exception | None = None

    # ---- what a vendor supplies -------------------------------------------------------------

    def resolve_base_url(self, options: Mapping[str, Any]) -> str:
        """The public endpoint (vendors with regional hosts build it from options)."""
        return self.default_base_url

    @abstractmethod
    def auth_headers(self, key: str) -> dict[str, str]:
        """The header(s) that carry the key."""

    @abstractmethod
    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        """Send one clip; return (text, raw answer). Counts one billable call per clip."""

    # ---- shared machinery --------------------------------------------------------------------

    def _key(self) -> str:
        """The key, stripped (a CRLF .env file leaves a CR that no header may carry)."""
        env = str(self.options["api_key_env"])
        return clean_key(os.environ.get(env)) if env else ""

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return self.auth_headers(key) if key else {}

    def load(self) -> None:
        """Build the client and open the cache; no network call (the first clip reveals a bad key)."""
        if not self._key() and not (self.key_optional and not self.options["api_key_env"]):
            raise BackendUnavailable(f"{self.name}: set the environment variable {self.options['api_key_env']} (API key for {self.vendor})")
        ctx: ssl.SSLContext | None
        if self.options["verify_tls"]:
            ctx = ssl.create_default_context(cafile=self.options["ca_file"] or None)
        else:
            log.warning("%s: TLS certificate verification is OFF for %s", self.name, self.options["base_url"])
            ctx = ssl._create_unverified_context()
        o = self.options
        self.client = HostedClient(
            self.vendor,
            o["base_url"],
            self._headers,
            lambda: [self._key()],
            timeout_s=float(o["timeout_s"]),
            max_retries=int(o["max_retries"]),
            backoff_s=float(o["backoff_s"]),
            max_backoff_s=float(o["max_backoff_s"]),
            max_concurrency=int(o["max_concurrency"]),
            requests_per_minute=o["requests_per_minute"],
            ssl_context=ctx,
            key_env=str(o["api_key_env"]),
            max_response_bytes=int(o["max_response_bytes"]),
        )
        if o["cache"]:
            root = Path(o["cache_dir"]).expanduser() if o["cache_dir"] else audit_cache_dir() / "hosted"
            self.cache = ResponseCache(root, self.name)

    def warmup(self) -> None:
        """Nothing: a warm-up request would be billed and says nothing about the vendor's speed."""

    def request_options(self) -> dict[str, Any]:
        """The options that change the answer (the cache key's options part)."""
        return {k: v for k, v in self.options.items() if k not in TRANSPORT}

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """One request per clip, ``max_concurrency`` in flight; order kept; cached clips cost nothing."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self.client is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        workers = min(int(self.options["max_concurrency"]), max(1, len(clips)))
        if workers == 1:
            return [self._one(c) for c in clips]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"audit-{self.vendor}") as pool:
            return list(pool.map(self._one, clips))

    def _one(self, clip: np.ndarray) -> str:
        if self._fatal is not None:  # a refused key or an empty account fails every later clip at once
            raise self._fatal
        assert self.client is not None
        payload = wav_bytes(clip)
        duration = len(clip) / SAMPLE_RATE
        key = None
        ident = {
            "backend": self.name,
            "model": str(self.options["model"]),
            "options_digest": options_digest(self.request_options()),
            "audio_sha256": audio_digest(payload),
        }
        if self.cache is not None:
            key = self.cache.key(ident["model"], ident["options_digest"], ident["audio_sha256"])
            hit = self.cache.get(key, expect=ident)
            if hit is not None:
                self._count(clips=1, cache_hits=1, audio_s_cached=duration, request_wall_s=float(hit.get("request_s") or 0.0))
                return str(hit["text"])
        t0 = time.perf_counter()
        try:
            text, raw = self._recognize(self.client, payload, duration)
        except BackendUnavailable as exc:  # refused key, empty account, TLS that cannot verify
            self._fatal = exc
            self._count(failed_calls=1)
            raise
        except Exception:
            self._count(failed_calls=1)
            raise
        wall = time.perf_counter() - t0
        self._count(clips=1, billable_calls=1, audio_s_billed=duration, request_wall_s=wall)
        if self.cache is not None and key is not None:
            self.cache.put(key, {"text": text, "response": raw, "audio_s": duration, "request_s": wall, **ident})
        return text

    def _count(self, **inc: float) -> None:
        with self._lock:
            for k, v in inc.items():
                self._counters[k] += v

    def usage(self) -> dict[str, Any]:
        """This process's usage figures (counters, audio hours, estimated cost, API RTFx)."""
        with self._lock:
            counters = dict(self._counters)
        if self.client is not None:
            counters["http_requests"] = self.client.http_requests
            counters["retries"] = self.client.retries
        return usage_summary(counters, self.options["price_per_audio_hour_usd"])

    def info(self) -> BackendInfo:
        """Endpoint, model, request settings, price and usage; never the key."""
        o = self.options
        return BackendInfo(
            backend=self.name,
            model_id=str(o["model"]),
            device="remote",
            dtype="unknown",
            batch_size=int(o["max_concurrency"]),
            extra={
                "vendor": self.vendor,
                "endpoint": o["base_url"],
                "api_key_env": o["api_key_env"],
                "request_options": self.request_options(),
                "max_concurrency": o["max_concurrency"],
                "requests_per_minute": o["requests_per_minute"],
                "max_retries": o["max_retries"],
                "timeout_s": o["timeout_s"],
                "max_response_bytes": o["max_response_bytes"],
                "verify_tls": bool(o["verify_tls"]),
                "price_note": o["price_note"],
                "upload_format": "wav pcm_s16le 16 kHz mono",
                "rtfx_definition": "api_rtfx = audio seconds / request wall time (network, upload, queue and polling included)",
                "usage": self.usage(),
            },
        )

    def close(self) -> None:
        self.client = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.options['model']!r}, base_url={self.options['base_url']!r}, "
            f"api_key_env={self.options['api_key_env']!r})"
        )

    # ---- helpers for vendors ------------------------------------------------------------------

    def poll(self, client: HostedClient, path: str, done: Any, what: str) -> Any:
        """GET ``path`` until ``done(json)`` returns non-None (or raises); bounded by poll_timeout_s."""
        deadline = time.monotonic() + float(self.options["poll_timeout_s"])
        interval = float(self.options["poll_interval_s"])
        while True:
            data = client.request("GET", path).json(client.redact)
            result = done(data)
            if result is not None:
                return result
            if time.monotonic() > deadline:
                from engine.errors import HostedRequestError

                raise HostedRequestError(f"{self.vendor}: {what} not finished after {self.options['poll_timeout_s']} s (poll_timeout_s)")
            time.sleep(interval)
