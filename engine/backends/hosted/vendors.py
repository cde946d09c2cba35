"""Hosted speech-to-text vendors, each written from the vendor's public API reference.

Every class turns one 16 kHz mono WAV into text with the vendor's documented request, auth header
and response shape; limits, retries, caching and cost accounting live in ``base.py``/``http.py``.
Request fields beyond the ones modelled here go in the option ``params`` (merged into the query
string or JSON body as the vendor expects), and change the cache key.

The request fields that change words are set as the Open ASR Leaderboard's provider for the
vendor sets them (api/providers/*_provider.py, the robustness study's protocol); docs/hosted.md
lists every field with its source.

backend: request; auth header

- deepgram: POST /v1/listen?model=...&language=...&smart_format=... with the audio as the body; ``Authorization: Token KEY``
- assemblyai: POST /v2/upload, POST /v2/transcript {audio_url, speech_models, language_code}, poll GET /v2/transcript/{id};
  ``authorization: KEY``
- speechmatics: POST /v2/jobs (multipart config {type, transcription_config {language, operating_point,
  enable_entities}} + data_file), poll GET /v2/jobs/{id}, GET .../transcript?format=txt; ``Authorization: Bearer KEY``
- elevenlabs: POST /v1/speech-to-text (multipart model_id, tag_audio_events, language_code, file); ``xi-api-key: KEY``
- gladia: POST /v2/upload, POST /v2/pre-recorded {audio_url, model, language_config {languages}}, poll
  GET /v2/pre-recorded/{id}; ``x-gladia-key: KEY``
- google-stt-v2: POST /v2/projects/{p}/locations/{l}/recognizers/_:recognize (base64 content);
  ``x-goog-api-key: KEY`` or ``Authorization: Bearer TOKEN``
- azure-fast: POST /speechtotext/transcriptions:transcribe?api-version=2025-10-15 (multipart definition {locales,
  profanityFilterMode, enhancedMode} + audio); ``Ocp-Apim-Subscription-Key: KEY``
- openai-compatible: POST /v1/audio/transcriptions (multipart model + file), OpenAI or a self-hosted server;
  ``Authorization: Bearer KEY`` (none when ``api_key_env: ""``)
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.backends.hosted.base import HostedASRBackend, HostedOptions, params_option
from engine.backends.hosted.http import HostedClient, multipart
from engine.errors import ConfigError, HostedRequestError
from engine.options import option


def _dig(data: Any, *path: Any) -> Any:
    """``data[p0][p1]...`` or None when any step is missing or of the wrong kind."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(data, list) or len(data) <= step:
                return None
        elif not isinstance(data, dict):
            return None
        data = data[step] if isinstance(step, int) else data.get(step)
    return data


def _text(value: Any, vendor: str, where: str, redact: Any) -> str:
    if not isinstance(value, str):
        raise HostedRequestError(
            f"{vendor}: the answer has no transcript string at {where}: {redact(json.dumps(value, default=str))[:200]}"
        )
    return value.strip()


def _params(options: Any) -> dict[str, Any]:
    """The vendor options' ``params`` (extra request fields), a fresh dict ({} when null)."""
    return dict(options.params or {})


@dataclass(frozen=True)
class DeepgramOptions(HostedOptions):
    """Deepgram's options: the common hosted ones, ``smart_format`` and ``params`` (query fields)."""

    smart_format: bool = option(True, "Deepgram's smart formatting (numbers, punctuation), as the leaderboard's provider sends it")
    params: dict[str, Any] | None = params_option()


@dataclass(frozen=True)
class SpeechmaticsOptions(HostedOptions):
    """Speechmatics' options: the common hosted ones, ``enable_entities`` and ``params`` (transcription_config fields)."""

    enable_entities: bool = option(True, "numbers, dates and currencies in written form, as the leaderboard's provider sends it")
    params: dict[str, Any] | None = params_option()


@dataclass(frozen=True)
class ElevenLabsOptions(HostedOptions):
    """ElevenLabs' options: the common hosted ones, ``tag_audio_events`` and ``params`` (multipart fields)."""

    tag_audio_events: bool = option(False, "audio-event tags such as (laughter) in the transcript")
    params: dict[str, Any] | None = params_option()


