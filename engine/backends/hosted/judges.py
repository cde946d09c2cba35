"""Audio-language-model judges: Gemini ``generateContent`` and OpenAI chat completions with audio.

A judge answers one of the tasks in ``judges/prompts.yaml`` of the configuration tree (emotion label, relative
emotion comparison of two clips, same/different speaker, synthetic-speech likelihood) about one
or two clips. Why a separate kind from ASR: the answer is a label or a number, and an answer that
does not follow the requested JSON form must be counted, not guessed. Parsing is strict: the reply
must be a JSON object (a code fence around it is tolerated) whose answer key holds one of the
allowed choices (case-insensitive) or a number in [0, 1]. Anything else is ``parsed=False`` and
counted per task in ``usage()``.

Requests go through the shared client (``http.py``: same-origin only, limits, retries) and the
response cache (``cache.py``: keyed by model, rendered prompt, options and the clips' bytes), so
a repeated judging pass pays nothing; a cached reply is parsed again with the current rules.
"""

from __future__ import annotations

import base64
import json
import os
import re
import string
import threading
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import Backend, BackendInfo, BackendOptions
from engine.backends.bundled import audit_cache_dir, check_audio_batch
from engine.backends.hosted.base import wav_bytes
from engine.backends.hosted.cache import ResponseCache, audio_digest, options_digest
from engine.backends.hosted.http import HostedClient, transport_option
from engine.backends.hosted.scrub import clean_key, register_secret_env
from engine.config import check_keys, load_yaml
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError, HostedRequestError
from engine.options import option

ANSWER_TYPES = ("choice", "probability")
_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True)
class JudgeTask:
    """One task of the prompt file: its template, answer key and type, allowed choices, clip count."""

    name: str
    prompt: str
    key: str
    type: str
    choices: tuple[str, ...] = ()
    clips: int = 1


@dataclass(frozen=True)
class JudgeAnswer:
    """A judge's verdict: ``value`` is a canonical choice or a probability, None when unparseable."""

    task: str
    value: str | float | None
    parsed: bool
    raw: str
    cached: bool = False


def default_prompts_path() -> Path:
    """``judges/prompts.yaml`` of the configuration tree in use (the shipped one or ``$AUDIT_CONFIG_DIR``)."""
    from engine.config_tree import config_path

    return config_path("judges", "prompts.yaml")


def load_prompts(path: Path) -> dict[str, JudgeTask]:
    """Read and validate a prompt file; every error names the file and the key."""
    data = load_yaml(path) or {}
    check_keys(data, {"version", "tasks"}, str(path), required={"tasks"})
    tasks = data["tasks"]
    if not isinstance(tasks, Mapping) or not tasks:
        raise ConfigError(f"{path}: 'tasks' must be a non-empty mapping of task name -> settings")
    out: dict[str, JudgeTask] = {}
    for name, raw in tasks.items():
        where = f"{path}: tasks.{name}"
        check_keys(raw, {"prompt", "answer", "clips"}, where, required={"prompt", "answer"})
        answer = raw["answer"]
        check_keys(answer, {"key", "type", "choices"}, f"{where}.answer", required={"key", "type"})
        if answer["type"] not in ANSWER_TYPES:
            raise ConfigError(f"{where}.answer.type: expected one of {', '.join(ANSWER_TYPES)}, got {answer['type']!r}")
        clips = raw.get("clips", 1)
        if clips not in (1, 2):
            raise ConfigError(f"{where}.clips: expected 1 or 2, got {clips!r}")
        if not isinstance(raw["prompt"], str) or not raw["prompt"].strip():
            raise ConfigError(f"{where}.prompt: expected a non-empty string")
        choices = answer.get("choices") or []
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise ConfigError(f"{where}.answer.choices: expected a list of strings")
        twice = sorted({c for c in choices if [x.lower() for x in choices].count(c.lower()) > 1})
        if twice:  # answers are matched case-insensitively: a choice listed twice is one choice
            raise ConfigError(f"{where}.answer.choices: {', '.join(repr(c) for c in twice)} listed twice; list each choice once")
        out[str(name)] = JudgeTask(str(name), raw["prompt"], str(answer["key"]), str(answer["type"]), tuple(choices), int(clips))
    return out


