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
import os
import ssl
import threading
import time
import wave
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import ASRBackend, AsrCapabilities, BackendInfo, BackendOptions
from engine.backends.bundled import audit_cache_dir, check_audio_batch
from engine.backends.hosted.cache import ResponseCache, audio_digest, options_digest
from engine.backends.hosted.http import HostedClient, checked_origin, transport_option
from engine.backends.hosted.scrub import clean_key, register_secret_env
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError, HostedRequestError
from engine.options import option

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostedOptions(BackendOptions):
    """What every hosted ASR backend takes: the model, the endpoint and its key, limits, the response cache and the price.

    A vendor's own options (``params`` and the request fields it models) extend this record.
    Those in :data:`TRANSPORT` change how a request travels, not what it asks, so they are left out of
    the response cache's key; every other option is part of it, as written.
    """

    model: str = option(doc="the vendor's model name (Speechmatics: the operating point; Modulate: the endpoint)")
    base_url: str | None = option(None, "the API's address; null: the vendor's public endpoint")
    api_key_env: str | None = option(None, "NAME of the environment variable holding the key; null: the vendor's usual one")
    language: str | None = option(None, "language code sent with each request; null: the vendor's default as the backend sends it")
    timeout_s: float = transport_option("timeout_s")
    max_response_bytes: int = transport_option("max_response_bytes")
    max_retries: int = transport_option("max_retries")
    backoff_s: float = transport_option("backoff_s")
    max_backoff_s: float = transport_option("max_backoff_s")
    max_concurrency: int = transport_option("max_concurrency")
    requests_per_minute: float | None = transport_option("requests_per_minute")
    poll_interval_s: float = option(1.0, "seconds between polls of a job-style API (AssemblyAI, Speechmatics, Gladia)", gt=0)
    poll_timeout_s: float = option(900.0, "seconds a job-style API may take for one clip", gt=0)
    price_per_audio_hour_usd: float | None = option(None, "list price per audio hour for the cost estimate; null: no estimate", ge=0)
    price_note: str | None = option(None, "where and when the price was read")
    cache: bool = option(True, "keep answers on disk so a repeated or resumed run pays nothing")
    cache_dir: str | None = option(None, "the response cache's folder; null: $AUDIT_CACHE/hosted")
    verify_tls: bool = option(True, "verify the server's TLS certificate")
    ca_file: str | None = option(None, "CA bundle to verify it with; null: the system's")

    def validate(self, where: str) -> None:
        if not self.model:
            raise ConfigError(f"{self.key_path(where, 'model')}: expected the vendor's model name, got an empty string")


def params_option() -> Any:
    """The ``params`` option every vendor takes (declared last in each vendor's record)."""
    return option(None, "extra request fields the vendor documents, sent as given (part of the cache key)")


@dataclass(frozen=True)
class VendorOptions(HostedOptions):
    """A hosted vendor's options: the common ones and ``params`` (extra request fields)."""

    params: dict[str, Any] | None = params_option()


