"""Worker of the judges' keyed passes (``engine/keyed/keyed_pass.py``): one audio-LM judge, one question per unit.

The speaker, emotion and synthetic-voice audits ask judges from ``engine.backends.JUDGE_BACKENDS``
one question per item (a trial, a rendition pair and dimension, a clip). Each question is a unit
of a keyed pass, so it runs where every other pass runs (in this process or on a Ray actor) and
its answer is stored once, beside a marker, by the driver: a re-run asks only what is missing.

Why the worker decodes: the driver schedules and writes, workers do the audio work. A unit's
payload names where each clip is (:func:`clip_location`: a path with the root it is relative to,
or the encoded bytes of a clip that lives inside a shard, as a shard travels to an ASR actor),
never decoded samples; the worker decodes with the run's decode options and asks the judge.

A clip that cannot be decoded is that question's answer (``{"clip_errors": {utt_id: error}}``),
stored like an ASR error row, so its figures leave it out as ``without audio`` and a re-run does
not read it again until its audio changes. A failed request raises (the keyed pass retries it,
then reports it as failed and stores nothing, so the next run asks again).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.audio.decoding import decode
from engine.data import DEFAULT_MAX_DURATION_S, SPEECH_FREE_LABEL, SPEECH_FREE_VALUE, Utterance, is_speech_free
from engine.errors import ConfigError
from engine.keyed.unit_store import digest

JUDGE_METHODS: dict[str, tuple[str, int]] = {
    "same_speaker": ("same_speaker", 2),
    "emotion_compare": ("emotion_compare", 2),
    "synthetic_likelihood": ("synthetic_speech", 1),
    "emotion_label": ("emotion_label", 1),
}
"""Judge methods a unit may name: method -> (prompt task it asks, clips it takes)."""

WORKER = "engine.keyed.judge_worker:JudgeWorker"


def answer_settings(judge: Any, task: str) -> dict[str, Any]:
    """What a judge's answer to ``task`` depends on: its answer-changing options and the task's prompt.

    A stored answer is reused only under equal settings (the marker's digest). Transport options
    (timeouts, retries, concurrency, cache, the key's variable) change no answer and are left out;
    the prompt is the task's text, answer key and choices, so editing the prompt file re-asks
    only the tasks whose prompt changed. A judge without ``answer_settings`` (a plug-in) is keyed
    by all its options.
    """
    own = getattr(judge, "answer_settings", None)
    if callable(own):
        return dict(own(task))
    return {"options": {k: v for k, v in dict(getattr(judge, "options", {})).items() if "key" not in k.lower()}, "task": task}


def clip_location(utt: Utterance, root: Path | str | None) -> dict[str, Any]:
    """Where a worker reads one clip: its path (with the root a relative path is under) or its encoded bytes."""
    loc: dict[str, Any] = {"utt_id": utt.utt_id, "root": None if root is None else str(root)}
    if utt.audio_bytes is not None:
        loc["audio_bytes"] = utt.audio_bytes
    else:
        loc["audio_path"] = utt.audio_path
    if is_speech_free(utt.labels):
        loc["speech_free"] = True  # a silent clip is valid only when labelled speech-free (engine/audio/decoding.py)
    if utt.segment is not None:
        loc["segment"] = list(utt.segment)  # a span of a longer file: the worker reads only it
    return loc


def decode_location(loc: Mapping[str, Any], max_duration_s: float, allow_outside_root: bool) -> tuple[Any, str | None]:
    """(samples at 16 kHz, None) or (None, the decode error) of one clip location."""
    labels = {SPEECH_FREE_LABEL: SPEECH_FREE_VALUE} if loc.get("speech_free") else {}
    seg = loc.get("segment")
    utt = Utterance(
        str(loc["utt_id"]),
        None,
        audio_path=loc.get("audio_path"),
        audio_bytes=loc.get("audio_bytes"),
        labels=labels,
        offset_s=None if seg is None else float(seg[0]),
        duration_s=None if seg is None else float(seg[1]),
    )
    root = Path(loc["root"]) if loc.get("root") else None
    d = decode(utt, root=root, max_duration_s=max_duration_s, allow_outside_root=allow_outside_root)
    if d.error is not None or d.samples is None:
        return None, str(d.error)
    return d.samples, None


class JudgeWorker:
    """One judge (built from its backend name and options, loaded once); one question per unit."""

    def __init__(self, backend: str, options: Mapping[str, Any] | None = None) -> None:
        from engine.backends import JUDGE_BACKENDS

        self.name = backend
        self.judge: Any = JUDGE_BACKENDS.get(backend)(**dict(options or {}))

    def load(self) -> dict[str, Any]:
        """Build the judge's client (a missing key raises ``BackendUnavailable``); its facts without usage."""
        self.judge.load()
        info = dict(self.judge.info().as_dict())
        info.pop("usage", None)
        return info

    def run(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``payload``: ``method`` (a JUDGE_METHODS name), ``clips`` (locations), ``args`` (the method's
        other arguments), ``decode`` (max_duration_s, allow_outside_root) and ``settings_digest`` (the
        driver's digest of :func:`answer_settings`; a worker whose prompt file differs refuses, so an
        answer is never stored under a prompt it was not asked with). Returns the answer as JSON."""
        method = str(payload["method"])
        if method not in JUDGE_METHODS:
            raise ConfigError(f"judge unit: unknown method {method!r}; known: {', '.join(sorted(JUDGE_METHODS))}")
        task, n_clips = JUDGE_METHODS[method]
        expected = payload.get("settings_digest")
        if expected is not None and digest(answer_settings(self.judge, task)) != expected:
            raise ConfigError(
                f"{self.name}: this worker's settings for task '{task}' differ from the run's (a different prompt file or "
                "judge version where the worker runs); make the configuration folder the same on every node"
            )
        clips = list(payload["clips"])
        if len(clips) != n_clips:
            raise ConfigError(f"judge unit: method {method} takes {n_clips} clip(s), got {len(clips)}")
        dec = dict(payload.get("decode") or {})
        limit, outside = float(dec.get("max_duration_s", DEFAULT_MAX_DURATION_S)), bool(dec.get("allow_outside_root", True))
        audio, errors = [], {}
        for loc in clips:
            x, err = decode_location(loc, limit, outside)
            if err is not None:
                errors[str(loc["utt_id"])] = err
            audio.append(x)
        if errors:
            return {"clip_errors": errors}
        answer = getattr(self.judge, method)(*audio, **dict(payload.get("args") or {}))
        return {"task": answer.task, "value": answer.value, "parsed": answer.parsed, "raw": answer.raw, "cached": answer.cached}

    def facts(self) -> dict[str, Any]:
        """The judge's facts with its usage (calls billed, cache hits, tokens, unparseable per task) at the end."""
        info = dict(self.judge.info().as_dict())
        usage = info.pop("usage", None)
        return {**info, "usage": usage}

    def close(self) -> None:
        self.judge.close()


__all__ = ["JUDGE_METHODS", "WORKER", "JudgeWorker", "answer_settings", "clip_location", "decode_location"]
