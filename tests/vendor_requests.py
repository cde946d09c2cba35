"""Each hosted vendor's documented request, field by field, as the fake servers check it.

For every route a fake serves, this module says which query parameters, headers, JSON fields and
multipart parts the vendor's API reference documents, which are required, and what each value
must be (type, allowed values). ``violations(vendor, route, request)`` lists everything a request
gets wrong: a missing required field, a field the API does not document (a typo or an option the
vendor would reject or silently ignore), a value of the wrong type, a repeated parameter, a
missing or wrong auth header, a body that is not the audio. The fakes answer a request with any
violation with HTTP 400 and keep the list, so a test fails on the first wrong field.

Sources (as read for this engine; docs/hosted.md cites them per vendor): Deepgram pre-recorded
``/v1/listen``; AssemblyAI ``/v2/upload`` and ``/v2/transcript``; Speechmatics batch ``/v2/jobs``;
ElevenLabs ``/v1/speech-to-text`` (elevenlabs-python's request); Gladia ``/v2/upload`` and
``/v2/pre-recorded``; Google Speech-to-Text v2 ``recognize``; Azure fast transcription
(``transcriptions:transcribe``, API versions 2024-11-15 and 2025-10-15); Modulate Velma-2 batch
endpoints; Smallest AI Pulse pre-recorded ``/waves/v1/pulse/get_text``; OpenAI
``/v1/audio/transcriptions``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Part:
    """One part of a multipart/form-data body."""

    name: str
    filename: str | None
    content_type: str | None
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclass
class Request:
    """One request as the fake received it, parsed."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    parts: list[Part] = field(default_factory=list)
    json: Any = None

    @property
    def form(self) -> dict[str, Part]:
        return {p.name: p for p in self.parts}


def parse_multipart(body: bytes, content_type: str) -> list[Part]:
    """The parts of a multipart/form-data body; ValueError when it is not one."""
    m = re.search(r"boundary=\"?([^\";]+)\"?", content_type or "")
    if not content_type.startswith("multipart/form-data") or not m:
        raise ValueError(f"Content-Type is {content_type!r}, not multipart/form-data with a boundary")
    delimiter = b"--" + m.group(1).encode()
    chunks = body.split(delimiter)
    if len(chunks) < 3 or not chunks[-1].startswith(b"--"):
        raise ValueError("the multipart body does not end with its closing boundary")
    parts = []
    for chunk in chunks[1:-1]:
        if not chunk.startswith(b"\r\n") or not chunk.endswith(b"\r\n") or b"\r\n\r\n" not in chunk:
            raise ValueError("a multipart part is malformed")
        head, data = chunk[2:-2].split(b"\r\n\r\n", 1)
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in head.decode().split("\r\n"))}
        disp = headers.get("content-disposition", "")
        name = re.search(r'\bname="([^"]*)"', disp)
        filename = re.search(r'\bfilename="([^"]*)"', disp)
        if not disp.startswith("form-data") or not name:
            raise ValueError(f"a part has no form-data name: {disp!r}")
        parts.append(Part(name.group(1), filename.group(1) if filename else None, headers.get("content-type"), data))
    return parts


# -- value checks ------------------------------------------------------------------------------


def string(v: Any) -> str | None:
    return None if isinstance(v, str) and v else f"must be a non-empty string, got {v!r}"


def boolean(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"must be a JSON boolean, got {v!r}"


def integer(v: Any) -> str | None:
    return None if isinstance(v, int) and not isinstance(v, bool) else f"must be an integer, got {v!r}"


def bool_text(v: Any) -> str | None:
    return None if v in ("true", "false") else f"must be 'true' or 'false', got {v!r}"


def int_text(v: Any) -> str | None:
    return None if isinstance(v, str) and re.fullmatch(r"-?\d+", v) else f"must be an integer, got {v!r}"


def number_text(lo: float, hi: float) -> Check:
    def check(v: Any) -> str | None:
        try:
            ok = lo <= float(v) <= hi
        except (TypeError, ValueError):
            ok = False
        return None if ok else f"must be a number in [{lo}, {hi}], got {v!r}"

    return check


def one_of(*allowed: Any) -> Check:
    return lambda v: None if v in allowed else f"must be one of {', '.join(map(repr, allowed))}, got {v!r}"


def list_of(item: Check, non_empty: bool = True) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, list) or (non_empty and not v):
            return f"must be a {'non-empty ' if non_empty else ''}list, got {v!r}"
        for x in v:
            bad = item(x)
            if bad:
                return f"item {x!r} {bad}"
        return None

    return check


