"""The HTTP client every hosted backend shares: limits, retries, timeouts and credential safety.

Why one client: a paid sweep needs the same guarantees from every vendor (never send a key to
another origin, back off when told to, give up with a clear error on bad credentials) and these
are easy to get subtly wrong once per vendor.

- Credentials are built per request from a callable (the backend reads its environment variable
  at call time) and are attached only to requests whose origin equals the configured base URL.
  An absolute URL from a response (a result or polling URL) is followed only when it has that
  origin; a redirect to another origin is refused with ``UnsafeRedirectError``.
- Concurrency and request rate are limited per vendor and base URL, shared by every backend
  instance in the process (two registry models of one vendor share one account's limits).
- 408/425/429/5xx, timeouts and connection errors are retried with exponential backoff; a
  numeric or HTTP-date ``Retry-After`` is honoured (capped at ``max_backoff_s``).
- 401/403 raise ``HostedAuthError``, 402 ``HostedQuotaError``; server text in messages has the
  key removed.
"""

from __future__ import annotations

import email.utils
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import HostedAuthError, HostedQuotaError, HostedRequestError, UnsafeRedirectError

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL, with default ports filled in, for same-origin checks."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, (parts.hostname or "").lower(), port


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only within the request's origin; anything else is an error."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> urllib.request.Request | None:
        target = urllib.parse.urljoin(req.full_url, newurl)
        if origin(target) != origin(req.full_url):
            raise UnsafeRedirectError(
                f"{_safe_url(req.full_url)} redirected (HTTP {code}) to another origin {_safe_url(target)}; "
                "refused so that the API key is not sent there. Point base_url at the final endpoint if this is expected"
            )
        if code in (307, 308):  # same method and body (urllib would refuse a POST here)
            return urllib.request.Request(target, data=req.data, headers=dict(req.header_items()), method=req.get_method(), unverifiable=True)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _safe_url(url: str) -> str:
    """A URL without its query string (queries may carry tokens) for messages."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class RateLimiter:
    """At most ``per_minute`` request starts in any 60 s window, spread evenly (a leaky bucket)."""

    def __init__(self, per_minute: float | None) -> None:
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


@dataclass
class _Limits:
    semaphore: threading.BoundedSemaphore
    rate: RateLimiter


_LIMITS: dict[tuple[str, str], _Limits] = {}
_LIMITS_LOCK = threading.Lock()


def shared_limits(vendor: str, base_url: str, max_concurrency: int, per_minute: float | None) -> _Limits:
    """The one concurrency and rate limit of a (vendor, base URL) in this process (first caller sets it)."""
    key = (vendor, "%s://%s:%d" % origin(base_url))
    with _LIMITS_LOCK:
        if key not in _LIMITS:
            _LIMITS[key] = _Limits(threading.BoundedSemaphore(max_concurrency), RateLimiter(per_minute))
        return _LIMITS[key]


@dataclass(frozen=True)
class Response:
    """One HTTP answer: status, headers (lower-cased names), body and the request's wall time."""

    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    elapsed_s: float

    def json(self, redact: Callable[[str], str] = lambda s: s) -> Any:
        """The body as JSON, or a ``HostedRequestError`` quoting the start of what came instead."""
        try:
            return json.loads(self.body)
        except ValueError:
            snippet = redact(self.body[:2000].decode("utf-8", "replace"))[:200]
            raise HostedRequestError(f"{_safe_url(self.url)} returned malformed JSON (HTTP {self.status}): {snippet!r}") from None


