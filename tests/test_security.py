"""Security: nothing in a recipe, registry or dataset runs code or leaks a secret.

* YAML is loaded with the safe loader: tags that construct Python objects are refused (and do not
  run) in recipes and in model registry files; unknown keys are rejected.
* No pickle of dataset data: torch's default ``weights_only`` load refuses a malicious checkpoint
  passed as resemblyzer weights (resemblyzer calls ``torch.load`` without the argument).
* The OpenAI-compatible HTTP backend takes its key only from an environment variable; a real
  ``audit run`` against a local server sends it, and it appears in no file of the run directory and
  in no log line. Timeouts, bounded retries with backoff, and TLS verification by default.
* The HTML report escapes references, hypotheses, ids and labels from a real run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import numpy as np
import pytest

from audits.recipes import load_recipe
from engine.config import load_yaml
from engine.errors import BackendUnavailable, ConfigError
from engine.model_registry import load_model_registry

REPO = Path(__file__).resolve().parents[1]
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
SECRET = "sk-audit-test-" + os.urandom(12).hex()
KEY_ENV = "AUDIT_TEST_OPENAI_KEY"


# -- YAML ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "!!python/object/new:subprocess.check_output [['touch', '{marker}']]",
        "!!python/name:os.system",
    ],
)
def test_registry_yaml_tags_do_not_run(payload: str, tmp_path: Path, record_property: Callable[[str, Any], None]) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "evil.yaml").write_text(
        f"models:\n  m1:\n    backend: pocketsphinx\n    options: {payload.format(marker=marker)}\n"
    )
    with pytest.raises(ConfigError, match=r"evil.yaml, line 4.*invalid YAML"):
        load_model_registry(tmp_path)
    assert not marker.exists(), "a YAML tag ran code"
    record_property("security_check", f"registry YAML tag refused: {payload.split()[0]}")


def test_recipe_yaml_tags_do_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    p = tmp_path / "evil.yaml"
    p.write_text(f"dataset: {{path: x.jsonl}}\nmodels: [whisper-tiny.en]\nscoring: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ConfigError, match="line 3"):
        load_recipe(str(p))
    assert not marker.exists()
    p.write_text("dataset: {path: x.jsonl}\nmodels: !!python/tuple [a]\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_yaml(p)


def test_registry_rejects_unknown_keys_at_every_level(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    f = tmp_path / "models" / "x.yaml"
    f.write_text("models: {}\nimports: [os]\n")
    with pytest.raises(ConfigError, match="unknown key 'imports'"):
        load_model_registry(tmp_path)
    f.write_text("models:\n  m1: {backend: pocketsphinx, optoins: {}}\n")
    with pytest.raises(ConfigError, match="unknown key 'optoins'"):
        load_model_registry(tmp_path)
    f.write_text("models:\n  m1: [not, a, mapping]\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_model_registry(tmp_path)


# -- no pickle from data ---------------------------------------------------------------------------


class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {os.environ.get('AUDIT_PWNED_MARKER', '/nonexistent/pwned')}",))


def test_malicious_checkpoint_is_not_unpickled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that would run code when unpickled, given as resemblyzer weights, is refused by
    torch's weights-only loader (torch >= 2.6 default) before anything runs."""
    import pickle

    torch = pytest.importorskip("torch")
    marker = tmp_path / "pwned"
    monkeypatch.setenv("AUDIT_PWNED_MARKER", str(marker))
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", raising=False)
    evil = tmp_path / "evil.pt"
    with open(evil, "wb") as fh:
        pickle.dump({"model_state": _Boom()}, fh)
    with pytest.raises(Exception, match="(?i)weights_only|unpickl"):
        torch.load(evil, map_location="cpu")
    from engine.backends.sv.resemblyzer import ResemblyzerBackend

    backend = ResemblyzerBackend(weights=str(evil))
    with pytest.raises(Exception, match="(?i)weights only load failed"):  # refused by torch, before unpickling
        backend.load()
    assert not marker.exists(), "unpickling ran code"


