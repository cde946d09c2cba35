"""The OpenAI-compatible backend (a hosted vendor on the shared client) never forwards its API key across origins.

urllib's default redirect handler re-sends every request header, ``Authorization`` included, to
wherever a 302 points. Two local HTTP servers on 127.0.0.1 (two ports = two origins): the
endpoint redirects to the other one, which must never see a request, let alone the key; the
backend fails with an error that names both origins. A redirect within the endpoint's own origin
is still followed, with the key.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from engine.backends.hosted.http import origin
from engine.backends.hosted.vendors import OpenAICompatibleBackend
from engine.errors import HostedRequestError, UnsafeRedirectError

KEY_ENV = "AUDIT_TEST_REDIRECT_KEY"
SECRET = "sk-redirect-test-" + os.urandom(8).hex()
CLIP = (0.1 * np.sin(np.arange(8000) / 3.0)).astype(np.float32)


class Server:
    """A local HTTP server that records each request (method, path, headers) and answers per ``route``."""

    def __init__(self, route: Any) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                if self.headers.get("Content-Length"):
                    self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append(
                    {"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
                )
                status, headers, body = route(self.command, self.path, self.headers)
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args: Any) -> None:
                """No access log in the test output."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def backend(url: str) -> OpenAICompatibleBackend:
    b = OpenAICompatibleBackend(
        model="whisper-1", base_url=url, api_key_env=KEY_ENV, max_retries=2, backoff_s=0.0, batch_size=1, timeout_s=10, cache=False
    )
    b.load()
    return b


@pytest.fixture()
def collector() -> Iterator[Server]:
    """The other origin: answers anything with a transcript, and records what it was sent."""
    with Server(lambda method, path, headers: (200, {}, {"text": "collected"})) as srv:
        yield srv


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_cross_origin_redirect_is_refused_without_sending_the_key(code: int, key: str, collector: Server) -> None:
    target = f"{collector.url}/v1/audio/transcriptions?steal=1"
    with Server(lambda method, path, headers: (code, {"Location": target}, {"moved": True})) as endpoint:
        with pytest.raises(HostedRequestError) as info:
            backend(endpoint.url).transcribe_batch([CLIP])
        assert endpoint.requests and endpoint.requests[0]["headers"].get("authorization") == f"Bearer {key}"
        assert len(endpoint.requests) == 1, "a refused redirect must not be retried"
    assert collector.requests == [], f"the other origin was contacted: {collector.requests}"
    msg = str(info.value)  # 301-303: urllib's default handler would have followed these (as a GET) with every header
    assert isinstance(info.value, UnsafeRedirectError)
    assert endpoint.url in msg and collector.url in msg and "not sent there" in msg, msg
    assert key not in msg and "steal" not in msg


def test_redirect_to_another_host_name_is_refused(key: str, collector: Server) -> None:
    """localhost and 127.0.0.1 are different origins even on one port."""
    port = collector.url.rsplit(":", 1)[1]
    with Server(lambda method, path, headers: (302, {"Location": f"http://localhost:{port}/v1/audio/transcriptions"}, {})) as endpoint:
        with pytest.raises(UnsafeRedirectError):
            backend(endpoint.url).transcribe_batch([CLIP])
    assert collector.requests == []


def test_same_origin_redirect_is_followed_with_the_key(key: str) -> None:
    def route(method: str, path: str, headers: Any) -> tuple[int, dict[str, str], Any]:
        if path.startswith("/v1/"):
            return 302, {"Location": "/moved"}, {}
        return 200, {}, {"text": f"moved {method} auth={headers.get('Authorization') == f'Bearer {SECRET}'}"}

    with Server(route) as endpoint:
        assert backend(endpoint.url).transcribe_batch([CLIP]) == ["moved GET auth=True"]
        assert [r["path"] for r in endpoint.requests] == ["/v1/audio/transcriptions", "/moved"]


def test_origin_compares_scheme_host_and_port() -> None:
    assert origin("https://api.example.com/v1") == origin("https://API.example.com:443/x")
    assert origin("http://h:80/a") == origin("http://h/b")
    assert origin("https://h/a") != origin("http://h/a")  # a downgrade is another origin
    assert origin("http://h:8000/a") != origin("http://h:8001/a")
    assert origin("https://api.example.com/") != origin("https://api.example.com.evil.test/")