@dataclass(frozen=True)
class GoogleSTTv2Options(HostedOptions):
    """Google Speech-to-Text v2's options: the common hosted ones, project, location, auth, recognizer and ``params``."""

    project: str | None = option(None, "Google Cloud project; null: $GOOGLE_CLOUD_PROJECT")
    location: str = option("us", "API location (us, eu, global, a region); builds the host")
    auth: Literal["api-key", "bearer"] = option("api-key", "the key is an API key (x-goog-api-key) or an OAuth access token (Bearer)")
    recognizer: str = option("_", "recognizer id; _: the default recognizer")
    params: dict[str, Any] | None = params_option()


@dataclass(frozen=True)
class AzureFastOptions(HostedOptions):
    """Azure fast transcription's options: the common hosted ones, region, API version, profanity filter, enhanced mode, ``params``."""

    region: str = option("eastus", "your Speech resource's region (builds the host)")
    api_version: str = option("2025-10-15", "the API version sent as api-version")
    profanity_filter_mode: Literal["None", "Masked", "Removed", "Tags"] = option(
        "None", "profanityFilterMode (None: off, as the leaderboard sends it)"
    )
    enhanced_mode: bool = option(True, "enhanced mode with task transcribe")
    prompt: tuple[str, ...] | None = option(None, "enhanced-mode instructions (a non-empty list of strings); needs enhanced_mode")
    params: dict[str, Any] | None = params_option()

    def validate(self, where: str) -> None:
        super().validate(where)
        at = self.key_path(where, "prompt")
        if self.prompt is not None and not (self.prompt and all(self.prompt)):
            raise ConfigError(f"{at}: expected a non-empty list of non-empty instruction strings, got {list(self.prompt)!r}")
        if self.prompt is not None and not self.enhanced_mode:
            raise ConfigError(f"{at}: needs enhanced_mode: true")


@dataclass(frozen=True)
class OpenAICompatibleOptions(HostedOptions):
    """The OpenAI-compatible backend's options: the common hosted ones, prompt, temperature, ``batch_size`` and ``params``."""

    prompt: str | None = option(None, "the transcription prompt field; null: none sent")
    temperature: float | None = option(None, "the temperature field; null: none sent", ge=0, le=1)
    batch_size: int | None = option(None, "older name of max_concurrency (sets it when max_concurrency is not given)", ge=1, le=1_024)
    params: dict[str, Any] | None = params_option()


class DeepgramBackend(HostedASRBackend):
    """Deepgram pre-recorded transcription (Nova-3 and others): one synchronous request per clip."""

    name = "deepgram"
    vendor = "deepgram"
    default_base_url = "https://api.deepgram.com"
    default_key_env = "DEEPGRAM_API_KEY"
    OPTIONS = DeepgramOptions
    options: DeepgramOptions

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Token {key}"}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        query = {
            "model": self.options.model,
            "smart_format": self.options.smart_format,
            "language": self.options.language,
            **_params(self.options),
        }
        data = client.request("POST", "/v1/listen", body=wav, content_type="audio/wav", query=query).json(client.redact)
        text = _text(
            _dig(data, "results", "channels", 0, "alternatives", 0, "transcript"),
            self.vendor,
            "results.channels[0].alternatives[0].transcript",
            client.redact,
        )
        return text, data


class AssemblyAIBackend(HostedASRBackend):
    """AssemblyAI async transcription: upload the file, create a transcript, poll until completed."""

    name = "assemblyai"
    vendor = "assemblyai"
    default_base_url = "https://api.assemblyai.com"
    default_key_env = "ASSEMBLYAI_API_KEY"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": key}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        up = client.request("POST", "/v2/upload", body=wav, content_type="application/octet-stream").json(client.redact)
        upload_url = _dig(up, "upload_url")
        if not isinstance(upload_url, str):
            raise HostedRequestError(f"assemblyai: upload answer has no 'upload_url': {client.redact(str(up))[:200]}")
        body: dict[str, Any] = {"audio_url": upload_url, "speech_models": [self.options.model]}
        if self.options.language:
            body["language_code"] = self.options.language
        body.update(_params(self.options))
        job = client.request("POST", "/v2/transcript", body=json.dumps(body).encode(), content_type="application/json").json(client.redact)
        job_id = _dig(job, "id")
        if not isinstance(job_id, str) or not job_id:
            raise HostedRequestError(f"assemblyai: transcript answer has no 'id': {client.redact(str(job))[:200]}")

        def done(data: Any) -> Any:
            status = _dig(data, "status")
            if status == "completed":
                return data
            if status == "error":
                raise HostedRequestError(f"assemblyai: transcript {job_id} failed: {client.redact(str(_dig(data, 'error')))[:300]}")
            if status not in ("queued", "processing"):
                raise HostedRequestError(f"assemblyai: transcript {job_id} has unknown status {status!r}")
            return None

        data = self.poll(client, f"/v2/transcript/{job_id}", done, f"transcript {job_id}")
        return _text(_dig(data, "text"), self.vendor, "text", client.redact), data