def parse_answer(task: JudgeTask, text: str, choices: Sequence[str] = ()) -> str | float | None:
    """The answer in ``text`` under the strict rules above, or None."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or task.key not in data:
        return None
    value = data[task.key]
    if task.type == "probability":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            return None
        return float(value)
    allowed = list(choices) or list(task.choices)
    if not isinstance(value, str):
        return None
    for choice in allowed:
        if value.strip().lower() == choice.lower():
            return choice
    return None


@dataclass(frozen=True)
class JudgeOptions(BackendOptions):
    """An audio-LM judge's options: the model, the endpoint and its key, the prompt file, temperature, limits and the response cache."""

    model: str = option(doc="the vendor's model name")
    base_url: str | None = option(None, "the API's address; null: the vendor's public endpoint")
    api_key_env: str | None = option(None, "NAME of the environment variable holding the key; null: the vendor's usual one")
    prompts: str | None = option(None, "the prompt file; null: judges/prompts.yaml of the configuration tree")
    temperature: float = option(0.0, "sampling temperature sent with each request", ge=0, le=2)
    timeout_s: float = transport_option("timeout_s")
    max_retries: int = transport_option("max_retries")
    backoff_s: float = transport_option("backoff_s")
    max_backoff_s: float = transport_option("max_backoff_s")
    max_concurrency: int = transport_option("max_concurrency")
    requests_per_minute: float | None = transport_option("requests_per_minute")
    cache: bool = option(True, "keep answers on disk so a repeated judging pass pays nothing")
    cache_dir: str | None = option(None, "the response cache's folder; null: $AUDIT_CACHE/hosted")

    def validate(self, where: str) -> None:
        if not self.model:
            raise ConfigError(f"{self.key_path(where, 'model')}: expected the vendor's model name, got an empty string")


#: Options of :class:`JudgeOptions` that change how a request travels, not what it asks (left out of answer digests).
_TRANSPORT = {
    "api_key_env",
    "timeout_s",
    "max_retries",
    "backoff_s",
    "max_backoff_s",
    "max_concurrency",
    "requests_per_minute",
    "cache",
    "cache_dir",
    "prompts",
}