def test_no_unrestricted_pickle_or_torch_load_in_the_code_base() -> None:
    """Project code never unpickles: no pickle/joblib/np.load(allow_pickle)/bare torch.load."""
    bad = []
    for root in ("engine", "audits", "normalizers", "scripts"):
        for f in (REPO / root).rglob("*.py"):
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if any(
                    s in code for s in ("pickle.load", "joblib.load", "allow_pickle=True", "yaml.load(", "yaml.unsafe_load", "read_pickle")
                ):
                    bad.append(f"{f.relative_to(REPO)}:{i}: {line.strip()}")
                if "torch.load(" in code and "weights_only=True" not in code:
                    bad.append(f"{f.relative_to(REPO)}:{i}: {line.strip()}")
    assert bad == []


# -- the HTTP backend ------------------------------------------------------------------------------


class FakeServer:
    """A local OpenAI-style transcription endpoint that records what it receives.

    ``plan`` is a list of (status, body, delay_s, headers) served in order, the last one repeated.
    """

    def __init__(self, plan: list[tuple[int, Any, float, dict[str, str]]], tls: tuple[Path, Path] | None = None) -> None:
        self.plan = plan
        self.requests: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests.append({k.lower(): v for k, v in self.headers.items()})
                status, body, delay, headers = outer.plan[min(len(outer.requests), len(outer.plan)) - 1]
                if callable(body):
                    body = body(self.headers)
                time.sleep(delay)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                """Keep the test output clean: no access log lines."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def ok(text: str = "hello world") -> tuple[int, Any, float, dict[str, str]]:
    return (200, {"text": text}, 0.0, {})


def backend(url: str, **opts: Any) -> Any:
    from engine.backends.hosted.vendors import OpenAICompatibleBackend

    b = OpenAICompatibleBackend(
        **{
            "model": "whisper-1",
            "base_url": url,
            "api_key_env": KEY_ENV,
            "backoff_s": 0.05,
            "max_retries": 2,
            "batch_size": 1,
            "cache": False,
            **opts,
        }
    )
    b.load()
    return b


CLIP = (0.1 * np.sin(np.arange(16000) / 3.0)).astype(np.float32)


@pytest.fixture()
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def test_defaults_are_safe() -> None:
    from engine.backends.hosted.base import VendorOptions
    from engine.backends.hosted.vendors import OpenAICompatibleBackend

    d = VendorOptions.parse({"model": "m"}, "defaults")
    assert d.verify_tls is True and 0 < d.timeout_s <= 600 and 0 <= d.max_retries <= 10
    assert 0 < d.max_response_bytes <= 256 * 1024 * 1024
    with pytest.raises(ConfigError, match="(?i)api.key.*environment variable"):
        OpenAICompatibleBackend(model="m", api_key=SECRET)


def test_key_sent_only_as_header_and_never_shown(key: str) -> None:
    with FakeServer([ok()]) as srv:
        b = backend(srv.url)
        assert b.transcribe_batch([CLIP]) == ["hello world"]
    assert srv.requests[0]["authorization"] == f"Bearer {key}"
    assert key not in repr(b) and key not in json.dumps(b.info().as_dict(), default=str) and key not in json.dumps(b.options, default=str)


def test_bounded_retries_with_backoff(key: str) -> None:
    with FakeServer([(503, {"error": "busy"}, 0.0, {})]) as srv:
        b = backend(srv.url, max_retries=2, backoff_s=0.1)
        t0 = time.perf_counter()
        with pytest.raises(Exception, match="failed after 3 attempts: HTTP 503"):
            b.transcribe_batch([CLIP])
        elapsed = time.perf_counter() - t0
    assert len(srv.requests) == 3
    assert 0.3 <= elapsed < 3.0, elapsed  # 0.1 + 0.2 s of backoff, no more


def test_retry_after_honoured_then_success(key: str) -> None:
    with FakeServer([(429, {"error": "slow down"}, 0.0, {"Retry-After": "0.3"}), ok("fine")]) as srv:
        b = backend(srv.url, backoff_s=5.0)
        t0 = time.perf_counter()
        assert b.transcribe_batch([CLIP]) == ["fine"]
        assert 0.3 <= time.perf_counter() - t0 < 3.0
    assert len(srv.requests) == 2


def test_timeout_per_request(key: str) -> None:
    with FakeServer([(200, {"text": "late"}, 2.0, {})]) as srv:
        b = backend(srv.url, timeout_s=0.3, max_retries=1, backoff_s=0.0)
        t0 = time.perf_counter()
        with pytest.raises(Exception, match="failed after 2 attempts"):
            b.transcribe_batch([CLIP])
        assert time.perf_counter() - t0 < 1.8
    assert len(srv.requests) == 2


def test_auth_and_client_errors_are_not_retried(key: str) -> None:
    with FakeServer([(401, {"error": "bad key"}, 0.0, {})]) as srv, pytest.raises(BackendUnavailable, match=KEY_ENV) as info:
        backend(srv.url).transcribe_batch([CLIP])
    assert len(srv.requests) == 1 and key not in str(info.value)
    with FakeServer([(400, {"error": "bad audio"}, 0.0, {})]) as srv, pytest.raises(Exception, match="HTTP 400"):
        backend(srv.url).transcribe_batch([CLIP])
    assert len(srv.requests) == 1


def test_key_echoed_by_a_server_is_redacted(key: str) -> None:
    """A server (or proxy) that echoes request headers in an error body must not put the key into
    the error message, which becomes the row's ``error`` and lands in tables and reports."""
    echo = lambda headers: f"debug: Authorization: {headers.get('Authorization')}".encode()
    with FakeServer([(400, echo, 0.0, {})]) as srv, pytest.raises(Exception) as info:
        backend(srv.url).transcribe_batch([CLIP])
    assert key[-16:] not in str(info.value), str(info.value)  # not even a truncated part of it
    with FakeServer([(200, echo, 0.0, {})]) as srv, pytest.raises(Exception) as info:  # non-JSON 200 echoing the header
        backend(srv.url).transcribe_batch([CLIP])
    assert key[-16:] not in str(info.value), str(info.value)


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    cert, keyf = d / "cert.pem", d / "key.pem"
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
            str(keyf),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, keyf