class SpeechmaticsBackend(HostedASRBackend):
    """Speechmatics batch jobs: submit config + file, poll the job, fetch the plain-text transcript.

    ``model`` is the operating point (``enhanced`` or ``standard``). ``enable_entities`` (on, as the
    leaderboard's provider sends it) writes numbers, dates and currencies in written form.
    """

    name = "speechmatics"
    vendor = "speechmatics"
    default_base_url = "https://asr.api.speechmatics.com"
    default_key_env = "SPEECHMATICS_API_KEY"
    OPTIONS = SpeechmaticsOptions
    options: SpeechmaticsOptions

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        tc = {
            "language": self.options.language or "en",
            "operating_point": self.options.model,
            "enable_entities": self.options.enable_entities,
            **_params(self.options),
        }
        config = json.dumps({"type": "transcription", "transcription_config": tc})
        body, ctype = multipart([("config", config, None, None), ("data_file", wav, "audio.wav", "audio/wav")])
        job = client.request("POST", "/v2/jobs", body=body, content_type=ctype).json(client.redact)
        job_id = _dig(job, "id")
        if not isinstance(job_id, str) or not job_id:
            raise HostedRequestError(f"speechmatics: job answer has no 'id': {client.redact(str(job))[:200]}")

        def done(data: Any) -> Any:
            status = _dig(data, "job", "status")
            if status == "done":
                return data
            if status in ("rejected", "deleted", "expired"):
                raise HostedRequestError(f"speechmatics: job {job_id} is {status}: {client.redact(str(_dig(data, 'job', 'errors')))[:300]}")
            if status != "running":
                raise HostedRequestError(f"speechmatics: job {job_id} has unknown status {status!r}")
            return None

        self.poll(client, f"/v2/jobs/{job_id}", done, f"job {job_id}")
        resp = client.request("GET", f"/v2/jobs/{job_id}/transcript", query={"format": "txt"}, headers={"Accept": "text/plain"})
        text = resp.body.decode("utf-8", "replace")
        return " ".join(text.split()), {"id": job_id, "format": "txt", "transcript": text}


class ElevenLabsBackend(HostedASRBackend):
    """ElevenLabs speech-to-text (Scribe): one synchronous multipart request per clip.

    Audio-event tags ("(laughter)") are off by default here; the study's entry turns them on, as
    the leaderboard's provider does (both normalizers drop parenthesised tags before scoring).
    """

    name = "elevenlabs"
    vendor = "elevenlabs"
    default_base_url = "https://api.elevenlabs.io"
    default_key_env = "ELEVENLABS_API_KEY"
    OPTIONS = ElevenLabsOptions
    options: ElevenLabsOptions

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"xi-api-key": key}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        fields: list[tuple[str, str | bytes, str | None, str | None]] = [
            ("model_id", str(self.options.model), None, None),
            ("tag_audio_events", "true" if self.options.tag_audio_events else "false", None, None),
        ]
        if self.options.language:
            fields.append(("language_code", str(self.options.language), None, None))
        fields += [(k, json.dumps(v) if not isinstance(v, str) else v, None, None) for k, v in _params(self.options).items()]
        fields.append(("file", wav, "audio.wav", "audio/wav"))
        body, ctype = multipart(fields)
        data = client.request("POST", "/v1/speech-to-text", body=body, content_type=ctype).json(client.redact)
        return _text(_dig(data, "text"), self.vendor, "text", client.redact), data


