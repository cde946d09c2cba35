"""Workers of keyed passes (``engine/keyed/keyed_pass.py``) for the probes' helper models, one clip per unit.

The audio probes need helper models beside the ASR models they audit: word timings to find the
word to mask, a speaker encoder to match a TTS voice to each speaker, and the TTS that renders the
synthetic clips. Each is a keyed pass on the run's engine, so on ``--engine ray`` the models load
in actors (on a GPU when there is one) and the driver only plans and stores:

* :class:`WordTimingWorker`: word timings of one clip. ``whisper``: a faster-whisper model's
  word timestamps (the hypothesis words with start/end; matching them to the reference is text
  work the caller does). ``ctc``: forced alignment of given spoken words with torchaudio's MMS_FA
  model (the start/end of every spoken word).
* :class:`SpeakerEmbedWorker`: one speaker-verification backend (``engine.backends.SV_BACKENDS``),
  the embedding of one clip.
* :class:`MaskWorker`: the masked-word probe's derivation of one source clip: decode, hide each
  placed target with every variant, write each derived clip as a FLAC file (name, SHA-256, duration
  and derivation record in the result).
* :class:`TTSWorker`: one TTS backend (``engine.backends.TTS_BACKENDS``) rendering one text in one
  voice into a float32 WAV file under the pass's folder; the result names the file and its SHA-256,
  so the caller (and the next run) can check that the file is the one the unit made.

Clips are read by the worker itself (:func:`read_clip`) from a payload built by
:func:`clip_payload`: the utterance's fields, the dataset root and the decode options, exactly what
``engine.audio.decoding.decode`` needs. A clip that cannot be decoded (or is too short to embed) gives a
result with ``error``: a property of the audio, stored like any result and recomputed when the
audio changes. Any other exception fails the unit (retried, then reported, never stored).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends import asr_capabilities
from engine.data import SAMPLE_RATE, DecodeOptions, ModelSpec, Utterance
from engine.errors import AudioError, BackendUnavailable, ConfigError

_UTT_FIELDS = tuple(f.name for f in fields(Utterance))


def clip_payload(u: Utterance, root: Path | str | None, decode_options: DecodeOptions | None = None, **extra: Any) -> dict[str, Any]:
    """What a worker needs to read clip ``u``: its fields, the dataset root, the decode options (and ``extra``)."""
    opts = decode_options or DecodeOptions()
    return {"utt": {k: getattr(u, k) for k in _UTT_FIELDS}, "root": None if root is None else str(root), "decode": asdict(opts), **extra}


def read_clip(payload: Mapping[str, Any]) -> tuple[np.ndarray | None, str | None]:
    """The clip of a :func:`clip_payload` as 16 kHz mono float32, or ``(None, why it cannot be read)``."""
    from engine.audio.decoding import decode

    u = Utterance(**{k: v for k, v in dict(payload["utt"]).items() if k in _UTT_FIELDS})
    opts = DecodeOptions(**dict(payload.get("decode") or {}))
    root = payload.get("root")
    d = decode(
        u, root=None if root is None else Path(str(root)), max_duration_s=opts.max_duration_s, allow_outside_root=opts.allow_outside_root
    )
    if d.error is not None or d.samples is None:
        return None, str(d.error or "no samples")
    return np.asarray(d.samples, dtype=np.float32), None


def file_sha256(path: Path | str) -> str:
    """SHA-256 of a whole file (what a TTS unit's marker vouches for)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def render_speech(tts: Any, text: str, voice: str | None, lead_s: float, tail_s: float) -> np.ndarray:
    """``text`` spoken by ``voice`` of a loaded TTS backend: 16 kHz mono float32, peak 0.5, silent lead and tail."""
    from engine.backends.tts.espeak import resample

    x, sr = tts.synthesize(text, voice)
    y = resample(x, sr, SAMPLE_RATE)
    peak = float(np.max(np.abs(y))) if y.size else 0.0
    if peak > 0:
        y = y * np.float32(0.5 / peak)
    return np.concatenate(
        [np.zeros(int(lead_s * SAMPLE_RATE), np.float32), y.astype(np.float32), np.zeros(int(tail_s * SAMPLE_RATE), np.float32)]
    )


def tts_installation(engine: str, options: Mapping[str, Any] | None = None) -> str:
    """What identifies a TTS backend's installation (program or package version), found without loading a model.

    A program backend (espeak-ng, flite) looks its program up on PATH and asks it for its version;
    a model backend (kokoro) reports its package version. It goes into a rendition's settings, so
    an upgraded TTS renders again. ``BackendUnavailable`` names what to install.
    """
    from engine.backends import TTS_BACKENDS
    from engine.backends.tts.program import ProgramTTS

    tts = TTS_BACKENDS.get(engine)(**dict(options or {}))
    if isinstance(tts, ProgramTTS):
        tts.load()  # finds the program on PATH; nothing is synthesized
    fn = getattr(tts, "version", None)
    return str(fn()) if callable(fn) else "unknown"


def float_wav(samples: np.ndarray, sample_rate: int) -> bytes:
    """Mono float32 samples as a WAV file (IEEE float), byte for byte the same for the same samples.

    Why not soundfile: libsndfile adds a PEAK chunk with a timestamp to float WAV files, so the same
    rendition would get another SHA-256 on every write and a marker could never vouch for it.
    """
    import struct

    data = np.ascontiguousarray(samples, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, sample_rate, sample_rate * 4, 4, 32)  # IEEE float, mono, 32 bits
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` under a temporary name, fsync, rename: a killed unit never leaves a half file."""
    from engine.errors import StoreWriteError

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreWriteError(f"cannot write {path}: {exc.strerror or exc}; free disk space or fix permissions, then re-run") from exc


def _holds_gpu() -> bool:
    """Whether this process was given a GPU (a Ray actor with num_gpus sees it in CUDA_VISIBLE_DEVICES)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1")


class WordTimingWorker:
    """Word timings of one clip per unit: a faster-whisper model's word timestamps, or CTC forced alignment.

    ``method='whisper'`` takes ``spec`` (a faster-whisper model's spec); the result is
    ``{"words": [[word, start, end], ...], "duration_s"}``. ``method='ctc'`` loads torchaudio's
    MMS_FA bundle and aligns the payload's ``spoken`` words (a list of a-z words); the result is
    ``{"edges": [[start, end], ...], "duration_s"}``, one span per spoken word.
    """

    def __init__(self, method: str, spec: ModelSpec | None = None, device: str = "auto") -> None:
        if method not in ("whisper", "ctc"):
            raise ConfigError(f"word timings: method must be 'whisper' or 'ctc', got {method!r}")
        if method == "whisper" and (spec is None or not asr_capabilities(spec.backend).word_timestamps):
            got = "no model" if spec is None else f"backend '{spec.backend}', which declares no word timestamps"
            raise ConfigError(f"word timings: the whisper method needs a model whose backend gives word timestamps, got {got}")
        self.method = method
        self.spec = spec
        self.device = device
        self.backend: Any = None
        self._ctc: Any = None

    def load(self) -> dict[str, Any]:
        if self.method == "whisper":
            from engine.backends import build_backend
            from engine.run.ray_setup import accepts_option

            spec = self.spec
            if spec is None:  # refused in __init__; kept for the type checker
                raise ConfigError("word timings: the whisper method needs a model whose backend gives word timestamps")
            if _holds_gpu() and "device" not in spec.options and accepts_option(spec, "device", "cuda"):
                spec = replace(spec, options={**dict(spec.options), "device": "cuda"})  # as the ASR pass's GPU actors do
            self.backend = build_backend(spec)
            self.backend.load()
            return {**dict(self.backend.info().as_dict())}
        return self._load_ctc()

    def _load_ctc(self) -> dict[str, Any]:
        try:
            import torch
            import torchaudio
        except ImportError as exc:
            raise BackendUnavailable(f"CTC forced alignment needs torchaudio (pip install torchaudio matching torch): {exc}") from None
        from engine.backends.device import resolve_device

        device = resolve_device(self.device)
        try:
            bundle = torchaudio.pipelines.MMS_FA
            model = bundle.get_model(with_star=False).to(device).eval()
            self._ctc = (model, bundle.get_tokenizer(), bundle.get_aligner(), device, torch)
        except Exception as exc:  # noqa: BLE001 - any failure here (download, old torchaudio) means "not available"
            raise BackendUnavailable(
                f"cannot load torchaudio's MMS_FA aligner ({type(exc).__name__}: {exc}); its weights download from "
                "pytorch.org on first use; without them, use the whisper method"
            ) from None
        return {"model": "torchaudio MMS_FA", "device": device, "torchaudio": str(torchaudio.__version__)}

    def run(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``payload``: a :func:`clip_payload`; for ``ctc`` with ``spoken`` (the words to align)."""
        audio, error = read_clip(payload)
        if audio is None:
            return {"error": error}
        duration = len(audio) / SAMPLE_RATE
        if self.method == "whisper":
            words = self.backend.transcribe_with_word_timestamps(audio)
            return {"words": [[str(w.word), float(w.start), float(w.end)] for w in words], "duration_s": duration}
        return {"edges": self._align(audio, [str(w) for w in payload.get("spoken") or []]), "duration_s": duration}

    def _align(self, audio: np.ndarray, spoken: Sequence[str]) -> list[list[float]]:
        if not spoken:
            return []
        model, tokenizer, aligner, device, torch = self._ctc
        wave = torch.from_numpy(np.asarray(audio, dtype=np.float32)).unsqueeze(0).to(device)
        with torch.inference_mode():
            emission, _ = model(wave)
        spans = aligner(emission[0], tokenizer(list(spoken)))
        ratio = wave.size(1) / emission.size(1) / SAMPLE_RATE
        return [[float(ts[0].start * ratio), float(ts[-1].end * ratio)] for ts in spans]

    def facts(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()
            self.backend = None
        self._ctc = None


class SpeakerEmbedWorker:
    """The embedding of one clip per unit with one speaker-verification backend (loaded once).

    The result is ``{"embedding": [...]}`` (float64 values as the backend gave them, so the
    stored JSON reproduces them exactly), or ``{"error": ...}`` when the clip cannot be read or
    is too short to embed (``AudioError`` of the backend).
    """

    def __init__(self, encoder: str, options: Mapping[str, Any] | None = None) -> None:
        from engine.backends import SV_BACKENDS

        self.name = encoder
        self.encoder: Any = SV_BACKENDS.get(encoder)(**dict(options or {}))

    def load(self) -> dict[str, Any]:
        self.encoder.load()
        return {**dict(self.encoder.info().as_dict())}

    def run(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``payload``: a :func:`clip_payload`."""
        audio, error = read_clip(payload)
        if audio is None:
            return {"error": error}
        try:
            emb = self.encoder.embed_batch([audio], SAMPLE_RATE)[0]
        except AudioError as exc:
            return {"error": str(exc)}
        return {"embedding": [float(v) for v in np.asarray(emb, dtype=np.float64).reshape(-1)]}

    def facts(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.encoder.close()


class TTSWorker:
    """Renders one text in one voice per unit with one TTS backend, into a float32 WAV file.

    ``out_dir`` is the pass's folder for audio; each unit's file is ``<out_dir>/<payload file>``.
    The rendition is 16 kHz mono, peak-normalized to 0.5, with ``lead_s``/``tail_s`` of silence
    (the probes' synthetic clips). The result is ``{"file", "sha256", "samples", "version"}``.
    """

    def __init__(
        self, engine: str, options: Mapping[str, Any] | None = None, out_dir: str = ".", lead_s: float = 0.25, tail_s: float = 0.35
    ) -> None:
        from engine.backends import TTS_BACKENDS

        self.engine = engine
        self.out_dir = Path(out_dir)
        self.lead_s, self.tail_s = float(lead_s), float(tail_s)
        self.tts: Any = TTS_BACKENDS.get(engine)(**dict(options or {}))

    def load(self) -> dict[str, Any]:
        self.tts.load()
        return {**dict(self.tts.info().as_dict()), "version": self.version()}

    def version(self) -> str:
        fn = getattr(self.tts, "version", None)
        return str(fn()) if callable(fn) else "unknown"

    def run(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``payload``: ``text``, ``voice`` (None: the backend's own) and ``file`` (a name inside ``out_dir``);
        or ``list_voices: true``, answered with the installation's voice names (``{"voices": [...]}``)."""
        if payload.get("list_voices"):
            return {"voices": [str(v) for v in self.tts.voices()], "version": self.version()}
        y = render_speech(self.tts, str(payload["text"]), payload.get("voice"), self.lead_s, self.tail_s)
        data = float_wav(y, SAMPLE_RATE)
        _atomic_write_bytes(self.out_dir / str(payload["file"]), data)
        return {"file": str(payload["file"]), "sha256": hashlib.sha256(data).hexdigest(), "samples": int(len(y)), "version": self.version()}

    def facts(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.tts.close()


class MaskWorker:
    """Derives the masked clips of one source clip per unit (the masked-word probe's audio work).

    The driver placed the clip's targets (text work: which words, their word spans from the word
    timings); the worker decodes the clip (:func:`read_clip`), refines and pads each span on the
    audio and applies every variant (``engine.audio.masking.mask_targets``), encodes each derived
    clip as FLAC (16-bit, ``engine.audio.shards.encode_audio``) into ``<out_dir>/<safe name of its id>.flac``
    and returns, per target, either why it has no clip (``reason``, ``detail``) or per variant
    ``{"id", "file", "sha256", "duration_s", "derivation"}``. A clip shorter than the settings'
    ``min_clip_s`` gives no target (the driver names the skip); an unreadable clip gives ``error``.
    """

    def __init__(self, out_dir: str = ".") -> None:
        self.out_dir = Path(out_dir)

    def load(self) -> dict[str, Any]:
        return {"worker": "masking", "format": "flac-pcm16"}

    def run(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``payload``: a :func:`clip_payload` with ``signal`` (``MaskSignal.to_dict``; None: nothing to mask), ``targets``
        (``PlannedTarget.to_dict`` each), ``expect_duration_s`` (the duration the spans were timed on, or None) and
        optionally ``source_file``: also write the clip itself as FLAC under that name (``source`` in the result)."""
        from engine.audio.masking import MaskSignal, PlannedTarget, mask_targets
        from engine.audio.shards import encode_audio
        from engine.storage import safe_name

        audio, error = read_clip(payload)
        if audio is None:
            return {"error": error}
        parent = str(dict(payload["utt"])["utt_id"])
        duration = len(audio) / SAMPLE_RATE
        expect = payload.get("expect_duration_s")
        if expect is not None and float(expect) != duration:
            raise AudioError(
                f"clip '{parent}' decodes to {duration} s but its word timings were computed on {expect} s of audio; "
                "the clip changed during the run: re-run the same command"
            )
        out: dict[str, Any] = {"duration_s": duration, "targets": []}
        if payload.get("source_file"):  # the clip itself, encoded as the derived shards hold it (a rendition's clean copy)
            out["source"] = self._write(str(payload["source_file"]), encode_audio(audio, SAMPLE_RATE, "FLAC"))
        if payload.get("signal") is None:
            return out
        signal = MaskSignal.from_dict(dict(payload["signal"]))
        if duration < signal.min_clip_s:
            return out
        planned = [PlannedTarget.from_dict(t) for t in payload.get("targets") or []]
        for m in mask_targets(parent, audio, planned, signal):
            entry: dict[str, Any] = {"index": m.index, "clips": []}
            if m.reason is not None:
                entry.update(reason=m.reason, detail=m.detail)
            for uid, y, derivation in m.clips:
                written = self._write(f"{safe_name(uid)}.flac", encode_audio(y, SAMPLE_RATE, "FLAC"))
                entry["clips"].append({"id": uid, **written, "duration_s": duration, "derivation": derivation})
            out["targets"].append(entry)
        return out

    def _write(self, name: str, data: bytes) -> dict[str, str]:
        _atomic_write_bytes(self.out_dir / name, data)
        return {"file": name, "sha256": hashlib.sha256(data).hexdigest()}

    def facts(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        return None


__all__ = [
    "MaskWorker",
    "SpeakerEmbedWorker",
    "TTSWorker",
    "WordTimingWorker",
    "clip_payload",
    "file_sha256",
    "float_wav",
    "read_clip",
    "render_speech",
    "tts_installation",
]