class AudioJudge(Backend):
    """Common machinery of the judges; a vendor supplies the request and where the reply text is."""

    name = "judge"
    vendor: ClassVar[str] = "judge"
    default_base_url: ClassVar[str] = ""
    default_key_env: ClassVar[str] = ""
    OPTIONS: ClassVar[type[BackendOptions] | None] = JudgeOptions
    options: JudgeOptions  # base_url, api_key_env and prompts resolved

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        env = cls.parse_options(options).api_key_env or cls.default_key_env
        if not clean_key(os.environ.get(env)):
            return Availability(False, f"set the environment variable {env} (API key for {cls.vendor})")
        return Availability(True, f"{cls.vendor} API, key in ${env} (reachability not checked)", checked=False)

    def __init__(self, **options: Any) -> None:
        if "api_key" in options:
            raise ConfigError(
                f"{self.name}: option 'api_key' is not accepted; put the key in an environment variable and name it in 'api_key_env'"
            )
        super().__init__(**options)  # JudgeOptions: unknown keys, types, ranges, NaN at any depth (engine/options.py)
        o = self.options
        base_url = (o.base_url or self.default_base_url).rstrip("/")
        key_env = o.api_key_env or self.default_key_env
        register_secret_env(key_env)  # its value is scrubbed from every artefact and log line
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{self.name}: 'base_url' must start with http:// or https://")
        path = Path(o.prompts).expanduser() if o.prompts else default_prompts_path()
        self.tasks = load_prompts(path)
        self.options = o.replace(base_url=base_url, api_key_env=key_env, prompts=str(path))
        self.client: HostedClient | None = None
        self.cache: ResponseCache | None = None
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {}
        self._seen: set[str] = set()
        self._calls = 0
        self._hits = 0
        self._tokens = {"input": 0, "output": 0}
        self._wall = 0.0

    def _key(self) -> str:
        """The key, stripped (a CRLF .env file leaves a CR that no header may carry)."""
        return clean_key(os.environ.get(self.options.api_key_env or ""))

    @abstractmethod
    def auth_headers(self, key: str) -> dict[str, str]:
        """The header(s) that carry the key."""

    @abstractmethod
    def _ask(self, client: HostedClient, prompt: str, clips: Sequence[bytes]) -> tuple[str, dict[str, int], Any]:
        """Send prompt and clips; return (reply text, {"input": n, "output": n} tokens, raw answer)."""

    def load(self) -> None:
        if not self._key():
            raise BackendUnavailable(f"{self.name}: set the environment variable {self.options.api_key_env} (API key for {self.vendor})")
        o = self.options
        self.client = HostedClient(
            self.vendor,
            o.base_url or "",
            lambda: self.auth_headers(self._key()),
            lambda: [self._key()],
            timeout_s=o.timeout_s,
            max_retries=o.max_retries,
            backoff_s=o.backoff_s,
            max_backoff_s=o.max_backoff_s,
            max_concurrency=o.max_concurrency,
            requests_per_minute=o.requests_per_minute,
            key_env=o.api_key_env or "",
        )
        if o.cache:
            root = Path(o.cache_dir).expanduser() if o.cache_dir else audit_cache_dir() / "hosted"
            self.cache = ResponseCache(root, self.name)

    def judge(self, task: str, clips: Sequence[np.ndarray], choices: Sequence[str] = (), **fields: str) -> JudgeAnswer:
        """Ask ``task`` about ``clips`` (mono 16 kHz); ``choices`` fill $labels for choice tasks without fixed choices."""
        if self.client is None:
            raise BackendUnavailable(f"{self.name}: call load() before judging")
        if task not in self.tasks:
            raise ConfigError(
                f"{self.name}: unknown judge task '{task}'; the prompt file {self.options.prompts} defines {', '.join(sorted(self.tasks))}"
            )
        spec = self.tasks[task]
        audio = check_audio_batch(clips, SAMPLE_RATE, self.name)
        if len(audio) != spec.clips:
            raise ConfigError(f"{self.name}: task '{task}' takes {spec.clips} clip(s), got {len(audio)}")
        if spec.type == "choice" and not (choices or spec.choices):
            raise ConfigError(f"{self.name}: task '{task}' needs the allowed choices (pass choices=...)")
        prompt = string.Template(spec.prompt).safe_substitute(labels=", ".join(choices), **fields)
        payloads = [wav_bytes(a) for a in audio]
        key = None
        if self.cache is not None:
            digest = options_digest({**self._answer_options(), "task": task, "prompt": prompt})
            key = self.cache.key(self.options.model, digest, audio_digest(b"".join(audio_digest(p).encode() for p in payloads)))
            hit = self.cache.get(key, expect={"backend": self.name, "model": self.options.model, "task": task, "options_digest": digest})
            if hit is not None:
                with self._lock:
                    self._hits += 1
                return self._tally(JudgeAnswer(task, parse_answer(spec, hit["text"], choices), False, hit["text"], cached=True), key)
        t0 = time.perf_counter()
        text, tokens, raw = self._ask(self.client, prompt, payloads)
        with self._lock:
            self._calls += 1
            self._wall += time.perf_counter() - t0
            for k in ("input", "output"):
                self._tokens[k] += int(tokens.get(k, 0))
        if self.cache is not None and key is not None:
            self.cache.put(
                key,
                {
                    "text": text,
                    "response": raw,
                    "task": task,
                    "backend": self.name,
                    "model": self.options.model,
                    "options_digest": digest,
                },
            )
        return self._tally(JudgeAnswer(task, parse_answer(spec, text, choices), False, text), key)

    def _tally(self, answer: JudgeAnswer, key: str | None) -> JudgeAnswer:
        """Count each distinct question once per process (a retried batch asks again, from the cache)."""
        parsed = answer.value is not None
        with self._lock:
            if key is None or key not in self._seen:
                if key is not None:
                    self._seen.add(key)
                c = self._counts.setdefault(answer.task, {"n": 0, "unparseable": 0})
                c["n"] += 1
                c["unparseable"] += 0 if parsed else 1
        return JudgeAnswer(answer.task, answer.value, parsed, answer.raw, answer.cached)

    def _answer_options(self) -> dict[str, Any]:
        """The options that change answers, as written: everything but transport."""
        return {k: v for k, v in self.options.as_dict().items() if k not in _TRANSPORT}

    def answer_settings(self, task: str) -> dict[str, Any]:
        """What an answer to ``task`` depends on (a stored answer is reused only under equal ones):
        the options that change answers (not transport: timeouts, retries, concurrency, cache, key
        variable, prompt file path) and the task's prompt text, answer key, type, choices and clips."""
        spec = self.tasks.get(task)
        return {
            "options": self._answer_options(),
            "task": task,
            "prompt": None
            if spec is None
            else {"text": spec.prompt, "key": spec.key, "type": spec.type, "choices": list(spec.choices), "clips": spec.clips},
        }

    # convenience wrappers for the audits
    def emotion_label(self, clip: np.ndarray, labels: Sequence[str]) -> JudgeAnswer:
        return self.judge("emotion_label", [clip], choices=labels)

    def emotion_compare(self, a: np.ndarray, b: np.ndarray, dimension: str = "aroused") -> JudgeAnswer:
        return self.judge("emotion_compare", [a, b], dimension=dimension)

    def same_speaker(self, a: np.ndarray, b: np.ndarray) -> JudgeAnswer:
        return self.judge("same_speaker", [a, b])

    def synthetic_likelihood(self, clip: np.ndarray) -> JudgeAnswer:
        return self.judge("synthetic_speech", [clip])

    def usage(self) -> dict[str, Any]:
        """Calls, cache hits, tokens, and per task the answers and how many were unparseable."""
        with self._lock:
            tasks = {t: {**c, "unparseable_rate": round(c["unparseable"] / c["n"], 4) if c["n"] else None} for t, c in self._counts.items()}
            return {
                "billable_calls": self._calls,
                "cache_hits": self._hits,
                "input_tokens": self._tokens["input"],
                "output_tokens": self._tokens["output"],
                "request_wall_s": round(self._wall, 3),
                "tasks": tasks,
            }

    def info(self) -> BackendInfo:
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
                "prompts": o.prompts,
                "temperature": o.temperature,
                "parsing": "strict JSON; unparseable replies counted, never guessed",
                "usage": self.usage(),
            },
        )

    def close(self) -> None:
        self.client = None