class GladiaBackend(HostedASRBackend):
    """Gladia pre-recorded v2: upload, create the job (``model`` names the Solaria model), poll it by
    id on the configured host.

    The job's ``result_url`` is not followed blindly: polling always goes to base_url (so the key
    never leaves that origin).
    """

    name = "gladia"
    vendor = "gladia"
    default_base_url = "https://api.gladia.io"
    default_key_env = "GLADIA_API_KEY"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-gladia-key": key}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        body, ctype = multipart([("audio", wav, "audio.wav", "audio/wav")])
        up = client.request("POST", "/v2/upload", body=body, content_type=ctype).json(client.redact)
        audio_url = _dig(up, "audio_url")
        if not isinstance(audio_url, str):
            raise HostedRequestError(f"gladia: upload answer has no 'audio_url': {client.redact(str(up))[:200]}")
        req: dict[str, Any] = {"audio_url": audio_url, "model": str(self.options.model)}
        if self.options.language:
            req["language_config"] = {"languages": [self.options.language]}
        req.update(_params(self.options))
        job = client.request("POST", "/v2/pre-recorded", body=json.dumps(req).encode(), content_type="application/json").json(client.redact)
        job_id = _dig(job, "id")
        if not isinstance(job_id, str) or not job_id:
            raise HostedRequestError(f"gladia: pre-recorded answer has no 'id': {client.redact(str(job))[:200]}")

        def done(data: Any) -> Any:
            status = _dig(data, "status")
            if status == "done":
                return data
            if status == "error":
                raise HostedRequestError(f"gladia: job {job_id} failed (error_code {_dig(data, 'error_code')})")
            if status not in ("queued", "processing"):
                raise HostedRequestError(f"gladia: job {job_id} has unknown status {status!r}")
            return None

        data = self.poll(client, f"/v2/pre-recorded/{job_id}", done, f"job {job_id}")
        where = "result.transcription.full_transcript"
        return _text(_dig(data, "result", "transcription", "full_transcript"), self.vendor, where, client.redact), data


class GoogleSTTv2Backend(HostedASRBackend):
    """Google Cloud Speech-to-Text v2 ``recognize`` (Chirp 3 is model ``chirp_3``; clips under 60 s).

    Authentication: an API key in ``x-goog-api-key`` (``auth: api-key``, the default) or an OAuth
    access token (``auth: bearer``, e.g. from ``gcloud auth print-access-token``; it expires after
    an hour). The project comes from option ``project`` or ``$GOOGLE_CLOUD_PROJECT``.
    """

    name = "google-stt-v2"
    vendor = "google"
    default_key_env = "GOOGLE_API_KEY"
    OPTIONS = GoogleSTTv2Options
    options: GoogleSTTv2Options

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Any:
        base = super().check_weights(options)
        if base.runnable and not (cls.parse_options(options).project or os.environ.get("GOOGLE_CLOUD_PROJECT")):
            from engine.backends.availability import Availability

            return Availability(False, "set option 'project' or the environment variable GOOGLE_CLOUD_PROJECT")
        return base

    def resolve_base_url(self, options: Any) -> str:
        location = options.location or "global"
        return "https://speech.googleapis.com" if location == "global" else f"https://{location}-speech.googleapis.com"

    def auth_headers(self, key: str) -> dict[str, str]:
        if self.options.auth == "bearer":
            return {"Authorization": f"Bearer {key}"}
        return {"x-goog-api-key": key}

    def request_options(self) -> dict[str, Any]:
        opts = super().request_options()
        opts.pop("auth", None)
        return opts

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        project = self.options.project or os.environ.get("GOOGLE_CLOUD_PROJECT")
        if not project:
            raise ConfigError(f"{self.name}: set option 'project' or the environment variable GOOGLE_CLOUD_PROJECT")
        config: dict[str, Any] = {
            "autoDecodingConfig": {},
            "model": self.options.model,
            "languageCodes": [self.options.language or "en-US"],
        }
        config.update(_params(self.options))
        body = json.dumps({"config": config, "content": base64.b64encode(wav).decode()}).encode()
        path = f"/v2/projects/{project}/locations/{self.options.location}/recognizers/{self.options.recognizer}:recognize"
        data = client.request("POST", path, body=body, content_type="application/json").json(client.redact)
        results = _dig(data, "results")
        if results is None and isinstance(data, dict):
            return "", data  # silence: the API leaves 'results' out
        if not isinstance(results, list):
            raise HostedRequestError(f"google: 'results' is not a list: {client.redact(str(data))[:200]}")
        parts = [
            _text(_dig(r, "alternatives", 0, "transcript"), self.vendor, f"results[{i}].alternatives[0].transcript", client.redact)
            for i, r in enumerate(results)
            if _dig(r, "alternatives")
        ]
        return " ".join(p for p in parts if p), data


