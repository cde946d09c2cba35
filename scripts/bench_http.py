"""Requests per second to a hosted vendor: a new connection per request (the urllib client the
engine used before) against the pooled keep-alive client it uses now, side by side in one run.

Method (why it measures the right thing):

* The server is the test suite's fake vendor (``tests/fake_vendors.py``, ``openai-stt``: the
  OpenAI transcription API that ``openai-compatible`` speaks), on 127.0.0.1, over plain HTTP and
  over TLS with a self-signed RSA-2048 certificate made at start-up. It parses and checks every
  request (multipart fields, auth header) and answers at once (no model): what is measured is the
  client and the connection, not a vendor's recognition time.
* Every request is the one the ``openai-compatible`` backend sends for a real clip (captured from
  the backend, then replayed): a multipart POST carrying a ``--clip-s`` second 16 kHz WAV, the
  API key header, the same deadline (``timeout_s``) and body cap.
* Both clients are ``HostedClient`` (engine/backends/hosted/http.py): the same credentials,
  limits, deadline timer, body cap and answer object. ``before`` swaps in the transport the client
  had before: ``urllib.request``, which sends ``Connection: close``, so every request opens a TCP
  connection and, over TLS, makes a full handshake. ``pooled`` is the client as it is now.
* Each run sends ``--requests`` requests from ``--threads`` threads (``max_concurrency``) after
  ``--warmup`` unmeasured ones; the two clients alternate (and swap which goes first), ``--repeat``
  times. Reported: the median requests per second over the runs, the median wall time of one
  request over all of them (steadier than a rate on a shared machine), and the TCP connections
  the server accepted. The server runs in a process of its own (it does not take the client's
  GIL), on the same machine: client and server share its CPUs.

On loopback a new connection costs only CPU (no network round trip), so these ratios understate
what the pool saves across a network, where each avoided connection also saves the TCP round trip
and the TLS handshake's one (TLS 1.3) or two (TLS 1.2) more.

    python scripts/bench_http.py                    # HTTP and HTTPS, 1 and 4 threads
    python scripts/bench_http.py --requests 1000 --threads 1 8
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import platform
import ssl
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout (the fake vendors live in tests/)
    sys.path.insert(0, str(REPO))

KEY = "sk-bench-0123456789abcdef"


def serve(pipe: Any, tls: bool) -> None:
    """The fake vendor in a process of its own (client and server do not share a GIL); answers
    "connections" with the count of TCP connections accepted, stops on "stop"."""
    from tests.fake_vendors import OPENAI_STT, FakeVendor

    fake = FakeVendor(OPENAI_STT, KEY, tls=tls)
    try:
        pipe.send((fake.base_url, fake.ca_file))
        while (msg := pipe.recv()) != "stop":
            pipe.send(fake.connections if msg == "connections" else None)
    finally:
        fake.close()


class Server:
    """Handle on the server process: where it listens, the certificate to trust, its connection count."""

    def __init__(self, tls: bool) -> None:
        self.pipe, child = multiprocessing.Pipe()
        self.proc = multiprocessing.get_context("spawn").Process(target=serve, args=(child, tls), daemon=True)
        self.proc.start()
        self.base_url, self.ca_file = self.pipe.recv()
        self.vendor = "openai-stt"

    @property
    def connections(self) -> int:
        self.pipe.send("connections")
        return int(self.pipe.recv())

    def close(self) -> None:
        self.pipe.send("stop")
        self.proc.join(timeout=10)


def captured_request(fake: Any, clip_s: float) -> tuple[str, str, dict[str, Any]]:
    """(method, path, keyword arguments) of the request the openai-compatible backend sends for one clip."""
    import numpy as np

    from engine.backends import ASR_BACKENDS
    from tests.fake_vendors import options_for

    backend = ASR_BACKENDS.get("openai-compatible")(**options_for(fake, cache=False))
    backend.load()
    seen: list[tuple[str, str, dict[str, Any]]] = []
    real = backend.client.request

    def record(method: str, path: str, **kw: Any) -> Any:
        seen.append((method, path, kw))
        return real(method, path, **kw)

    backend.client.request = record
    rng = np.random.default_rng(0)
    assert backend.transcribe_batch([(0.1 * rng.standard_normal(int(16000 * clip_s))).astype(np.float32)]) == ["hello world"]
    return seen[0]


def clients(base_url: str, ctx: ssl.SSLContext | None, threads: int) -> dict[str, Callable[[str, str, dict[str, Any]], bytes]]:
    """The client before and now, each a ``HostedClient`` (same credentials, limits, deadline, body
    cap and answer object); only the transport differs."""
    from engine.backends.hosted.http import HostedClient

    class UrllibClient(HostedClient):
        """The transport the client had before: ``urllib.request`` (it sends ``Connection: close``:
        one TCP connection, and over TLS one handshake, per request), the body read in 64 KiB chunks."""

        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))

        def _exchange(
            self, method: str, url: str, body: bytes | None, headers: dict[str, str], ok: Any
        ) -> tuple[int, dict[str, str], bytes, str]:
            req = urllib.request.Request(url, data=body, headers=headers, method=method)
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                rheaders = {k.lower(): v for k, v in resp.headers.items()}
                buf = io.BytesIO()
                while resp.status in ok and (chunk := resp.read1(64 * 1024)):
                    buf.write(chunk)
                return resp.status, rheaders, buf.getvalue(), ""

    out = {}
    for name, cls in (("before", UrllibClient), ("pooled", HostedClient)):
        # concurrency limits are per vendor name and origin (the first client sets them): one name per client and thread count
        client = cls(
            f"bench-{name}-{threads}",
            base_url,
            lambda: {"Authorization": f"Bearer {KEY}"},
            lambda: [KEY],
            timeout_s=30.0,
            max_retries=0,
            max_concurrency=threads,
            ssl_context=ctx,
        )
        out[name] = (lambda c: lambda method, path, kw: c.request(method, path, **kw).body)(client)
    return out


def measure(
    send: Callable[[str, str, dict[str, Any]], bytes], request: tuple[str, str, dict[str, Any]], n: int, threads: int, warmup: int
) -> tuple[float, list[float]]:
    """Requests per second for ``n`` requests from ``threads`` threads (after ``warmup`` unmeasured
    ones), and each request's wall time in ms."""
    method, path, kw = request

    def one(_: int) -> float:
        t0 = time.perf_counter()
        if b"hello world" not in send(method, path, kw):
            raise RuntimeError("unexpected answer")
        return 1000.0 * (time.perf_counter() - t0)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(one, range(warmup)))
        t0 = time.perf_counter()
        ms = list(pool.map(one, range(n)))
        return n / (time.perf_counter() - t0), ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200, help="measured requests per run (default 200)")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured requests first (default 20)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4], help="client threads = max_concurrency (default 1 4)")
    ap.add_argument("--repeat", type=int, default=9, help="alternating runs of each client; the median is reported (default 9)")
    ap.add_argument("--clip-s", type=float, default=2.0, help="seconds of 16 kHz audio per request (default 2)")
    args = ap.parse_args()

    from benchlib import print_table

    os.environ["OPENAI_API_KEY"] = KEY
    rows = []
    for tls in (False, True):
        fake = Server(tls)
        try:
            ctx = ssl.create_default_context(cafile=fake.ca_file) if tls else None
            request = captured_request(fake, args.clip_s)
            for threads in args.threads:
                sends = clients(fake.base_url, ctx, threads)
                rates: dict[str, list[float]] = {name: [] for name in sends}
                times: dict[str, list[float]] = {name: [] for name in sends}
                conns: dict[str, int] = dict.fromkeys(sends, 0)
                for run in range(args.repeat):
                    for name in sorted(sends, reverse=bool(run % 2)):  # alternate which client goes first
                        send = sends[name]
                        before = fake.connections
                        rate, ms = measure(send, request, args.requests, threads, args.warmup)
                        rates[name].append(rate)
                        times[name] += ms
                        conns[name] += fake.connections - before
                sent = args.repeat * (args.requests + args.warmup)
                old, new = statistics.median(rates["before"]), statistics.median(rates["pooled"])
                old_ms, new_ms = statistics.median(times["before"]), statistics.median(times["pooled"])
                rows.append(
                    [
                        "HTTPS" if tls else "HTTP",
                        threads,
                        f"{old:.0f}",
                        f"{new:.0f}",
                        f"{new / old:.2f}x",
                        f"{old_ms:.2f}",
                        f"{new_ms:.2f}",
                        f"{old_ms / new_ms:.2f}x",
                        f"{conns['before']} / {sent}",
                        f"{conns['pooled']} / {sent}",
                    ]
                )
        finally:
            fake.close()
    body = len(request[2]["body"])
    print_table(
        f"Requests per second to the fake openai-stt vendor on 127.0.0.1 ({args.requests} requests per cell after {args.warmup} "
        f"warm-up, median of {args.repeat}; {body / 1024:.0f} KiB multipart body per request)",
        [
            "scheme",
            "threads",
            "before req/s",
            "pooled req/s",
            "ratio",
            "before ms",
            "pooled ms",
            "ratio",
            "before conns / requests",
            "pooled conns / requests",
        ],
        rows,
        note=f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
        f"{ssl.OPENSSL_VERSION}, urllib3 {__import__('urllib3').__version__}. req/s: median over the runs; ms: median wall "
        "time of one request over every run; conns / requests: TCP connections the server accepted and requests sent, "
        "all runs (warm-ups included)",
    )


if __name__ == "__main__":
    main()