def anything_object(v: Any) -> str | None:
    return None if isinstance(v, dict) else f"must be an object, got {v!r}"


def obj(spec: Mapping[str, tuple[bool, Check]]) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, dict):
            return f"must be an object, got {v!r}"
        bad = fields("", v, spec)
        return "; ".join(bad) if bad else None

    return check


def https(prefix: str) -> Check:
    return lambda v: None if isinstance(v, str) and v.startswith(prefix) else f"must be a URL starting {prefix}, got {v!r}"


def is_wav(data: bytes) -> bool:
    return data[:4] == b"RIFF" and data[8:12] == b"WAVE"


def fields(where: str, given: Mapping[str, Any], spec: Mapping[str, tuple[bool, Check]]) -> list[str]:
    """Unexpected, missing and badly typed fields of ``given`` against ``spec`` (name -> (required, check))."""
    at = f"{where}." if where else ""
    out = [f"{at}{k}: not a documented field" for k in given if k not in spec]
    for k, (required, check) in spec.items():
        if k not in given:
            if required:
                out.append(f"{at}{k}: required, missing")
            continue
        bad = check(given[k])
        if bad:
            out.append(f"{at}{k} {bad}")
    return out


def query(req: Request, spec: Mapping[str, tuple[bool, Check]]) -> list[str]:
    repeated = [f"query {k}: given {len(v)} times" for k, v in req.query.items() if len(v) != 1]
    return repeated + fields("query", {k: v[0] for k, v in req.query.items()}, spec)


def form(req: Request, text: Mapping[str, tuple[bool, Check]], files: Mapping[str, bool], audio_type: str = "audio/wav") -> list[str]:
    """Multipart fields: text parts (no filename) against ``text``; file parts (name -> required) must
    carry a filename, the audio's content type and WAV bytes; no part twice."""
    out = []
    try:
        req.parts = parse_multipart(req.body, req.headers.get("content-type", ""))
    except ValueError as exc:
        return [f"body: {exc}"]
    names = [p.name for p in req.parts]
    out += [f"form {n}: given {names.count(n)} times" for n in sorted(set(names)) if names.count(n) > 1]
    given_text = {p.name: p.text for p in req.parts if p.name not in files}
    out += fields("form", given_text, text)
    out += [f"form {p.name}: a text field must not carry a filename" for p in req.parts if p.name in text and p.filename]
    for name, required in files.items():
        part = req.form.get(name)
        if part is None:
            if required:
                out.append(f"form {name}: required file part, missing")
            continue
        if not part.filename:
            out.append(f"form {name}: a file part needs a filename")
        if part.content_type != audio_type:
            out.append(f"form {name}: content type must be {audio_type}, got {part.content_type!r}")
        if not is_wav(part.data):
            out.append(f"form {name}: not WAV audio")
    return out


def json_body(req: Request, spec: Mapping[str, tuple[bool, Check]]) -> list[str]:
    if req.headers.get("content-type", "").split(";")[0] != "application/json":
        return [f"Content-Type must be application/json, got {req.headers.get('content-type')!r}"]
    try:
        req.json = json.loads(req.body)
    except ValueError:
        return ["body: not JSON"]
    if not isinstance(req.json, dict):
        return ["body: not a JSON object"]
    return fields("body", req.json, spec)


def raw_audio(req: Request, content_type: str) -> list[str]:
    out = (
        []
        if req.headers.get("content-type") == content_type
        else [f"Content-Type must be {content_type}, got {req.headers.get('content-type')!r}"]
    )
    return out + ([] if is_wav(req.body) else ["body: not WAV audio"])


