"""PocketSphinx backend: a classic HMM/n-gram recognizer whose en-US model ships in the package.

It is the cheap, fully offline, non-neural baseline of the demo. Batching gives no speed-up
for this decoder, so a batch is a loop over utterances with one reused decoder.

Search: ``search: accurate`` keeps the library's defaults (three passes: a tree search, a flat
lexicon search and a lattice best path, up to 30,000 active HMMs a frame). On noisy or musical
clips nearly every HMM stays inside the beams, so that search runs slower than real time.
``search: fast`` applies CMU's documented speed settings (``FAST_SEARCH``: the tree pass only,
at most 3,000 HMMs and 5 word exits a frame, a 10-frame phonetic lookahead); the measured cost
in WER is in docs/performance.md. Any single parameter can still be set on top of a preset.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from engine.backends.availability import Availability, install_hint
from engine.backends.base import ASRBackend, BackendInfo, BackendOptions, package_versions
from engine.backends.bundled import (
    check_audio_batch,
    pocketsphinx_model_dir,
    verified_weights_note,
    verify_package_weights,
)
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable
from engine.options import option

log = logging.getLogger(__name__)

FAST_SEARCH: dict[str, Any] = {"fwdflat": False, "bestpath": False, "maxhmmpf": 3000, "maxwpf": 5, "pl_window": 10}
"""CMU's speed settings for PocketSphinx (tuning guide): skip the flat-lexicon and best-path
passes, cap active HMMs and word exits per frame, look ahead 10 frames phonetically."""
_SEARCH_PRESETS: dict[str, dict[str, Any]] = {"accurate": {}, "fast": FAST_SEARCH}
_OVERRIDES = ("beam", "wbeam", "lw", "fwdflat", "bestpath", "maxhmmpf", "maxwpf", "pl_window")


@dataclass(frozen=True)
class PocketsphinxOptions(BackendOptions):
    """The model files and the decoder's search settings (numbers reach the decoder as floats where it takes floats)."""

    numbers_as_given: ClassVar[bool] = False

    model: str = option("en-us", "label only; the bundled model is the only built-in one")
    hmm: str | None = option(None, "acoustic model directory; null: the bundled en-US model")
    lm: str | None = option(None, "n-gram language model (.lm.bin / .lm); null: the bundled one")
    dict: str | None = option(None, "pronunciation dictionary; null: the bundled CMUdict")
    batch_size: int | None = option(None, "accepted for uniformity; decoding is one utterance at a time", ge=1, le=100_000)
    beam: float | None = option(None, "decoder beam width (pocketsphinx beam)", gt=0, le=1)
    wbeam: float | None = option(None, "word-exit beam width (pocketsphinx wbeam)", gt=0, le=1)
    lw: float | None = option(None, "language weight", gt=0, le=100)
    search: Literal["accurate", "fast"] = option("accurate", "accurate: the library's defaults; fast: CMU's speed settings")
    fwdflat: bool | None = option(None, "run the flat-lexicon pass (overrides the preset)")
    bestpath: bool | None = option(None, "run the lattice best-path pass (overrides the preset)")
    maxhmmpf: int | None = option(None, "cap on active HMMs per frame (overrides the preset)", ge=-1, le=10_000_000)
    maxwpf: int | None = option(None, "cap on word exits per frame (overrides the preset)", ge=-1, le=10_000_000)
    pl_window: int | None = option(None, "phonetic look-ahead window in frames (overrides the preset)", ge=0, le=1000)