def test_tls_verified_by_default(key: str, self_signed: tuple[Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    cert, _ = self_signed
    with FakeServer([ok("secure")], tls=self_signed) as srv:
        with pytest.raises(BackendUnavailable, match="TLS verification failed"):
            backend(srv.url).transcribe_batch([CLIP])
        assert srv.requests == []  # nothing (and no key) was sent to the unverified server
        assert backend(srv.url, ca_file=str(cert)).transcribe_batch([CLIP]) == ["secure"]
        with caplog.at_level("WARNING"):
            assert backend(srv.url, verify_tls=False).transcribe_batch([CLIP]) == ["secure"]
        assert "verification is OFF" in caplog.text


# -- a real run through the CLI: the key stays out of files and logs; the report escapes text ------


def _librivox(n: int) -> list[tuple[Path, str]]:
    trans = {}
    for line in (LIBRIVOX / "transcription").read_text().splitlines():
        text, uid = line.rsplit("(", 1)
        trans[uid.strip().rstrip(")")] = " ".join(text.replace("<s>", " ").replace("</s>", " ").split())
    return [(w, trans[w.stem]) for w in sorted(LIBRIVOX.glob("*.wav"))][:n]


def _config_dir(tmp: Path, url: str) -> Path:
    cfg = tmp / "configs"
    shutil.copytree(REPO / "audit_configs", cfg)
    entry = {
        "backend": "openai-compatible",
        "options": {
            "model": "whisper-1",
            "base_url": url,
            "api_key_env": KEY_ENV,
            "backoff_s": 0.01,
            "max_retries": 2,
            "cache_dir": str(tmp / "hosted-cache"),
        },
        "batch_size": 2,
    }
    (cfg / "models" / "remote.yaml").write_text(json.dumps({"models": {"remote-asr": entry}}))
    return cfg


XSS_REF = '<script>alert("ref")</script> and Mr. John'
XSS_HYP = "<img src=x onerror=alert(1)> and mister john"


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, FakeServer]]:
    """`audit -v run` against the fake server: one flaky response (logged retry), a hostile
    hypothesis, a hostile reference, id and label."""
    tmp = tmp_path_factory.mktemp("remote")
    clips = _librivox(2)
    manifest = tmp / "manifest.jsonl"
    manifest.write_text(
        json.dumps({"utt_id": "<i>u1</i>", "audio_filepath": str(clips[0][0]), "text": XSS_REF, "accent": "<b>x</b>"})
        + "\n"
        + json.dumps({"utt_id": "u2", "audio_filepath": str(clips[1][0]), "text": clips[1][1], "accent": "plain"})
        + "\n"
    )
    with FakeServer([(503, {"error": "warming up"}, 0.0, {}), ok(XSS_HYP)]) as srv:
        cfg = _config_dir(tmp, srv.url)
        recipe = tmp / "remote.yaml"
        recipe.write_text(f"name: remote\ndataset: {{path: {manifest}}}\nmodels: [remote-asr]\nscoring: {{n_boot: 50}}\n")
        env = dict(os.environ, AUDIT_CONFIG_DIR=str(cfg), COLUMNS="200")
        env[KEY_ENV] = SECRET
        audit = Path(sys.executable).with_name("audit")
        proc = subprocess.run(
            [str(audit), "-v", "run", str(recipe), "--out", str(tmp / "run")],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        yield tmp / "run", proc.stdout + proc.stderr, srv


def test_api_key_never_written_or_logged(cli_run: tuple[Path, str, FakeServer], record_property: Callable[[str, Any], None]) -> None:
    run_dir, output, srv = cli_run
    assert srv.requests and all(r.get("authorization") == f"Bearer {SECRET}" for r in srv.requests)
    assert "retry" in output.lower()  # the debug log did run (and still holds no key)
    assert SECRET not in output
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.name == "summary.json" for p in files) and any(p.suffix == ".html" for p in files)
    leaks = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert leaks == []
    summary = json.loads((run_dir / "summary.json").read_text())
    assert KEY_ENV in json.dumps(summary)  # the variable's name is recorded, its value is not
    record_property("security_check", f"API key absent from {len(files)} run files and the logs")


def test_report_html_escapes_hostile_text(cli_run: tuple[Path, str, FakeServer]) -> None:
    run_dir, _, _ = cli_run
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    for raw in ("<script>alert", "<img src=x", "<i>u1</i>", "<b>x</b>"):
        assert raw not in html, raw
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # the hostile hypothesis is shown, escaped
    assert (
        "&lt;script&gt;alert(&quot;ref&quot;)&lt;/script&gt;" in html or "&lt;script&gt;alert(&#x27;ref" in html or "&lt;script&gt;" in html
    )
    import pandas as pd

    rows = pd.read_parquet(run_dir / "utterances.parquet").set_index("utt_id")
    assert rows.loc["<i>u1</i>", "ref_raw"] == XSS_REF and rows.loc["<i>u1</i>", "hyp_raw"] == XSS_HYP  # stored raw


def test_report_built_by_report_cli_escapes(cli_run: tuple[Path, str, FakeServer], tmp_path: Path) -> None:
    from audits.reports.build import build_report

    run_dir, _, _ = cli_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    paths = build_report([copy], None, worst=5, exports=False)
    html = Path(paths["report_html"]).read_text(encoding="utf-8")
    assert "<script>alert" not in html and "<img src=x" not in html and "&lt;img src=x" in html
