"""The HTTP client every hosted backend shares: limits, retries, timeouts and credential safety.

Why one client: a paid sweep needs the same guarantees from every vendor (never send a key to
another origin, back off when told to, give up with a clear error on bad credentials) and these
are easy to get subtly wrong once per vendor.

- Connections are kept alive and reused (urllib3's pool, one per client and process; at most
  ``max_concurrency`` kept per origin), so a clip costs no TCP or TLS handshake once the first
  requests are made; a kept-alive connection the server closed meanwhile is replaced at once.
- Credentials are built per request from a callable (the backend reads its environment variable
  at call time) and are attached only to requests whose origin equals the configured base URL.
  An absolute URL from a response (a result or polling URL) is followed only when it has that
  origin; a redirect to another origin is refused with ``UnsafeRedirectError``.
- Concurrency and request rate are limited per vendor and base URL, shared by every backend
  instance in the process (two registry models of one vendor share one account's limits).
- 408/425/429/5xx, timeouts and connection errors are retried with exponential backoff; a
  numeric or HTTP-date ``Retry-After`` is honoured, parsed defensively: NaN, negative and
  unparseable values are ignored, infinite, huge and far-future ones are capped at
  ``max_backoff_s``; a bad header never fails a request.
- ``timeout_s`` bounds each attempt as a whole (connect, headers and body together): a watchdog
  shuts the socket at the deadline, so a server that trickles a byte a second is cut there and
  its partial answer is dropped.
- Answer bodies are capped at ``max_response_bytes`` (64 MiB by default): a larger
  ``Content-Length`` is refused before reading, and a body that grows past the cap is dropped as
  it streams; it is never read whole.
- A redirect (or a URL named by the API) that is not a valid URL (a port out of range, a broken
  host) is a clean ``HostedRequestError`` naming the problem, not a library traceback.
- 401/403 raise ``HostedAuthError``, 402 ``HostedQuotaError``; every message passes the secret
  scrubber (``scrub.py``), which removes every form of every configured key.
"""

from __future__ import annotations

import datetime
import email.utils
import http.client
import json
import logging
import math
import os
import re
import socket
import ssl
import string
import threading
import time
import urllib.parse
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import urllib3