class PocketsphinxBackend(ASRBackend):
    """PocketSphinx 5 with its bundled en-US acoustic model, CMUdict and n-gram LM by default."""

    name = "pocketsphinx"
    OPTIONS = PocketsphinxOptions
    options: PocketsphinxOptions
    requires = ("pocketsphinx",)
    extra = "bundled"

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """The en-US model bundled with the package, or the hmm/lm/dict paths the options name."""
        o = cls.parse_options(options)
        given = {k: v for k, v in (("hmm", o.hmm), ("lm", o.lm), ("dict", o.dict)) if v}
        if given:
            missing = [v for v in given.values() if not Path(v).exists()]
            if missing:
                return Availability(False, f"model path(s) not found: {', '.join(missing)}")
            return Availability(True, "model files given in the options")
        if pocketsphinx_model_dir() is None:
            return Availability(False, "the pocketsphinx package lacks its bundled en-US model; reinstall pocketsphinx")
        return Availability(True, "bundled en-US model in the pocketsphinx package")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._decoder: Any = None
        self._paths: dict[str, str] = {}
        self._bundled = False

    def _model_paths(self) -> dict[str, str]:
        bundled = pocketsphinx_model_dir()
        defaults = (
            {
                "hmm": str(bundled / "en-us"),
                "lm": str(bundled / "en-us.lm.bin"),
                "dict": str(bundled / "cmudict-en-us.dict"),
            }
            if bundled is not None
            else {}
        )
        paths: dict[str, str] = {}
        for key in ("hmm", "lm", "dict"):
            value = getattr(self.options, key)
            if value is None:
                if key not in defaults:
                    raise BackendUnavailable(
                        f"the pocketsphinx package has no bundled en-US model; reinstall pocketsphinx or pass '{key}' explicitly"
                    )
                paths[key] = defaults[key]
                continue
            path = Path(value).expanduser()
            if not path.exists():
                raise BackendUnavailable(f"{self.name}: '{key}' path {path} does not exist")
            paths[key] = str(path)
        return paths

    def load(self) -> None:
        """Build the decoder with logging silenced (it writes to stderr otherwise)."""
        try:
            from pocketsphinx import Decoder
        except ImportError as exc:
            raise BackendUnavailable(f"pocketsphinx is not installed; the 'bundled' extra installs it: {install_hint('bundled')}") from exc
        self._paths = self._model_paths()
        self._bundled = any(getattr(self.options, key) is None for key in ("hmm", "lm", "dict"))
        if self._bundled:
            verify_package_weights("pocketsphinx")  # the bundled model, as recorded for the pinned release
        kwargs: dict[str, Any] = dict(self._paths, samprate=SAMPLE_RATE, loglevel="FATAL", logfn=os.devnull)
        kwargs.update(self.search_settings())
        try:
            self._decoder = Decoder(**kwargs)
        except (ValueError, RuntimeError) as exc:
            raise BackendUnavailable(f"pocketsphinx could not load its model ({self._paths}): {exc}") from exc
        log.info("loaded pocketsphinx model %s", self._paths["hmm"])

    def search_settings(self) -> dict[str, Any]:
        """The decoder parameters this backend sets beyond the model paths: the preset, then overrides."""
        settings = dict(_SEARCH_PRESETS[self.options.search])
        for key in _OVERRIDES:
            if getattr(self.options, key) is not None:
                settings[key] = getattr(self.options, key)
        return settings

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """Decode each clip as one utterance (16-bit PCM, as the decoder expects)."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self._decoder is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        return [self._decode(c) for c in clips]

    def _decode(self, clip: np.ndarray) -> str:
        pcm = (np.clip(clip, -1.0, 1.0) * 32767.0).round().astype("<i2")
        decoder = self._decoder
        # The feature module keeps live cepstral-mean state from every clip decoded so far, so a
        # clip's text would depend on what this decoder heard before (a resumed run, another shard
        # order or another batch would differ). Rebuilding it makes every clip start from the
        # model's initial state, as with a fresh decoder (checked in tests/test_asr_backends.py).
        decoder.reinit_feat()
        decoder.start_utt()
        decoder.process_raw(pcm.tobytes(), False, True)
        decoder.end_utt()
        hyp = decoder.hyp()
        return hyp.hypstr.strip() if hyp is not None else ""

    def info(self) -> BackendInfo:
        """Model files and library version."""
        passes = "tree" if self.search_settings().get("fwdflat") is False else "tree + flat lexicon"
        if self.search_settings().get("bestpath") is not False:
            passes += " + lattice best path"
        extra: dict[str, Any] = {
            "model_paths": dict(self._paths),
            **({"weights": verified_weights_note("pocketsphinx")} if self._bundled else {}),
            "decoding": f"viterbi + n-gram LM ({passes})",
            "search": self.options.search,
            "search_settings": self.search_settings(),
            "cmn": "live, feature state reset before every clip (a clip's text does not depend on the clips before it)",
        }
        extra.update(package_versions("pocketsphinx"))
        return BackendInfo(
            backend=self.name,
            model_id=self.options.model,
            device="cpu",
            dtype="float32",
            batch_size=1,
            extra=extra,
        )

    def close(self) -> None:
        """Free the decoder."""
        self._decoder = None

    def __repr__(self) -> str:
        return f"PocketsphinxBackend(model={self.options.model!r})"
