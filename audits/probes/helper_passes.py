"""The probes' helper models as keyed passes on the run's engine (``engine/keyed/keyed_pass.py``).

Beside re-running the audited ASR models (``audits.probes.engine_io``), the audio probes use
helper models: word timings to find the word the masking probe hides, and (synthetic-voice probe)
a speaker encoder that matches a TTS voice to each speaker. Each is a keyed pass: one JSON result
per ``(helper, clip)``, stored with a marker of the clip's audio fingerprint and the helper's
settings under the probes' keyed work folders, and computed by the engine's workers
(``engine/keyed/probe_workers.py``): in this process with ``--engine inprocess``, in Ray actors (on a
GPU when the cluster has one) with ``--engine ray``. The driver only plans units, stores results
and does the text work (matching timed words to the reference). A second run with the same clips
and settings computes nothing; a changed clip or setting recomputes only what it touches.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audits.probes.config import TimingConfig
from audits.probes.word_timings import WordTiming, align_timings, spoken_words
from engine.data import DecodeOptions, ModelSpec, ProgressFn, Utterance
from engine.datasets.base import audio_stamp
from engine.engine import EngineOptions
from engine.errors import AuditError, ConfigError
from engine.keyed.keyed_pass import KeyedOutcome, KeyedPass, KeyedUnit, WorkerSpec
from engine.keyed.probe_workers import clip_payload, file_sha256
from engine.keyed.unit_store import KeyedUnitStore, keyed_workspace

log = logging.getLogger(__name__)

WHISPER_METHOD = "whisper-word-timestamps"
CTC_METHOD = "ctc-forced"
CTC_NAME = "ctc-mms_fa"


@dataclass(frozen=True)
class Clip:
    """One clip a helper reads: its unit id, the utterance and the root its path is relative to."""

    unit: str
    utt: Utterance
    root: Path | None = None

    def inputs(self) -> dict[str, Any]:
        """The clip's audio fingerprint: the dataset's stamp, or the whole file's SHA-256 for audio a probe wrote."""
        if self.utt.audio_bytes is None and self.utt.audio_path and (self.utt.derivation or {}).get("probe"):
            return {"audio_sha256": file_sha256(self._path())}
        return {"audio": list(audio_stamp(self.utt, self.root))}

    def _path(self) -> Path:
        p = Path(str(self.utt.audio_path))
        return p if p.is_absolute() or self.root is None else self.root / p

    @property
    def cost_s(self) -> float:
        return float(self.utt.duration_s or 0.0)


def _relay(progress: ProgressFn | None, what: str) -> Any:
    if progress is None:
        return None

    def relay(pass_name: str, n: int, info: dict[str, Any]) -> None:
        progress("probe_helper", n, {"helper": what, **info})

    return relay