from engine.backends.hosted.scrub import install_log_scrubber, scrub
from engine.errors import BackendUnavailable, HostedAuthError, HostedQuotaError, HostedRequestError, UnsafeRedirectError
from engine.options import Field, option

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
#: default cap on one answer's body (vendors' transcripts are kilobytes; 64 MiB is generous)
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_CHUNK = 64 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: redirects one request may follow, and visits of one URL (urllib's limits)
_MAX_REDIRECTS = 10
_MAX_REPEATS = 4


TRANSPORT_FIELDS: dict[str, Field] = {
    "timeout_s": Field(float, 120.0, "whole-request deadline of one attempt, in seconds", gt=0, le=86_400),
    "max_retries": Field(int, 5, "retries after a failed attempt", ge=0, le=100),
    "backoff_s": Field(float, 1.0, "first retry delay, in seconds", ge=0, le=3_600),
    "max_backoff_s": Field(float, 60.0, "longest retry delay, in seconds", ge=0, le=86_400),
    "max_concurrency": Field(int, 4, "requests in flight per vendor and base URL", ge=1, le=1_024),
    "requests_per_minute": Field(
        float, None, "request starts per minute per vendor and base URL; null: no limit", gt=0, le=1_000_000, nullable=True
    ),
    "max_response_bytes": Field(int, DEFAULT_MAX_RESPONSE_BYTES, "largest answer body accepted, in bytes", ge=1024, le=1 << 34),
}
"""The hosted transport options through the typed option layer (``engine.options.Field``): every hosted
ASR backend and audio-LM judge declares them with :func:`transport_option`, and ``HostedClient`` and ``RateLimiter``
check what they are given again, so no surface takes NaN, an infinity, a negative, a boolean or a
string for a number (a NaN rate would otherwise mean no limit at all; a rate of 0 is refused too:
null is "no limit")."""


def check_transport(owner: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The transport options present in ``options``, each checked by its ``TRANSPORT_FIELDS`` entry (errors name ``owner`` and the key)."""
    return {key: f.check(options[key], f"{owner}: option '{key}'") for key, f in TRANSPORT_FIELDS.items() if key in options}


def transport_option(key: str) -> Any:
    """The :func:`~engine.options.option` declaring the transport option ``key`` in a backend's options
    record (hosted ASR backends, judges): its default, bounds and doc are the ``TRANSPORT_FIELDS`` entry's."""
    f = TRANSPORT_FIELDS[key]
    return option(f.default, f.doc, ge=f.ge, gt=f.gt, le=f.le, lt=f.lt)


class ResponseTooLargeError(HostedRequestError):
    """An answer's body is larger than ``max_response_bytes``; refused, never read whole."""


class DeadlineExceeded(TimeoutError):
    """An attempt did not finish within ``timeout_s`` (the whole-request deadline)."""


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL, with default ports filled in, for same-origin checks.

    Raises ``ValueError`` for a URL that is not valid (a port out of range, a broken host).
    """
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return scheme, (parts.hostname or "").lower(), port


def checked_origin(url: str, what: str) -> tuple[str, str, int]:
    """``origin(url)``, or a ``HostedRequestError`` that names the URL's problem."""
    try:
        return origin(url)
    except ValueError as exc:
        raise HostedRequestError(f"{what} is not a valid URL ({_safe_url(url)}): {exc}; refused") from None


class _Deadline:
    """The whole-request deadline of one attempt: at ``seconds`` a timer shuts every socket the
    attempt used (a pooled connection's included), which wakes a read blocked on a trickling
    server; ``expired`` then says why."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        _CURRENT.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _CURRENT.deadline = None

    def watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._socks.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            socks = list(self._socks)
        for sock in socks:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Shut a socket down at the OS level (TLS state untouched; a closed socket is left alone)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed, detached (wrapped by TLS) or never connected: nothing to wake


#: Per thread: the deadline of the attempt this thread is making (connections hand it their
#: sockets) and whether its last request went out on a connection that had carried one before.
_CURRENT = threading.local()


def _watch(sock: socket.socket | None) -> None:
    deadline = getattr(_CURRENT, "deadline", None)
    if deadline is not None:
        deadline.watch(sock)


class _WatchedConnection:
    """Mix-in for urllib3's connections: every socket they open (the raw one too, so a trickled
    TLS handshake is cut) and the socket each request goes out on are handed to the calling
    thread's deadline; a request on a connection that carried one before is marked as reused."""

    sock: socket.socket | None
    _audit_last_sock: socket.socket | None = None

    def _new_conn(self) -> socket.socket:
        sock: socket.socket = super()._new_conn()  # type: ignore[misc]
        _watch(sock)
        return sock

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _watch(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _CURRENT.reused = self.sock is not None and self.sock is self._audit_last_sock
        _watch(self.sock)
        super().request(*args, **kwargs)  # type: ignore[misc]
        self._audit_last_sock = self.sock


class _HTTPConnection(_WatchedConnection, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_WatchedConnection, urllib3.connection.HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def _pool_manager(base_url: str, ssl_context: ssl.SSLContext | None, maxsize: int) -> urllib3.PoolManager:
    """Keep-alive connections for one client: ``maxsize`` kept per origin (more are opened when more
    threads need one, and closed after use). urllib3 retries and redirects nothing here (the
    client does both itself); proxies come from the environment as urllib took them
    (``https_proxy``, ``no_proxy``, ...)."""
    kw: dict[str, Any] = {"num_pools": 4, "maxsize": max(1, maxsize), "block": False, "retries": False}
    if ssl_context is not None:
        kw["ssl_context"] = ssl_context
        if ssl_context.verify_mode == ssl.CERT_NONE:  # the backend logged a warning once; not one per request
            warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
    scheme, host, _ = origin(base_url)
    proxy = urllib.request.getproxies().get(scheme)
    manager: urllib3.PoolManager
    if proxy and not urllib.request.proxy_bypass(host):
        manager = urllib3.ProxyManager(proxy, **kw)
    else:
        manager = urllib3.PoolManager(**kw)
    manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
    return manager


def _stale(exc: BaseException) -> bool:
    """A kept-alive connection the server had closed: the request could not go out or got no answer at all."""
    if not isinstance(exc, urllib3.exceptions.ProtocolError):
        return False
    cause = exc.args[1] if len(exc.args) > 1 else None
    return isinstance(cause, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError))


def _drain(resp: Any, limit: int = _CHUNK) -> bool:
    """Read and drop a small answer body (a redirect's); True when it ended, so the connection can be kept."""
    try:
        resp.read(limit, decode_content=False)
        return bool(resp.length_remaining == 0 or (resp.length_remaining is None and not resp.read(1, decode_content=False)))
    except Exception:  # noqa: BLE001 - a broken body only means the connection is not kept
        return False


def _release(resp: Any, keep: bool) -> None:
    """Hand the connection back to the pool: kept alive when its answer was read to the end, else closed."""
    if not keep:
        resp.close()
    resp.release_conn()


def _safe_url(url: str) -> str:
    """A URL without its query string (queries may carry tokens) for messages, secrets scrubbed."""
    try:
        parts = urllib.parse.urlsplit(url)
        text = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    except ValueError:
        text = url.split("?", 1)[0].split("#", 1)[0]
    return scrub(text[:300])


class RateLimiter:
    """At most ``per_minute`` request starts in any 60 s window, spread evenly (a leaky bucket)."""

    def __init__(self, per_minute: float | None) -> None:
        per_minute = TRANSPORT_FIELDS["requests_per_minute"].check(per_minute, "rate limiter: requests_per_minute")
        self.interval = 60.0 / per_minute if per_minute is not None else 0.0
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

    def json(self, redact: Callable[[str], str] = scrub) -> Any:
        """The body as JSON, or a ``HostedRequestError`` quoting the start of what came instead."""
        try:
            return json.loads(self.body)
        except ValueError:
            snippet = redact(self.body[:2000].decode("utf-8", "replace"))[:200]
            raise HostedRequestError(f"{_safe_url(self.url)} returned malformed JSON (HTTP {self.status}): {snippet!r}") from None


def parse_retry_after(value: str | None, cap: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), in ``[0, cap]``.

    Never raises and never returns NaN or infinity: NaN, negative and unparseable values give
    None (the caller's exponential backoff applies), infinite, huge and far-future values give
    ``cap``, dates in the past give 0.
    """
    if not math.isfinite(cap) or cap < 0:
        cap = 60.0
    if not value:
        return None
    try:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            seconds = None  # not a number of seconds: Retry-After may also be an HTTP date, tried next
        if seconds is not None:
            if math.isnan(seconds) or seconds < 0:
                return None
            return min(seconds, cap)
        when = email.utils.parsedate_to_datetime(text)
        if when.tzinfo is None:  # an HTTP date is always GMT
            when = when.replace(tzinfo=datetime.timezone.utc)
        delay = when.timestamp() - time.time()
    except Exception:  # noqa: BLE001 - any malformed header is ignored, never fatal to the clip
        return None
    if not math.isfinite(delay):
        return None
    return min(max(delay, 0.0), cap)


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


_BAD_HEADER_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")


class HostedClient:
    """HTTP for one backend: ``request(method, path_or_url, ...)`` with every guarantee above.

    ``auth_headers`` is called for each attempt (the key is never stored here) and ``secrets``
    returns extra strings to scrub from messages (every configured key is scrubbed anyway).
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
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        install_log_scrubber()  # retries and failures are logged: no key may reach a log line
        check_transport(
            f"{vendor} client",
            {
                "timeout_s": timeout_s,
                "max_retries": max_retries,
                "backoff_s": backoff_s,
                "max_backoff_s": max_backoff_s,
                "max_concurrency": max_concurrency,
                "requests_per_minute": requests_per_minute,
                "max_response_bytes": max_response_bytes,
            },
        )
        self.vendor = vendor
        self.base_url = base_url.rstrip("/")
        checked_origin(self.base_url, f"{vendor}: base_url")
        self._auth_headers = auth_headers
        self._secrets = secrets
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_response_bytes = max_response_bytes
        self.key_env = key_env
        self.limits = shared_limits(vendor, base_url, max_concurrency, requests_per_minute)
        self._ssl_context = ssl_context
        self._max_concurrency = max_concurrency
        self._pool_lock = threading.Lock()
        self._pool_pid = -1
        self._manager: urllib3.PoolManager | None = None
        self._timeout = urllib3.Timeout(connect=timeout_s, read=timeout_s)  # per socket operation; the deadline bounds the whole
        self._lock = threading.Lock()
        self.http_requests = 0
        self.retries = 0

    def redact(self, text: str) -> str:
        """``text`` with every form of every secret replaced (servers and proxies may echo request headers)."""
        return scrub(text, self._secrets())

    def url(self, path_or_url: str, query: Mapping[str, Any] | None = None) -> str:
        """Absolute URL for a path under base_url, or an absolute URL checked to share its origin."""
        if path_or_url.startswith(("http://", "https://")):
            if checked_origin(path_or_url, f"{self.vendor}: the URL the API named") != origin(self.base_url):
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

    def _credentials(self) -> dict[str, str]:
        """The auth headers, refused (naming the variable, never the value) when a value cannot be a header."""
        headers = self._auth_headers()
        for name, value in headers.items():
            if _BAD_HEADER_CHAR.search(value):
                raise HostedAuthError(
                    f"{self.vendor}: the API key in the environment variable {self.key_env or '(unnamed)'} holds a control or "
                    f"non-Latin-1 character (header {name}), so it cannot be sent; fix the variable's value "
                    "(a CRLF .env file leaves a CR at the end of the line)"
                )
        return headers

    def pool(self) -> urllib3.PoolManager:
        """This process's connection pool (a forked or spawned worker builds its own: sockets are never shared)."""
        with self._pool_lock:
            if self._manager is None or self._pool_pid != os.getpid():
                self._manager = _pool_manager(self.base_url, self._ssl_context, self._max_concurrency)
                self._pool_pid = os.getpid()
            return self._manager

    def close(self) -> None:
        """Close the kept-alive connections (a later request opens new ones)."""
        with self._pool_lock:
            if self._manager is not None and self._pool_pid == os.getpid():
                self._manager.clear()
            self._manager = None

    def _read_body(self, resp: Any, url: str) -> bytes:
        """The body, streamed and capped at ``max_response_bytes``; a body cut short is an error."""
        cap = self.max_response_bytes
        length = resp.headers.get("Content-Length")
        declared = int(length) if length is not None and length.strip().isdigit() else None

        def too_big(why: str) -> ResponseTooLargeError:  # built only when needed (the URL passes the scrubber)
            return ResponseTooLargeError(
                f"{self.vendor}: {_safe_url(url)} answered more than max_response_bytes ({cap} bytes){why}; refused without reading "
                "it whole: raise max_response_bytes if this vendor's answers are really that large"
            )

        if declared is not None and declared > cap:
            raise too_big(f" (Content-Length {declared})")
        buf = bytearray()
        while True:
            chunk = resp.read1(_CHUNK, decode_content=False)  # the bytes as sent, as urllib gave them
            if not chunk:
                break
            buf += chunk
            if len(buf) > cap:
                raise too_big("")
        missing = resp.length_remaining
        if missing:
            raise http.client.IncompleteRead(bytes(buf[-64:]), missing)
        return bytes(buf)

    def _send(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> Any:
        """One request on a pooled connection; a kept-alive connection the server had closed in the
        meantime is replaced once at once (the request never reached the server: no retry is spent)."""
        kw: dict[str, Any] = {
            "body": body,
            "headers": headers,
            "redirect": False,
            "retries": False,
            "preload_content": False,
            "decode_content": False,
            "timeout": self._timeout,
        }
        _CURRENT.reused = False
        try:
            return self.pool().urlopen(method, url, **kw)
        except urllib3.exceptions.ProtocolError as exc:
            deadline = getattr(_CURRENT, "deadline", None)
            if not (getattr(_CURRENT, "reused", False) and _stale(exc)) or (deadline is not None and deadline.expired):
                raise
            log.debug("%s: a kept-alive connection to %s was closed by the server; sending on a new one", self.vendor, _safe_url(url))
            with self._lock:
                self.http_requests += 1
            return self.pool().urlopen(method, url, **kw)

    def _open(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> Any:
        """Send, following redirects within the base URL's origin only (with the credentials, as
        before); a redirect elsewhere is refused before anything is sent there.

        As urllib did: 307/308 repeat the method and body; 301/302/303 turn a POST into a GET
        without body or content headers (GET and HEAD stay), and refuse other methods; at most 10
        redirects, and the same URL at most 4 times.
        """
        visited: dict[str, int] = {}
        while True:
            resp = self._send(method, url, body, headers)
            code = resp.status
            location = resp.headers.get("Location") or resp.headers.get("URI")
            if code not in _REDIRECTS or not location:
                return resp
            _release(resp, keep=_drain(resp))
            where = f"{_safe_url(url)} redirected (HTTP {code}) to an address that"
            try:
                parts = urllib.parse.urlparse(location)
                if parts.scheme not in ("http", "https", ""):
                    raise HostedRequestError(f"{self.vendor}: {where} is not http(s) ({_safe_url(location)}); refused")
                if not parts.path and parts.netloc:
                    location = urllib.parse.urlunparse(parts._replace(path="/"))
                target = urllib.parse.quote(urllib.parse.urljoin(url, location), encoding="iso-8859-1", safe=string.punctuation)
            except ValueError as exc:
                raise HostedRequestError(f"{where} is not a valid URL ({_safe_url(location)}): {exc}; refused") from None
            if checked_origin(target, where) != origin(url):
                raise UnsafeRedirectError(
                    f"{_safe_url(url)} redirected (HTTP {code}) to another origin {_safe_url(target)}; "
                    "refused so that the API key is not sent there. Point base_url at the final endpoint if this is expected"
                )
            if code in (301, 302, 303) and method not in ("GET", "HEAD"):
                if method != "POST":
                    raise HostedRequestError(
                        f"{self.vendor}: {method} {_safe_url(url)}: HTTP {code} asks to repeat a {method} as a GET; refused"
                    )
                method, body = "GET", None
                headers = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "content-type")}
            visited[target] = visited.get(target, 0) + 1
            if visited[target] > _MAX_REPEATS or len(visited) > _MAX_REDIRECTS:
                raise HostedRequestError(
                    f"{self.vendor}: {method} {_safe_url(url)}: HTTP {code}: redirects that would lead to an infinite loop; refused"
                )
            url = target

    def _exchange(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], ok: Sequence[int]
    ) -> tuple[int, dict[str, str], bytes, str]:
        """(status, headers, body if the status is in ``ok``, the scrubbed start of an error body).
        The connection goes back to the pool only when its answer was read to the end."""
        resp = self._open(method, url, body, headers)
        keep = False
        try:
            status = int(resp.status)
            rheaders = {k.lower(): v for k, v in resp.headers.items()}
            if status in ok:
                data = self._read_body(resp, url)
                keep = True
                return status, rheaders, data, ""
            if 200 <= status < 300:
                return status, rheaders, b"", ""
            detail = self.redact(resp.read(4000, decode_content=False).decode("utf-8", "replace"))[:300]
            keep = resp.length_remaining == 0
            return status, rheaders, b"", detail
        finally:
            _release(resp, keep)

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
            hdrs = {"Accept": "application/json", "User-Agent": "audit-engine", **dict(headers or {}), **self._credentials()}
            if content_type:
                hdrs["Content-Type"] = content_type
            elif body is not None:  # what urllib sent for a body without a type
                hdrs.setdefault("Content-Type", "application/x-www-form-urlencoded")
            retry_after: float | None = None
            with self.limits.semaphore:
                self.limits.rate.wait()
                with self._lock:
                    self.http_requests += 1
                t0 = time.perf_counter()
                deadline = _Deadline(self.timeout_s)
                try:
                    with deadline:
                        status, rheaders, data, detail = self._exchange(method, url, body, hdrs, ok)
                    if deadline.expired:
                        raise DeadlineExceeded()
                    if status in ok:
                        return Response(url, status, rheaders, data, time.perf_counter() - t0)
                    if 200 <= status < 300:
                        raise HostedRequestError(f"{self.vendor}: {method} {_safe_url(url)}: unexpected HTTP {status}")
                    self._raise_for_status(status, method, url, detail)
                    last = f"HTTP {status}: {detail}"
                    retry_after = parse_retry_after(rheaders.get("retry-after"), self.max_backoff_s)
                except (UnsafeRedirectError, HostedRequestError, HostedAuthError, HostedQuotaError):
                    raise
                except Exception as exc:  # noqa: BLE001 - every transport failure becomes a retry or a clean error
                    last = self._transport_problem(exc, deadline, method, url)
            if attempt < self.max_retries:
                delay = retry_after if retry_after is not None else min(self.backoff_s * (2 ** min(attempt, 30)), self.max_backoff_s)
                with self._lock:
                    self.retries += 1
                log.info(
                    "%s: %s %s: %s; retry %d/%d in %.2fs", self.vendor, method, _safe_url(url), last, attempt + 1, self.max_retries, delay
                )
                time.sleep(delay)
        if last.startswith("HTTP 429"):
            raise HostedQuotaError(
                f"{self.vendor}: {_safe_url(url)} kept answering 429 (rate limit or quota) after {self.max_retries + 1} attempts: {last}; "
                "lower max_concurrency / requests_per_minute, or check the account's quota"
            )
        raise HostedRequestError(f"{self.vendor}: {method} {_safe_url(url)} failed after {self.max_retries + 1} attempts: {last}")

    def _transport_problem(self, exc: BaseException, deadline: _Deadline, method: str, url: str) -> str:
        """What a failed attempt says (for a retry), or raise when retrying cannot help."""
        if deadline.expired or isinstance(exc, DeadlineExceeded):
            return f"no complete answer within timeout_s={self.timeout_s:g} s (a whole-request deadline)"
        reason = getattr(exc, "reason", None) or exc
        if isinstance(exc, urllib3.exceptions.SSLError) and exc.args and isinstance(exc.args[0], BaseException):
            reason = exc.args[0]  # urllib3 wraps the ssl module's error
        if isinstance(reason, (UnsafeRedirectError, HostedRequestError)):
            raise reason from None
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise BackendUnavailable(
                f"{self.vendor}: TLS verification failed for {_safe_url(url)} ({reason}); pass 'ca_file' for a private CA "
                "(or verify_tls: false for a trusted test server)"
            ) from None
        if isinstance(exc, ValueError) or isinstance(reason, ValueError):  # an invalid URL or header, from the library
            raise HostedRequestError(f"{self.vendor}: {method} {_safe_url(url)} cannot be sent: {self.redact(str(reason))[:300]}") from None
        if isinstance(exc, (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError)):
            return f"{type(exc).__name__}: {self.redact(str(reason))[:300]}"
        raise HostedRequestError(
            f"{self.vendor}: {method} {_safe_url(url)} failed: {type(exc).__name__}: {self.redact(str(exc))[:300]}"
        ) from None

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
