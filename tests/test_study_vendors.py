"""The nine hosted systems of the study line-up send the request the study sent.

Each ``rweq`` hosted registry entry is built as the registry builds it, pointed at its local fake
(tests/fake_vendors.py, which checks every documented field: an unexpected, missing or mistyped
field is answered 400), and its billable request is compared with the request of the vendor's API
reference and the Open ASR Leaderboard's provider for that vendor (api/providers/*_provider.py,
the study's protocol): endpoint, API version, model parameter, language, and the options that
change words (docs/hosted.md lists the same table with its sources). The public endpoint each
entry would call without ``base_url`` is checked too, and a request with a field the API does not
document is refused by the fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends import ASR_BACKENDS
from engine.errors import BackendUnavailable, ConfigError, HostedRequestError
from engine.model_registry import load_model_registry
from tests.fake_vendors import KEY_ENV, VENDORS, FakeVendor, options_for

KEY = "sk-study-test-0123456789"

#: registry entry -> (fake vendor, route of the billable request, the expected request)
STUDY_REQUESTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "elevenlabs-scribe-v2": (
        "elevenlabs",
        "convert",
        {
            "path": "/v1/speech-to-text",
            "query": {},
            "form": {"model_id": "scribe_v2", "tag_audio_events": "true", "language_code": "en"},
            "files": ["file"],
        },
    ),
    "speechmatics-enhanced": (
        "speechmatics",
        "jobs",
        {
            "path": "/v2/jobs",
            "query": {},
            "files": ["data_file"],
            "json": {
                "type": "transcription",
                "transcription_config": {"language": "en", "operating_point": "enhanced", "enable_entities": True},
            },
        },
    ),
    "assemblyai-universal-3-pro": (
        "assemblyai",
        "transcript",
        {"path": "/v2/transcript", "query": {}, "json": {"speech_models": ["universal-3-pro"], "language_code": "en"}},
    ),
    "deepgram-nova-3": (
        "deepgram",
        "listen",
        {"path": "/v1/listen", "query": {"model": ["nova-3"], "language": ["en"], "smart_format": ["true"]}},
    ),
    "modulate-velma-2": (
        "modulate",
        "stt",
        {"path": "/api/velma-2-stt-batch-english-vfast", "query": {}, "form": {}, "files": ["upload_file"]},
    ),
    "gladia-solaria": (
        "gladia",
        "prerecorded",
        {"path": "/v2/pre-recorded", "query": {}, "json": {"model": "solaria-1", "language_config": {"languages": ["en"]}}},
    ),
    "smallest-pulse": ("smallest", "get_text", {"path": "/waves/v1/pulse/get_text", "query": {"language": ["en"]}}),
    "google-chirp-3": (
        "google",
        "recognize",
        {
            "path": "/v2/projects/test-project/locations/us/recognizers/_:recognize",
            "query": {},
            "json": {"config": {"autoDecodingConfig": {}, "model": "chirp_3", "languageCodes": ["en-US"]}},
        },
    ),
    "azure-speech": (
        "azure",
        "transcribe",
        {
            "path": "/speechtotext/transcriptions:transcribe",
            "query": {"api-version": ["2025-10-15"]},
            "form": {},
            "files": ["definition", "audio"],
            "json": {"locales": ["en-US"], "profanityFilterMode": "None", "enhancedMode": {"enabled": True, "task": "transcribe"}},
        },
    ),
}

#: registry entry -> the public endpoint it calls (host; the API version rides in the path or query)
PUBLIC_HOSTS = {
    "elevenlabs-scribe-v2": "https://api.elevenlabs.io",
    "speechmatics-enhanced": "https://asr.api.speechmatics.com",
    "assemblyai-universal-3-pro": "https://api.assemblyai.com",
    "deepgram-nova-3": "https://api.deepgram.com",
    "modulate-velma-2": "https://platform.modulate.ai",
    "gladia-solaria": "https://api.gladia.io",
    "smallest-pulse": "https://api.smallest.ai",
    "google-chirp-3": "https://us-speech.googleapis.com",
    "azure-speech": "https://northeurope.api.cognitive.microsoft.com",
}


class _Fakes(dict[str, FakeVendor]):
    """A fake per vendor, started when a test first asks for it (each one takes a moment to stop)."""

    def __missing__(self, vendor: str) -> FakeVendor:
        self[vendor] = FakeVendor(vendor, KEY)
        return self[vendor]


@pytest.fixture()
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, FakeVendor]]:
    out = _Fakes()
    for v in VENDORS:
        monkeypatch.setenv(KEY_ENV[v], KEY)
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    yield out
    for f in out.values():
        f.close()


def _clip() -> np.ndarray:
    t = np.arange(16000, dtype=np.float32) / 16000
    return (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def _study_backend(name: str, fake: FakeVendor, **extra: Any) -> Any:
    entry = load_model_registry()[name]
    options = {**entry.spec().options, **{k: v for k, v in options_for(fake).items() if k != "model"}, **extra}
    if fake.vendor != "google":
        options.pop("project", None)
    backend = ASR_BACKENDS.get(entry.backend)(**options)
    backend.load()
    return backend


def test_the_study_entries_are_the_nine_hosted_rows() -> None:
    hosted = {n for n, e in load_model_registry().items() if "rweq" in e.tags and e.family == "hosted"}
    assert hosted == set(STUDY_REQUESTS) == set(PUBLIC_HOSTS)


@pytest.mark.parametrize("name", sorted(STUDY_REQUESTS))
def test_each_study_entry_sends_the_documented_request(name: str, fakes: dict[str, FakeVendor]) -> None:
    vendor, route, expected = STUDY_REQUESTS[name]
    fake = fakes[vendor]
    backend = _study_backend(name, fake)
    assert backend.transcribe_batch([_clip()]) == ["hello world"]
    assert fake.violations == []  # every field documented, none missing, every type right
    (req,) = [r for rt, r in fake.seen if rt == route]
    assert req.path == expected["path"] and req.query == expected["query"]
    if "form" in expected:  # the multipart text fields, exactly
        files = set(expected["files"])
        assert {p.name: p.text for p in req.parts if p.name not in files} == expected["form"]
        assert [p.name for p in req.parts if p.name in files] == [n for n in expected["files"] if n in req.form]
    if "json" in expected:
        got = dict(req.json)
        got.pop("audio_url", None)  # the upload's URL, per request
        got.pop("content", None)  # the base64 audio
        assert got == expected["json"]
    assert KEY not in json.dumps(backend.info().as_dict())


@pytest.mark.parametrize("name", sorted(PUBLIC_HOSTS))
def test_each_study_entry_calls_the_vendors_public_endpoint(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = load_model_registry()[name]
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    backend = ASR_BACKENDS.get(entry.backend)(**entry.spec().options)
    assert backend.options.base_url == PUBLIC_HOSTS[name]


def test_a_field_the_api_does_not_document_is_refused(fakes: dict[str, FakeVendor]) -> None:
    fake = fakes["deepgram"]
    backend = _study_backend("deepgram-nova-3", fake, params={"smartformat": True}, max_retries=0)
    with pytest.raises(HostedRequestError, match="400"):
        backend.transcribe_batch([_clip()])
    assert fake.violations == [("listen", ["query.smartformat: not a documented field"])]


def test_a_missing_or_mistyped_field_is_refused(fakes: dict[str, FakeVendor]) -> None:
    fake = fakes["azure"]
    backend = _study_backend("azure-speech", fake, api_version="2024-11-15", max_retries=0)  # enhanced mode is 2025-10-15 only
    with pytest.raises(HostedRequestError, match="400"):
        backend.transcribe_batch([_clip()])
    assert fake.violations == [("transcribe", ["definition.enhancedMode: only in api-version 2025-10-15"])]
    gladia = fakes["gladia"]
    backend = _study_backend("gladia-solaria", gladia, params={"language_config": {"languages": "en"}}, max_retries=0)
    with pytest.raises(HostedRequestError, match="400"):
        backend.transcribe_batch([_clip()])
    assert "body.language_config languages must be a list" in json.dumps(gladia.violations)


def test_word_changing_options_are_typed(fakes: dict[str, FakeVendor]) -> None:
    with pytest.raises(ConfigError, match=r"elevenlabs backend options\.tag_audio_events: expected a boolean .*got str 'false'"):
        ASR_BACKENDS.get("elevenlabs")(model="scribe_v2", tag_audio_events="false")
    with pytest.raises(ConfigError, match=r"azure-fast backend options\.profanity_filter_mode: 'off' is not allowed.*one of None, Masked"):
        ASR_BACKENDS.get("azure-fast")(model="azure-speech", profanity_filter_mode="off")
    with pytest.raises(ConfigError, match=r"azure-fast backend options\.prompt: expected a list"):
        ASR_BACKENDS.get("azure-fast")(model="azure-speech", prompt="Output must be in lexical format.")
    with pytest.raises(ConfigError, match=r"azure-fast backend options\.prompt: needs enhanced_mode: true"):
        ASR_BACKENDS.get("azure-fast")(model="azure-speech", prompt=["x"], enhanced_mode=False)
    fake = fakes["azure"]
    backend = _study_backend("azure-speech", fake, prompt=["Output must be in lexical format."])
    backend.transcribe_batch([_clip()])
    (req,) = [r for rt, r in fake.seen if rt == "transcribe"]
    assert req.json["enhancedMode"] == {"enabled": True, "task": "transcribe", "prompt": ["Output must be in lexical format."]}


def test_study_vendor_without_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMALLEST_API_KEY", raising=False)
    avail = ASR_BACKENDS.get("smallest").availability({"model": "pulse"})
    assert not avail.runnable and "SMALLEST_API_KEY" in avail.reason
    with pytest.raises(BackendUnavailable, match="SMALLEST_API_KEY"):
        ASR_BACKENDS.get("smallest")(model="pulse").load()