def no_body(req: Request) -> list[str]:
    return ([] if not req.body else ["a GET carries no body"]) + ([] if not req.query else [f"query: not documented here: {req.query}"])


# -- the vendors -------------------------------------------------------------------------------

DEEPGRAM_QUERY = {
    "model": (True, string),
    "language": (False, string),
    "smart_format": (False, bool_text),
    "punctuate": (False, bool_text),
    "profanity_filter": (False, bool_text),
    "diarize": (False, bool_text),
    "numerals": (False, bool_text),
    "filler_words": (False, bool_text),
    "utterances": (False, bool_text),
    "paragraphs": (False, bool_text),
    "detect_language": (False, bool_text),
    "keyterm": (False, string),
    "version": (False, string),
}
ASSEMBLYAI_TRANSCRIPT = {
    "audio_url": (True, https("https://cdn.assemblyai.com/")),
    "speech_models": (True, list_of(one_of("universal-3-pro", "universal-3-5-pro", "universal-2"))),
    "language_code": (False, string),
    "language_detection": (False, boolean),
    "punctuate": (False, boolean),
    "format_text": (False, boolean),
    "disfluencies": (False, boolean),
    "filter_profanity": (False, boolean),
    "speaker_labels": (False, boolean),
    "multichannel": (False, boolean),
    "keyterms_prompt": (False, list_of(string)),
    "prompt": (False, string),
}
SPEECHMATICS_TRANSCRIPTION = {
    "language": (True, string),
    "operating_point": (False, one_of("standard", "enhanced")),
    "enable_entities": (False, boolean),
    "diarization": (False, one_of("none", "speaker", "channel")),
    "output_locale": (False, string),
    "additional_vocab": (False, list_of(anything_object)),
    "punctuation_overrides": (False, anything_object),
    "domain": (False, string),
    "audio_filtering_config": (False, anything_object),
    "transcript_filtering_config": (False, anything_object),
}
SPEECHMATICS_CONFIG = {
    "type": (True, one_of("transcription")),
    "transcription_config": (True, obj(SPEECHMATICS_TRANSCRIPTION)),
    "notification_config": (False, list_of(anything_object)),
    "language_identification_config": (False, anything_object),
    "translation_config": (False, anything_object),
    "output_config": (False, anything_object),
    "summarization_config": (False, anything_object),
}
ELEVENLABS_FORM = {
    "model_id": (True, one_of("scribe_v1", "scribe_v2")),
    "language_code": (False, string),
    "tag_audio_events": (False, bool_text),
    "num_speakers": (False, int_text),
    "timestamps_granularity": (False, one_of("none", "word", "character")),
    "diarize": (False, bool_text),
    "diarization_threshold": (False, number_text(0, 1)),
    "file_format": (False, one_of("pcm_s16le_16", "other")),
    "temperature": (False, number_text(0, 2)),
    "seed": (False, int_text),
    "use_multi_channel": (False, bool_text),
    "no_verbatim": (False, bool_text),
    "keyterms": (False, string),
}
GLADIA_PRERECORDED = {
    "audio_url": (True, https("https://api.gladia.io/file/")),
    "model": (False, one_of("solaria-1", "solaria-3")),
    "language_config": (False, obj({"languages": (False, list_of(string, non_empty=False)), "code_switching": (False, boolean)})),
    "diarization": (False, boolean),
    "diarization_config": (False, anything_object),
    "punctuation_enhanced": (False, boolean),
    "custom_vocabulary": (False, boolean),
    "custom_vocabulary_config": (False, anything_object),
    "custom_spelling": (False, boolean),
    "custom_spelling_config": (False, anything_object),
    "subtitles": (False, boolean),
    "subtitles_config": (False, anything_object),
    "translation": (False, boolean),
    "translation_config": (False, anything_object),
    "summarization": (False, boolean),
    "summarization_config": (False, anything_object),
    "named_entity_recognition": (False, boolean),
    "sentences": (False, boolean),
    "sentiment_analysis": (False, boolean),
    "callback": (False, boolean),
    "callback_config": (False, anything_object),
    "custom_metadata": (False, anything_object),
}
GOOGLE_FEATURES = {
    k: (False, boolean)
    for k in (
        "enableAutomaticPunctuation",
        "profanityFilter",
        "enableWordTimeOffsets",
        "enableWordConfidence",
        "enableSpokenPunctuation",
        "enableSpokenEmojis",
    )
} | {"maxAlternatives": (False, integer), "diarizationConfig": (False, anything_object), "multiChannelMode": (False, string)}
GOOGLE_CONFIG = {
    "model": (True, string),
    "languageCodes": (True, list_of(string)),
    "autoDecodingConfig": (False, anything_object),
    "explicitDecodingConfig": (False, anything_object),
    "features": (False, obj(GOOGLE_FEATURES)),
    "adaptation": (False, anything_object),
    "transcriptNormalization": (False, anything_object),
    "translationConfig": (False, anything_object),
    "denoiserConfig": (False, anything_object),
}
AZURE_ENHANCED = {
    "enabled": (True, boolean),
    "task": (False, one_of("transcribe", "translate")),
    "targetLanguage": (False, string),
    "prompt": (False, list_of(string)),
}
AZURE_DEFINITION = {
    "locales": (False, list_of(string)),
    "profanityFilterMode": (False, one_of("None", "Masked", "Removed", "Tags")),
    "enhancedMode": (False, obj(AZURE_ENHANCED)),
    "diarization": (False, anything_object),
    "channels": (False, list_of(integer)),
    "phraseList": (False, anything_object),
    "audioUrl": (False, string),
}
MODULATE_ENDPOINTS = {
    "velma-2-stt-batch-english-vfast": {},
    "velma-2-stt-batch": {
        k: (False, bool_text) for k in ("speaker_diarization", "emotion_signal", "accent_signal", "deepfake_signal", "pii_phi_tagging")
    },
    "velma-2-stt-batch-multilingual-vfast": {"language": (False, string)},
}
SMALLEST_QUERY = {
    "language": (False, string),
    "word_timestamps": (False, bool_text),
    "diarize": (False, bool_text),
    "sentence_timestamps": (False, bool_text),
    "redact_pii": (False, bool_text),
    "redact_pci": (False, bool_text),
    "numerals": (False, one_of("true", "false", "auto")),
    "keywords": (False, string),
    "age_detection": (False, bool_text),
    "gender_detection": (False, bool_text),
    "emotion_detection": (False, bool_text),
}
OPENAI_FORM = {
    "model": (True, string),
    "response_format": (False, one_of("json", "text", "verbose_json", "srt", "vtt")),
    "language": (False, string),
    "prompt": (False, string),
    "temperature": (False, number_text(0, 1)),
}