def parse_retry_after(value: str | None, cap: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), capped; junk is ignored."""
    if not value:
        return None
    value = value.strip()
    try:
        return min(max(float(value), 0.0), cap)
    except ValueError:
        pass  # not a number of seconds: Retry-After may also be an HTTP date, tried next
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return min(max(when.timestamp() - time.time(), 0.0), cap)


def multipart(fields: Sequence[tuple[str, str | bytes, str | None, str | None]]) -> tuple[bytes, str]:
    """A multipart/form-data body from ``(name, value, filename, content_type)`` parts."""
    boundary = f"----audit-{uuid.uuid4().hex}"
    out: list[bytes] = []
    for name, value, filename, ctype in fields:
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
        if filename:
            head += f'; filename="{filename}"'
        head += "\r\n"
        if ctype:
            head += f"Content-Type: {ctype}\r\n"
        payload = value if isinstance(value, bytes) else value.encode()
        out.append(head.encode() + b"\r\n" + payload + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


class HostedClient:
    """HTTP for one backend: ``request(method, path_or_url, ...)`` with every guarantee above.

    ``auth_headers`` is called for each attempt (the key is never stored here) and ``secrets``
    returns the strings to scrub from messages.
    """

    def __init__(
        self,
        vendor: str,
        base_url: str,
        auth_headers: Callable[[], dict[str, str]],
        secrets: Callable[[], list[str]],
        *,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        max_concurrency: int = 4,
        requests_per_minute: float | None = None,
        ssl_context: ssl.SSLContext | None = None,
        key_env: str = "",
    ) -> None:
        self.vendor = vendor
        self.base_url = base_url.rstrip("/")
        self._auth_headers = auth_headers
        self._secrets = secrets
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.key_env = key_env
        self.limits = shared_limits(vendor, base_url, max_concurrency, requests_per_minute)
        handlers: list[Any] = [_SameOriginRedirects()]
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        self._opener = urllib.request.build_opener(*handlers)
        self._lock = threading.Lock()
        self.http_requests = 0
        self.retries = 0

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced (servers and proxies may echo request headers)."""
        for secret in self._secrets():
            if secret:
                text = text.replace(secret, "[redacted]")
        return text

    def url(self, path_or_url: str, query: Mapping[str, Any] | None = None) -> str:
        """Absolute URL for a path under base_url, or an absolute URL checked to share its origin."""
        if path_or_url.startswith(("http://", "https://")):
            if origin(path_or_url) != origin(self.base_url):
                raise UnsafeRedirectError(
                    f"{self.vendor}: the API named a URL on another origin ({_safe_url(path_or_url)}, base_url is "
                    f"{self.base_url}); refused so that the API key is not sent there"
                )
            url = path_or_url
        else:
            url = self.base_url + "/" + path_or_url.lstrip("/")
        if query:
            pairs = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in query.items() if v is not None}
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(pairs)
        return url

    def request(
        self,
        method: str,
        path_or_url: str,
        *,
        body: bytes | None = None,
        content_type: str | None = None,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        ok: Sequence[int] = (200, 201, 202),
    ) -> Response:
        """Send one logical request (retried as needed); returns the final successful response."""
        url = self.url(path_or_url, query)
        last = ""
        for attempt in range(self.max_retries + 1):
            hdrs = {"Accept": "application/json", "User-Agent": "audit-engine", **dict(headers or {}), **self._auth_headers()}
            if content_type:
                hdrs["Content-Type"] = content_type
            req = urllib.request.Request(url, data=body, headers=hdrs, method=method)
            retry_after: float | None = None
            with self.limits.semaphore:
                self.limits.rate.wait()
                with self._lock:
                    self.http_requests += 1
                t0 = time.perf_counter()
                try:
                    with self._opener.open(req, timeout=self.timeout_s) as resp:
                        data = resp.read()
                        status = resp.status
                        rheaders = {k.lower(): v for k, v in resp.headers.items()}
                    elapsed = time.perf_counter() - t0
                    if status in ok:
                        return Response(url, status, rheaders, data, elapsed)
                    last = f"HTTP {status}"
                    if status not in RETRY_STATUS:
                        raise HostedRequestError(f"{self.vendor}: {method} {_safe_url(url)}: unexpected HTTP {status}")
                except urllib.error.HTTPError as exc:
                    detail = self.redact(exc.read(4000).decode("utf-8", "replace"))[:300]
                    self._raise_for_status(exc.code, method, url, detail)
                    last = f"HTTP {exc.code}: {detail}"
                    retry_after = parse_retry_after(exc.headers.get("Retry-After") if exc.headers else None, self.max_backoff_s)
                except (UnsafeRedirectError, HostedRequestError):
                    raise
                except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                    reason = getattr(exc, "reason", exc)
                    if isinstance(reason, UnsafeRedirectError):
                        raise reason from None
                    if isinstance(reason, ssl.SSLCertVerificationError):
                        raise HostedRequestError(f"{self.vendor}: TLS verification failed for {_safe_url(url)} ({reason}); pass 'ca_file' for a private CA") from None
                    last = f"{type(exc).__name__}: {self.redact(str(reason))}"
            if attempt < self.max_retries:
                delay = retry_after if retry_after is not None else min(self.backoff_s * (2**attempt), self.max_backoff_s)
                with self._lock:
                    self.retries += 1
                log.info("%s: %s %s: %s; retry %d/%d in %.2fs", self.vendor, method, _safe_url(url), last, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
        if last.startswith("HTTP 429"):
            raise HostedQuotaError(
                f"{self.vendor}: {_safe_url(url)} kept answering 429 (rate limit or quota) after {self.max_retries + 1} attempts: {last}; "
                "lower max_concurrency / requests_per_minute, or check the account's quota"
            )
        raise HostedRequestError(f"{self.vendor}: {method} {_safe_url(url)} failed after {self.max_retries + 1} attempts: {last}")

    def _raise_for_status(self, code: int, method: str, url: str, detail: str) -> None:
        """Fatal statuses raise here; retryable ones return."""
        if code in (401, 403):
            raise HostedAuthError(
                f"{self.vendor}: {_safe_url(url)} refused the credentials (HTTP {code}: {detail}); put a valid key in the "
                f"environment variable {self.key_env or '(none configured: set api_key_env)'}"
            )
        if code == 402:
            raise HostedQuotaError(f"{self.vendor}: {_safe_url(url)} says the account is out of credit (HTTP 402: {detail})")
        if code not in RETRY_STATUS:
            raise HostedRequestError(f"{self.vendor}: {method} {_safe_url(url)}: HTTP {code}: {detail}")