class AzureFastBackend(HostedASRBackend):
    """Azure AI Speech fast transcription: one synchronous multipart request (definition + audio).

    The service picks its model; ``model`` names it for the record. ``region`` builds the host (it
    must be your Speech resource's region). As the leaderboard's provider sends it: API version
    2025-10-15, profanity filter off (``profanityFilterMode: None``; the service masks by default),
    enhanced mode on with task ``transcribe``; ``prompt`` adds enhanced-mode instructions.
    """

    name = "azure-fast"
    vendor = "azure"
    default_key_env = "AZURE_SPEECH_KEY"
    OPTIONS = AzureFastOptions
    options: AzureFastOptions

    def resolve_base_url(self, options: Any) -> str:
        return f"https://{options.region or 'eastus'}.api.cognitive.microsoft.com"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Ocp-Apim-Subscription-Key": key}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        definition: dict[str, Any] = {
            "locales": [self.options.language or "en-US"],
            "profanityFilterMode": self.options.profanity_filter_mode,
        }
        if self.options.enhanced_mode:
            definition["enhancedMode"] = {"enabled": True, "task": "transcribe"}
            if self.options.prompt:
                definition["enhancedMode"]["prompt"] = list(self.options.prompt)
        definition.update(_params(self.options))
        body, ctype = multipart(
            [("definition", json.dumps(definition), None, "application/json"), ("audio", wav, "audio.wav", "audio/wav")]
        )
        data = client.request(
            "POST",
            "/speechtotext/transcriptions:transcribe",
            body=body,
            content_type=ctype,
            query={"api-version": self.options.api_version},
        ).json(client.redact)
        phrases = _dig(data, "combinedPhrases")
        if not isinstance(phrases, list):
            raise HostedRequestError(f"azure: the answer has no 'combinedPhrases' list: {client.redact(str(data))[:200]}")
        texts = [_text(_dig(p, "text"), self.vendor, f"combinedPhrases[{i}].text", client.redact) for i, p in enumerate(phrases)]
        return " ".join(t for t in texts if t), data


class OpenAICompatibleBackend(HostedASRBackend):
    """OpenAI's audio transcription API and the self-hosted servers that speak it (vLLM, speaches,
    LocalAI...): one multipart ``POST {base_url}/v1/audio/transcriptions`` per clip.

    A base_url that already ends in ``/v1`` is not doubled. ``api_key_env: ""`` sends no key (a
    local server without auth). ``batch_size`` is the older name of ``max_concurrency`` (clips in
    flight at once) and still sets it when ``max_concurrency`` is not given.
    """

    name = "openai-compatible"
    vendor = "openai-compatible"
    default_base_url = "https://api.openai.com"
    default_key_env = "OPENAI_API_KEY"
    key_optional = True
    OPTIONS = OpenAICompatibleOptions
    options: OpenAICompatibleOptions

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if self.options.batch_size is not None and "max_concurrency" not in options:
            self.options = self.options.replace(max_concurrency=self.options.batch_size)

    def request_options(self) -> dict[str, Any]:
        opts = super().request_options()
        opts.pop("batch_size", None)  # concurrency, not part of the question
        return opts

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        path = "/audio/transcriptions" if client.base_url.endswith("/v1") else "/v1/audio/transcriptions"
        fields: list[tuple[str, str | bytes, str | None, str | None]] = [
            ("model", str(self.options.model), None, None),
            ("response_format", "json", None, None),
        ]
        for key, value in (("language", self.options.language), ("prompt", self.options.prompt), ("temperature", self.options.temperature)):
            if value is not None:
                fields.append((key, str(value), None, None))
        fields += [(k, json.dumps(v) if not isinstance(v, str) else v, None, None) for k, v in _params(self.options).items()]
        fields.append(("file", wav, "audio.wav", "audio/wav"))
        body, ctype = multipart(fields)
        data = client.request("POST", path, body=body, content_type=ctype).json(client.redact)
        return _text(_dig(data, "text"), self.vendor, "text", client.redact), data