def _google_body(req: Request) -> list[str]:
    out = json_body(req, {"config": (True, obj(GOOGLE_CONFIG)), "content": (True, string)})
    if out:
        return out
    config = req.json["config"]
    if ("autoDecodingConfig" in config) == ("explicitDecodingConfig" in config):
        out.append("body.config: exactly one of autoDecodingConfig and explicitDecodingConfig")
    try:
        if not is_wav(base64.b64decode(req.json["content"], validate=True)):
            out.append("body.content: not base64 WAV audio")
    except (binascii.Error, ValueError):
        out.append("body.content: not base64")
    return out


def _azure_body(req: Request) -> list[str]:
    out = query(req, {"api-version": (True, one_of("2024-11-15", "2025-10-15"))})
    out += form(req, {"definition": (True, string)}, {"audio": True})
    part = req.form.get("definition")
    if part is not None:
        try:
            definition = json.loads(part.text)
        except ValueError:
            return [*out, "form definition: not JSON"]
        req.json = definition
        out += fields("definition", definition, AZURE_DEFINITION) if isinstance(definition, dict) else ["definition: not a JSON object"]
        if isinstance(definition, dict) and "enhancedMode" in definition and req.query.get("api-version") != ["2025-10-15"]:
            out.append("definition.enhancedMode: only in api-version 2025-10-15")
    return out