#: Options of :class:`HostedOptions` that change how a request travels, not what it asks (left out of the cache key).
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
    #: the vendor's options record: the common options, the vendor's request fields and ``params``
    OPTIONS: ClassVar[type[BackendOptions] | None] = VendorOptions
    options: HostedOptions  # the vendor's record, with base_url and api_key_env resolved
    #: ``api_key_env: ""`` means "send no key" (self-hosted servers); otherwise a key is required
    key_optional: ClassVar[bool] = False

    @classmethod
    def key_env_name(cls, options: HostedOptions) -> str:
        if cls.key_optional and options.api_key_env == "":
            return ""
        return options.api_key_env or cls.default_key_env

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """Runnable when the API key's environment variable is set (the endpoint is not contacted)."""
        o = cls.parse_options(options)
        env = cls.key_env_name(o)
        base = o.base_url or cls.default_base_url
        if not env and cls.key_optional:
            return Availability(True, f"{cls.vendor} API at {base}, no key (api_key_env is empty; reachability not checked)", checked=False)
        if not clean_key(os.environ.get(env)):
            return Availability(False, f"set the environment variable {env} (API key for {cls.vendor})")
        return Availability(True, f"{cls.vendor} API at {base}, key in ${env} (reachability not checked)", checked=False)

    def __init__(self, **options: Any) -> None:
        if "api_key" in options or "key" in options:
            raise ConfigError(
                f"{self.name}: an API key option is not accepted (keys must not sit in recipes or results); "
                f"put the key in an environment variable and name it in 'api_key_env' (default {self.default_key_env})"
            )
        super().__init__(**options)  # the vendor's record: unknown keys, types, ranges, NaN at any depth (engine/options.py)
        o = self.options
        base_url = str(o.base_url or self.resolve_base_url(o)).rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{self.name}: 'base_url' must start with http:// or https://, got {base_url!r}")
        try:
            checked_origin(base_url, f"{self.name}: 'base_url'")
        except HostedRequestError as exc:
            raise ConfigError(str(exc)) from None
        key_env = self.key_env_name(o)
        register_secret_env(key_env)  # its value is scrubbed from every artefact and log line
        self.options = o.replace(base_url=base_url, api_key_env=key_env)
        self.client: HostedClient | None = None
        self.cache: ResponseCache | None = None
        self._counters: dict[str, float] = dict.fromkeys(USAGE_COUNTERS, 0.0)
        self._lock = threading.Lock()
        self._fatal: Exception | None = None

    # ---- what a vendor supplies -------------------------------------------------------------

    def resolve_base_url(self, options: Any) -> str:
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
        env = self.options.api_key_env
        return clean_key(os.environ.get(env)) if env else ""

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return self.auth_headers(key) if key else {}

    def load(self) -> None:
        """Build the client and open the cache; no network call (the first clip reveals a bad key)."""
        o = self.options
        if not self._key() and not (self.key_optional and not o.api_key_env):
            raise BackendUnavailable(f"{self.name}: set the environment variable {o.api_key_env} (API key for {self.vendor})")
        ctx: ssl.SSLContext | None
        if o.verify_tls:
            ctx = ssl.create_default_context(cafile=o.ca_file or None)
        else:
            log.warning("%s: TLS certificate verification is OFF for %s", self.name, o.base_url)
            ctx = ssl._create_unverified_context()
        self.client = HostedClient(
            self.vendor,
            o.base_url or "",  # resolved in __init__
            self._headers,
            lambda: [self._key()],
            timeout_s=o.timeout_s,
            max_retries=o.max_retries,
            backoff_s=o.backoff_s,
            max_backoff_s=o.max_backoff_s,
            max_concurrency=o.max_concurrency,
            requests_per_minute=o.requests_per_minute,
            ssl_context=ctx,
            key_env=o.api_key_env or "",
            max_response_bytes=o.max_response_bytes,
        )
        if o.cache:
            root = Path(o.cache_dir).expanduser() if o.cache_dir else audit_cache_dir() / "hosted"
            self.cache = ResponseCache(root, self.name)

    def warmup(self) -> None:
        """Nothing: a warm-up request would be billed and says nothing about the vendor's speed."""

    def request_options(self) -> dict[str, Any]:
        """The options that change the answer (the cache key's options part), as written (a list stays a list)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.options.as_dict().items() if k not in TRANSPORT}

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """One request per clip, ``max_concurrency`` in flight; order kept; cached clips cost nothing."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self.client is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        workers = min(self.options.max_concurrency, max(1, len(clips)))
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
            "model": self.options.model,
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
        return usage_summary(counters, self.options.price_per_audio_hour_usd)

    def info(self) -> BackendInfo:
        """Endpoint, model, request settings, price and usage; never the key."""
        o = self.options
        return BackendInfo(
            backend=self.name,
            model_id=o.model,
            device="remote",
            dtype="unknown",
            batch_size=o.max_concurrency,
            extra={
                "vendor": self.vendor,
                "endpoint": o.base_url,
                "api_key_env": o.api_key_env,
                "request_options": self.request_options(),
                "max_concurrency": o.max_concurrency,
                "requests_per_minute": o.requests_per_minute,
                "max_retries": o.max_retries,
                "timeout_s": o.timeout_s,
                "max_response_bytes": o.max_response_bytes,
                "verify_tls": o.verify_tls,
                "price_note": o.price_note,
                "upload_format": "wav pcm_s16le 16 kHz mono",
                "rtfx_definition": "api_rtfx = audio seconds / request wall time (network, upload, queue and polling included)",
                "usage": self.usage(),
            },
        )

    def close(self) -> None:
        self.client = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.options.model!r}, base_url={self.options.base_url!r}, "
            f"api_key_env={self.options.api_key_env!r})"
        )

    # ---- helpers for vendors ------------------------------------------------------------------

    def poll(self, client: HostedClient, path: str, done: Any, what: str) -> Any:
        """GET ``path`` until ``done(json)`` returns non-None (or raises); bounded by poll_timeout_s."""
        deadline = time.monotonic() + self.options.poll_timeout_s
        interval = self.options.poll_interval_s
        while True:
            data = client.request("GET", path).json(client.redact)
            result = done(data)
            if result is not None:
                return result
            if time.monotonic() > deadline:
                from engine.errors import HostedRequestError

                raise HostedRequestError(f"{self.vendor}: {what} not finished after {self.options.poll_timeout_s} s (poll_timeout_s)")
            time.sleep(interval)