class EngineTimings:
    """Word timings of clips, computed as keyed units on the run's engine.

    ``method`` ``whisper``: the word timestamps of ``model`` (a faster-whisper registry entry)
    matched to the reference (``align_timings``). ``ctc``: torchaudio's MMS_FA forced alignment of
    the reference's spoken words. ``auto``: CTC when torchaudio is installed and its aligner loads,
    else whisper (decided by the first pass that needs timings, and kept for the run).
    """

    def __init__(
        self, timing: TimingConfig, probes_dir: Path, engine: EngineOptions | None = None, decode_options: DecodeOptions | None = None
    ) -> None:
        if timing.method not in ("auto", "ctc", "whisper"):
            raise ConfigError(f"word_timings.method must be one of auto, ctc, whisper; got '{timing.method}'")
        self.timing = timing
        self.engine = engine or EngineOptions()
        self.decode_options = decode_options or DecodeOptions()
        self.folder = keyed_workspace(probes_dir, "word_timings", {"method": timing.method, "model": timing.model})
        self.store = KeyedUnitStore(self.folder, "word_timings")
        self.spec: ModelSpec | None = None if timing.method == "ctc" else _whisper_spec(timing.model)
        self.method: str | None = {"ctc": CTC_METHOD, "whisper": WHISPER_METHOD}.get(timing.method)
        self.results: dict[str, Any] = {}
        self.facts: dict[str, Any] = {}

    def resolved(self) -> str:
        """The method in use: the one chosen, or for ``auto`` before any pass ran, CTC when torchaudio is installed."""
        import importlib.util

        if self.method is not None:
            return self.method
        return CTC_METHOD if importlib.util.find_spec("torchaudio") is not None else WHISPER_METHOD

    def _pass(self, method: str, clips: Sequence[Clip], references: Mapping[str, str]) -> tuple[KeyedPass, str]:
        if method == WHISPER_METHOD:
            spec = self.spec
            if spec is None:
                raise ConfigError("word timings: the whisper method needs word_timings.model")
            name = spec.name
            worker = WorkerSpec(
                name, "engine.keyed.probe_workers:WordTimingWorker", {"method": "whisper", "spec": spec}, dict(spec.meta), gpu_capable=True
            )
            settings: dict[str, Any] = {"method": method, "model": spec.name, "backend": spec.backend, "options": dict(spec.options)}
        else:
            name = CTC_NAME
            worker = WorkerSpec(name, "engine.keyed.probe_workers:WordTimingWorker", {"method": "ctc"}, gpu_capable=True)
            settings = {"method": method, "model": "torchaudio MMS_FA"}
        units = []
        for c in clips:
            extra: dict[str, Any] = {}
            inputs = c.inputs()
            if method == CTC_METHOD:
                flat = [s for w in references[c.unit].split() for s in spoken_words(w)]
                if not flat:
                    continue  # nothing to align: every word is unknown, no model needed
                extra["spoken"] = flat
                inputs["spoken"] = flat
            units.append(KeyedUnit(name, c.unit, inputs, settings, clip_payload(c.utt, c.root, self.decode_options, **extra), c.cost_s))
        return KeyedPass(self.store, (worker,), tuple(units)), name

    def compute(self, clips: Sequence[Clip], references: Mapping[str, str], progress: ProgressFn | None = None) -> None:
        """Timings of ``clips`` (reference text per unit id), from the store or computed on the engine."""
        clips = [c for c in clips if c.unit not in self.results]
        if not clips:
            return
        KeyedUnitStore.check_names([], [c.unit for c in clips])
        method = self.resolved()
        kp, name = self._pass(method, clips, references)
        out = self.engine.run_keyed([kp], progress=_relay(progress, "word_timings"))
        f = out.facts.get(("word_timings", name), {})
        if self.method is None and method == CTC_METHOD and f.get("status") == "load_failed":
            log.info("word timings: %s; using %s word timestamps", f.get("error"), self.timing.model)
            method = WHISPER_METHOD
            kp, name = self._pass(method, clips, references)
            out = self.engine.run_keyed([kp], progress=_relay(progress, "word_timings"))
        self.method = method
        out.raise_failed("word timings")
        self._keep(out, name)

    def _keep(self, out: KeyedOutcome, name: str) -> None:
        for (_, backend, unit), result in out.results.items():
            if backend == name:
                self.results[unit] = result
        for (_, backend), f in out.facts.items():
            self.facts[backend] = f

    def timings(self, unit: str, reference: str, duration_s: float) -> list[WordTiming]:
        """Every reference word's span from the unit's stored result (``compute`` first)."""
        method = self.method or WHISPER_METHOD
        ref_words = reference.split()
        got = self.results.get(unit)
        if got is None:
            if method == CTC_METHOD and not [s for w in ref_words for s in spoken_words(w)]:
                return [WordTiming(i, w, None, None, method, "unknown") for i, w in enumerate(ref_words)]
            raise AuditError(f"word timings of '{unit}' were not computed; the probe must compute them before masking")
        if "error" in got:
            raise AuditError(f"word timings of '{unit}': the worker could not read the clip ({got['error']})")
        if method == WHISPER_METHOD:
            return align_timings(reference, [(str(w), float(s), float(e)) for w, s, e in got["words"]], duration_s, method)
        out: list[WordTiming] = []
        edges = got["edges"]
        k = 0
        for i, w in enumerate(ref_words):
            ws = spoken_words(w)
            if not ws:
                out.append(WordTiming(i, w, None, None, method, "unknown"))
                continue
            s, e = edges[k][0], edges[k + len(ws) - 1][1]
            k += len(ws)
            out.append(WordTiming(i, w, float(s), float(e), method, "aligned"))
        return out


def _whisper_spec(model: str) -> ModelSpec:
    """The registry entry of the word-timing model, refused unless its backend declares word timestamps (before anything runs)."""
    from engine.backends import asr_backends_where, asr_capabilities
    from engine.model_registry import load_model_registry, resolve_models

    entry = resolve_models([model], load_model_registry())[0]
    if not asr_capabilities(entry.backend).word_timestamps:
        raise ConfigError(
            f"word_timings.model '{model}' uses backend '{entry.backend}', which gives no word timestamps; use a model of a "
            f"backend that does ({', '.join(asr_backends_where(word_timestamps=True))})"
        )
    return entry.spec()


@dataclass(frozen=True)
class Speech:
    """One rendition to make: its unit id, the voice (``engine:voice``) and the text."""

    unit: str
    voice: str
    text: str