def _speechmatics_job(req: Request) -> list[str]:
    out = form(req, {"config": (True, string)}, {"data_file": True})
    part = req.form.get("config")
    if part is not None:
        try:
            config = json.loads(part.text)
        except ValueError:
            return [*out, "form config: not JSON"]
        req.json = config
        out += fields("config", config, SPEECHMATICS_CONFIG) if isinstance(config, dict) else ["config: not a JSON object"]
    return out


def _modulate(req: Request) -> list[str]:
    endpoint = req.path.rsplit("/", 1)[-1]
    return form(req, MODULATE_ENDPOINTS.get(endpoint, {}), {"upload_file": True})


#: vendor -> route -> the request's own checks (auth is checked for every route by ``violations``)
ROUTES: dict[str, dict[str, Callable[[Request], list[str]]]] = {
    "deepgram": {"listen": lambda r: query(r, DEEPGRAM_QUERY) + raw_audio(r, "audio/wav")},
    "assemblyai": {
        "upload": lambda r: raw_audio(r, "application/octet-stream") + ([] if not r.query else ["query: none documented"]),
        "transcript": lambda r: json_body(r, ASSEMBLYAI_TRANSCRIPT) + ([] if not r.query else ["query: none documented"]),
        "poll": no_body,
    },
    "speechmatics": {
        "jobs": lambda r: _speechmatics_job(r) + ([] if not r.query else ["query: none documented"]),
        "job": no_body,
        "transcript": lambda r: query(r, {"format": (True, one_of("txt", "json-v2", "srt"))}),
    },
    "elevenlabs": {"convert": lambda r: query(r, {"enable_logging": (False, bool_text)}) + form(r, ELEVENLABS_FORM, {"file": True})},
    "gladia": {
        "upload": lambda r: form(r, {}, {"audio": True}) + ([] if not r.query else ["query: none documented"]),
        "prerecorded": lambda r: json_body(r, GLADIA_PRERECORDED) + ([] if not r.query else ["query: none documented"]),
        "poll": no_body,
    },
    "google": {"recognize": lambda r: _google_body(r) + ([] if not r.query else ["query: none documented"])},
    "azure": {"transcribe": _azure_body},
    "modulate": {"stt": lambda r: _modulate(r) + ([] if not r.query else ["query: none documented"])},
    "smallest": {"get_text": lambda r: query(r, SMALLEST_QUERY) + raw_audio(r, "application/octet-stream")},
    "openai-stt": {"transcriptions": lambda r: form(r, OPENAI_FORM, {"file": True}) + ([] if not r.query else ["query: none documented"])},
}

#: each vendor's documented auth header (lower-case name, value template); a request carrying
#: another vendor's auth header instead is a violation too
AUTH_HEADERS = {
    "deepgram": ("authorization", "Token {key}"),
    "assemblyai": ("authorization", "{key}"),
    "speechmatics": ("authorization", "Bearer {key}"),
    "elevenlabs": ("xi-api-key", "{key}"),
    "gladia": ("x-gladia-key", "{key}"),
    "google": ("x-goog-api-key", "{key}"),
    "azure": ("ocp-apim-subscription-key", "{key}"),
    "modulate": ("x-api-key", "{key}"),
    "smallest": ("authorization", "Bearer {key}"),
    "openai-stt": ("authorization", "Bearer {key}"),
}
_ALL_AUTH = {name for name, _ in AUTH_HEADERS.values()}


def violations(vendor: str, route: str, req: Request, key: str) -> list[str]:
    """Everything ``req`` gets wrong against the vendor's documented ``route`` (empty: a correct request)."""
    name, template = AUTH_HEADERS[vendor]
    out = []
    expected = template.format(key=key)
    if vendor == "google" and req.headers.get("authorization") == f"Bearer {key}" and name not in req.headers:
        pass  # OAuth access token instead of an API key: documented too
    elif req.headers.get(name) != expected:
        out.append(f"header {name}: must be {template.format(key='KEY')!r}")
    stray = sorted(h for h in _ALL_AUTH - {name} if h in req.headers and not (vendor == "google" and h == "authorization"))
    out += [f"header {h}: not this vendor's auth header" for h in stray]
    if key in json.dumps(req.query):
        out.append("the key travels in the query string")
    return out + ROUTES[vendor][route](req)