def _reply_text(value: Any, vendor: str, where: str) -> str:
    if not isinstance(value, str):
        raise HostedRequestError(f"{vendor}: the answer has no reply text at {where}")
    return value


class GeminiJudge(AudioJudge):
    """Gemini ``POST /v1beta/models/{model}:generateContent`` with the clips as inline WAV data."""

    name = "gemini"
    vendor = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com"
    default_key_env = "GEMINI_API_KEY"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key} if key else {}

    def _ask(self, client: HostedClient, prompt: str, clips: Sequence[bytes]) -> tuple[str, dict[str, int], Any]:
        parts: list[dict[str, Any]] = [{"text": prompt}]
        for i, wav in enumerate(clips):
            if len(clips) > 1:
                parts.append({"text": f"Clip {'AB'[i]}:"})
            parts.append({"inline_data": {"mime_type": "audio/wav", "data": base64.b64encode(wav).decode()}})
        body = {
            "contents": [{"role": "user", "parts": parts}],
            "generationConfig": {"temperature": self.options.temperature, "responseMimeType": "application/json"},
        }
        path = f"/v1beta/models/{self.options.model}:generateContent"
        data = client.request("POST", path, body=json.dumps(body).encode(), content_type="application/json").json(client.redact)
        cand = (data.get("candidates") or [None])[0] if isinstance(data, dict) else None
        parts_out = (cand or {}).get("content", {}).get("parts") if isinstance(cand, dict) else None
        if not isinstance(parts_out, list):
            reason = (cand or {}).get("finishReason") if isinstance(cand, dict) else None
            raise HostedRequestError(
                f"gemini: no reply parts (finishReason {reason!r}, promptFeedback "
                f"{data.get('promptFeedback') if isinstance(data, dict) else None!r})"
            )
        text = "".join(
            _reply_text(p.get("text"), self.vendor, "candidates[0].content.parts[].text")
            for p in parts_out
            if isinstance(p, dict) and "text" in p
        )
        meta = data.get("usageMetadata") or {}
        return text, {"input": int(meta.get("promptTokenCount") or 0), "output": int(meta.get("candidatesTokenCount") or 0)}, data


class OpenAIAudioJudge(AudioJudge):
    """OpenAI ``POST /v1/chat/completions`` with ``input_audio`` content parts (gpt-audio models)."""

    name = "openai-audio"
    vendor = "openai"
    default_base_url = "https://api.openai.com"
    default_key_env = "OPENAI_API_KEY"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _ask(self, client: HostedClient, prompt: str, clips: Sequence[bytes]) -> tuple[str, dict[str, int], Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
        for i, wav in enumerate(clips):
            if len(clips) > 1:
                content.append({"type": "text", "text": f"Clip {'AB'[i]}:"})
            content.append({"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode(), "format": "wav"}})
        body = {
            "model": self.options.model,
            "modalities": ["text"],
            "temperature": self.options.temperature,
            "messages": [{"role": "user", "content": content}],
        }
        data = client.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(), content_type="application/json").json(
            client.redact
        )
        choice = (data.get("choices") or [None])[0] if isinstance(data, dict) else None
        message = choice.get("message") if isinstance(choice, dict) else None
        text = _reply_text(message.get("content") if isinstance(message, dict) else None, self.vendor, "choices[0].message.content")
        usage = data.get("usage") or {}
        return text, {"input": int(usage.get("prompt_tokens") or 0), "output": int(usage.get("completion_tokens") or 0)}, data
