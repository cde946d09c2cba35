"""Two hosted systems of the study line-up, each written from the vendor's public API reference.

backend: request; auth header; transcript field

- modulate: POST /api/{model} on platform.modulate.ai, e.g. velma-2-stt-batch-english-vfast (the
  leaderboard's English endpoint) with the multipart part ``upload_file`` only, docs.modulate.ai;
  ``X-API-Key: KEY``; ``text``
- smallest: POST /waves/v1/pulse/get_text?language=... (raw audio, application/octet-stream), docs.smallest.ai;
  ``Authorization: Bearer KEY``; ``transcription``

Both answer synchronously, one request per clip. Limits, retries, caching, secret scrubbing and
cost accounting are the shared ones of ``base.py`` and ``http.py``. Extra request fields go in the
option ``params`` (multipart fields for Modulate, query parameters for Smallest).
"""

from __future__ import annotations

from typing import Any

from engine.backends.hosted.base import HostedASRBackend
from engine.backends.hosted.http import HostedClient, multipart
from engine.backends.hosted.vendors import _dig, _params, _text


class ModulateBackend(HostedASRBackend):
    """Modulate Velma-2 STT: one multipart upload per clip to the endpoint named by ``model``.

    The study's entry uses the English VFast endpoint the leaderboard's provider calls
    (``velma-2-stt-batch-english-vfast``: transcript only, no options). On the multilingual
    ``velma-2-stt-batch`` endpoint enrichments (emotion, accent, deepfake score, PII tagging) and
    diarization stay off unless ``params`` turns them on: PII tags would rewrite the transcript.
    """

    name = "modulate"
    vendor = "modulate"
    default_base_url = "https://platform.modulate.ai"
    default_key_env = "MODULATE_API_KEY"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"X-API-Key": key}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        fields: list[tuple[str, str | bytes, str | None, str | None]] = [
            (k, v if isinstance(v, str) else str(v).lower(), None, None) for k, v in _params(self.options).items()
        ]
        fields.append(("upload_file", wav, "audio.wav", "audio/wav"))
        body, ctype = multipart(fields)
        path = f"/api/{self.options.model}"
        data = client.request("POST", path, body=body, content_type=ctype).json(client.redact)
        return _text(_dig(data, "text"), self.vendor, "text", client.redact), data


class SmallestBackend(HostedASRBackend):
    """Smallest AI Pulse pre-recorded transcription: raw WAV bytes, settings as query parameters."""

    name = "smallest"
    vendor = "smallest"
    default_base_url = "https://api.smallest.ai"
    default_key_env = "SMALLEST_API_KEY"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def _recognize(self, client: HostedClient, wav: bytes, duration_s: float) -> tuple[str, Any]:
        query = {"language": self.options.language or "en", **_params(self.options)}
        path = f"/waves/v1/{self.options.model}/get_text"
        data = client.request("POST", path, body=wav, content_type="application/octet-stream", query=query).json(client.redact)
        return _text(_dig(data, "transcription"), self.vendor, "transcription", client.redact), data