@dataclass(frozen=True)
class Rendered:
    """A rendition the TTS pass made: the file, its SHA-256 and the TTS version that made it."""

    path: Path
    sha256: str
    version: str

    def read(self) -> np.ndarray:
        """The rendition's samples (16 kHz float32, exactly as rendered)."""
        import soundfile as sf

        x, _ = sf.read(str(self.path), dtype="float32")
        return np.asarray(x, dtype=np.float32)


class EngineVoices:
    """The synthetic-voice probe's TTS and speaker encoder as keyed passes on the run's engine.

    ``render``: one unit per rendition; the worker (one per TTS engine) writes a float32 WAV file
    under ``<folder>/audio/`` and returns its name and SHA-256. The unit's settings are the TTS
    engine, its options and installed version, the voice, the text and the lead/tail; a stored
    unit whose file is missing or no longer has the recorded SHA-256 is rendered again.
    ``embed``: one unit per clip, the encoder's embedding (``match_encoder`` with its options),
    keyed by the clip's audio fingerprint.
    """

    def __init__(
        self,
        probes_dir: Path,
        engine: EngineOptions | None,
        tts_options: Mapping[str, Mapping[str, Any]],
        encoder: str,
        encoder_options: Mapping[str, Any],
        lead_s: float,
        tail_s: float,
    ) -> None:
        self.engine = engine or EngineOptions()
        self.lead_s, self.tail_s = float(lead_s), float(tail_s)
        self.folder = keyed_workspace(probes_dir, "voices", {"lead_s": self.lead_s, "tail_s": self.tail_s, "format": "wav-float32-16k"})
        self.audio_dir = self.folder / "audio"
        self.tts_store = KeyedUnitStore(self.folder, "tts")
        self.embed_store = KeyedUnitStore(self.folder, "speaker_embeddings")
        self.tts_options = {k: dict(v) for k, v in tts_options.items()}
        self.encoder, self.encoder_options = encoder, dict(encoder_options)
        self._installed: dict[str, str] = {}
        self.facts: dict[str, Any] = {}

    def installed(self, engine: str) -> str:
        """The TTS engine's installed version (cached; the program is asked, no model is loaded)."""
        if engine not in self._installed:
            from engine.keyed.probe_workers import tts_installation

            self._installed[engine] = tts_installation(engine, self.tts_options.get(engine))
        return self._installed[engine]

    def _settings(self, engine: str) -> dict[str, Any]:
        return {
            "engine": engine,
            "options": self.tts_options.get(engine, {}),
            "installed": self.installed(engine),
            "lead_s": self.lead_s,
            "tail_s": self.tail_s,
        }

    def _workers(self, engines: Sequence[str]) -> tuple[WorkerSpec, ...]:
        return tuple(
            WorkerSpec(
                e,
                "engine.keyed.probe_workers:TTSWorker",
                {
                    "engine": e,
                    "options": self.tts_options.get(e, {}),
                    "out_dir": str(self.audio_dir),
                    "lead_s": self.lead_s,
                    "tail_s": self.tail_s,
                },
            )
            for e in sorted(engines)
        )

    def expand(self, pool: Sequence[str], max_wildcard: int, progress: ProgressFn | None = None) -> tuple[list[str], list[str]]:
        """Pool entries as concrete ``engine:voice`` names: an ``engine:*`` entry asks that engine's worker for its voices
        (a stored unit per engine and installation); an engine that is not installed is skipped with a note."""
        notes: list[str] = []
        units: list[KeyedUnit] = []
        for engine in dict.fromkeys(e.split(":", 1)[0] for e in pool if e.split(":", 1)[1] == "*"):
            try:
                units.append(
                    KeyedUnit(engine, f"voices-of:{engine}", {}, {**self._settings(engine), "list_voices": True}, {"list_voices": True})
                )
            except AuditError as exc:
                notes.append(f"{engine}:* skipped: {exc}")
        out = KeyedOutcome()
        if units:
            out = self.engine.run_keyed(
                [KeyedPass(self.tts_store, self._workers([u.backend for u in units]), tuple(units))], progress=_relay(progress, "tts")
            )
            self.facts.update({f"tts:{b}": f for (_, b), f in out.facts.items()})
        voices: list[str] = []
        for entry in pool:
            engine, voice = entry.split(":", 1)
            if voice != "*":
                voices.append(entry)
                continue
            got = out.results.get(("tts", engine, f"voices-of:{engine}"))
            if got is None:
                err = out.failed.get(("tts", engine, f"voices-of:{engine}"))
                if err is not None:
                    notes.append(f"{entry} skipped: {err}")
                    log.info("synthetic_voice: matched pool entry %s skipped (%s)", entry, err)
                continue
            names = list(got["voices"])
            if len(names) > max_wildcard:
                raise ConfigError(f"probes.synthetic_voice.matched_pool: '{entry}' would take {len(names)} voices; name the ones to use")
            voices += [f"{engine}:{n}" for n in names]
        return list(dict.fromkeys(voices)), notes

    def _tts_unit(self, s: Speech) -> KeyedUnit:
        from engine.storage import safe_name

        engine, voice = s.voice.split(":", 1)
        settings = {**self._settings(engine), "voice": voice, "text": s.text}
        return KeyedUnit(
            engine, s.unit, {}, settings, {"text": s.text, "voice": voice, "file": f"{safe_name(s.unit)}.wav"}, float(len(s.text))
        )

    def _drop_unvouched_files(self, units: Sequence[KeyedUnit]) -> None:
        """A stored rendition whose file is missing or altered loses its marker, so the pass renders it again."""
        for u in units:
            got = self.tts_store.get(u.backend, u.unit, u.inputs, u.settings)
            if got is None:
                continue
            path = self.audio_dir / str(got.get("file"))
            if not path.is_file() or file_sha256(path) != got.get("sha256"):
                log.info("synthetic_voice: rendition %s (%s) is missing or altered; it is rendered again", u.unit, path)
                self.tts_store.marker_path(u.backend, u.unit).unlink(missing_ok=True)

    def render(
        self, items: Sequence[Speech], progress: ProgressFn | None = None, failed: dict[str, str] | None = None
    ) -> dict[str, Rendered]:
        """Every rendition in ``items``, from the store or rendered on the engine; unit id -> file.

        A rendition that fails after retries raises (naming it), unless ``failed`` is given: then
        its error is put there and it is left out (a pool voice that cannot speak is noted, not fatal).
        """
        if not items:
            return {}
        KeyedUnitStore.check_names([], [s.unit for s in items])
        units: list[KeyedUnit] = []
        for s in items:
            try:
                units.append(self._tts_unit(s))
            except AuditError as exc:  # the engine is not installed (its program is not on PATH)
                if failed is None:
                    raise
                failed[s.unit] = str(exc)
        self._drop_unvouched_files(units)
        workers = self._workers(list({u.backend for u in units}))
        out = self.engine.run_keyed([KeyedPass(self.tts_store, workers, tuple(units))], progress=_relay(progress, "tts"))
        if failed is None:
            out.raise_failed("synthetic_voice TTS")
        else:
            failed.update({unit: err for (_, _, unit), err in out.failed.items()})
        self.facts.update({f"tts:{b}": f for (_, b), f in out.facts.items()})
        rendered: dict[str, Rendered] = {}
        for u in units:
            got = out.results.get(("tts", u.backend, u.unit))
            if got is None:
                continue
            path = self.audio_dir / str(got["file"])
            if not path.is_file() or file_sha256(path) != got["sha256"]:
                raise AuditError(
                    f"synthetic_voice: the rendition {u.unit} is not at {path} as its worker wrote it; on a cluster of several "
                    "machines the run directory must be shared storage that every worker writes to; re-run the same command"
                )
            rendered[u.unit] = Rendered(path, str(got["sha256"]), str(got.get("version", "unknown")))
        return rendered

    def embed(self, clips: Sequence[Clip], progress: ProgressFn | None = None) -> dict[str, dict[str, Any]]:
        """The encoder's result per clip (``embedding`` or ``error``), from the store or computed on the engine."""
        if not clips:
            return {}
        KeyedUnitStore.check_names([self.encoder], [c.unit for c in clips])
        from engine.run.passes import split_placement

        options, placement = split_placement(self.encoder_options, f"probes.synthetic_voice.match_encoder ({self.encoder})")
        settings = {"encoder": self.encoder, "options": dict(options)}
        units = tuple(KeyedUnit(self.encoder, c.unit, c.inputs(), settings, clip_payload(c.utt, c.root), c.cost_s) for c in clips)
        worker = WorkerSpec(
            self.encoder,
            "engine.keyed.probe_workers:SpeakerEmbedWorker",
            {"encoder": self.encoder, "options": dict(options)},
            placement,
            gpu_capable=True,
        )
        out = self.engine.run_keyed([KeyedPass(self.embed_store, (worker,), units)], progress=_relay(progress, "speaker_embeddings"))
        out.raise_failed("synthetic_voice speaker embeddings")
        self.facts.update({f"encoder:{b}": f for (_, b), f in out.facts.items()})
        return {u.unit: dict(out.results[("speaker_embeddings", self.encoder, u.unit)]) for u in units}


__all__ = ["CTC_METHOD", "Clip", "EngineTimings", "EngineVoices", "Rendered", "Speech", "WHISPER_METHOD"]
