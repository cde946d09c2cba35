"""The ``probes:`` section of a recipe: typed settings and their validation (pure, before any model loads).

``parse_probe_config`` checks every key and names the recipe file and key in its errors; the
result (``ProbeConfig``) is what ``audits.probes.run.run_probes`` executes.

Recipe schema (every key optional; a probe runs when its key is present and ``enabled`` is not false)::

    probes:
      word_timings: {method: auto|ctc|whisper, model: whisper-tiny.en}
      masking: {variants: [silence, noise, attenuate], primary_variant: silence, max_targets: 1,
                pad_s: 0.05, min_clip_s: 1.0, kinds: [number, proper-noun], ner: null,
                attenuate_db: -30, noise: pink, max_span_fraction: 0.5, seed: 0}
      orthography: {min_clips_per_arm: 5, pool: false, families: null}
      bad_reference: {panel: [a, b, c], supermajority: 0.8, min_agree: 2, min_eligible_panel: 3,
                      min_ref_match: 0.5, corrections: null, corrections_mode: replace,
                      reference_errors: {fraction: 0.5, kinds: [...], seed: 0, datasets: [demo]}}
      synthetic_voice: {tts: espeak-ng, voice: null, sources: [masking, bad_reference],
                        max_clips: 200, n_boot: 1000, seed: 0, arms: [generic, matched],
                        matched_pool: [flite:slt, ..., espeak-ng:en-us+m3, ..., kokoro:*],
                        match_encoder: resemblyzer, match_encoder_options: {},
                        match_clips_per_speaker: 5,
                        exclude_source_voice: true,
                        judges: null}   # audio-LM judges: synthetic-speech likelihood per arm (audits/judging.py)

``reference_errors`` (for corpora whose references are right, like the demo corpus) plants known,
recorded reference errors in a copy of the dataset: the bad-reference probe then runs on that copy,
a memorizer that indexes the run's dataset indexes the *corrupted* copy (as a model that learned
the published benchmark would), honest models transcribe the same audio, and the summary says how
many planted errors the panel found. ``datasets`` limits planting to datasets of those names, so
``--dataset OTHER`` audits OTHER as it is.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from audits.judging import JudgeConfig, parse_judge_config
from audits.probes.masking import MaskSettings
from audits.probes.synthetic_voice import SyntheticSettings
from audits.probes.word_timings import METHODS
from engine.errors import ConfigError
from engine.options import Options, check_value, option

ErrorKind = Literal["prepend", "append", "drop-first", "drop-last"]
ERROR_KINDS: tuple[str, ...] = typing.get_args(ErrorKind)


# ------------------------------------------------------------------ configuration


def _names(value: Any, where: str) -> tuple[str, ...]:
    """A list of strings; a single string stands for a list of one."""
    return check_value(tuple[str, ...], [value] if isinstance(value, str) else value, where)  # type: ignore[no-any-return]


def _word_timing_method(value: str, where: str) -> str:
    if value not in METHODS:
        raise ConfigError(f"{where} must be one of {list(METHODS)}, got '{value}'")
    return value


@dataclass(frozen=True)
class TimingConfig(Options):
    """``probes.word_timings``: how word timings are found (the masking probe hides words at them)."""

    method: str = option("auto", "auto, ctc or whisper", parse=_word_timing_method)
    model: str = option("whisper-tiny.en", "the registry model whose word timestamps are used")


@dataclass(frozen=True)
class OrthographyConfig(Options):
    """``probes.orthography``: do models write the benchmark's spelling of words it spells one way?"""

    min_clips_per_arm: int = option(5, "fewest clips per arm for a verdict", ge=1)
    pool: bool = option(False, "pool the families into one verdict")
    families: tuple[str, ...] | None = option(
        None, "the spelling families to test (default: all)", accepts=Any, parse=_names, kind_doc="list (or one text)"
    )

    def validate(self, where: str) -> None:
        if self.families is None:
            return
        from audits.probes.orthography import default_families

        known = [f.name for f in default_families(include_optional_compounds=True)]
        unknown = [f for f in self.families if f not in known]
        if unknown:
            raise ConfigError(f"{where}.families: unknown family {unknown}; known: {', '.join(known)}")


def _error_kinds(value: Any, where: str) -> tuple[str, ...]:
    kinds = _names(value, where)
    bad = [k for k in kinds if k not in ERROR_KINDS]
    if bad or not kinds:
        raise ConfigError(f"{where}: {bad or 'empty'}; choose from {list(ERROR_KINDS)}")
    return kinds


@dataclass(frozen=True)
class ReferenceErrors(Options):
    """Known reference errors planted in a copy of the dataset (see the module docstring)."""

    fraction: float = option(0.5, "share of clips given a planted error", gt=0, le=1)
    kinds: tuple[str, ...] = option(ERROR_KINDS, "which errors to plant", accepts=Any, parse=_error_kinds, kind_doc="list (or one text)")
    seed: int = option(0, "seed of the planted errors", ge=0, le=2**32 - 1)
    prepend: str = option("Madam President,", "the words a prepend error adds")
    append: str = option("Thank you very much.", "the words an append error adds")
    datasets: tuple[str, ...] | None = option(
        None, "plant only in datasets of these names", accepts=Any, parse=_names, kind_doc="list (or one text)"
    )


_BLOCK_KIND = "mapping, true, false or null"


def _block(record: type[Options], switch: bool = True) -> Any:
    """The ``parse`` of a probe's block: ``null`` or ``true`` is every default, ``false`` (or, when the
    block takes ``enabled``, ``enabled: false``) turns it off (None); else the record's keys."""

    def parse(value: Any, where: str) -> Any:
        if value is None or value is True:
            value = {}
        if value is False:
            return None
        data = check_value(dict[str, Any], value, where)
        enabled = True
        if switch and "enabled" in data:
            enabled = check_value(bool, data["enabled"], f"{where}.enabled")
            data = {k: v for k, v in data.items() if k != "enabled"}
        rec = record.parse(data, where)
        return rec if enabled else None

    return parse


@dataclass(frozen=True)
class BadReferenceConfig(Options):
    """``probes.bad_reference``: references a consensus panel says were not spoken (or a file of corrections)."""

    panel: tuple[str, ...] = option(
        (),
        "registry ASR models, independent of those under test",
        accepts=Any,
        parse=_names,
        kind_doc="list (or one text)",
        null_default=True,
    )
    supermajority: float = option(0.8, "share of the eligible panel that must agree")
    min_agree: int = option(2, "fewest agreeing panel models", ge=1)
    min_eligible_panel: int = option(3, "fewest panel models that heard a clip", ge=1)
    min_ref_match: float = option(0.5, "smallest match of a panel model's transcript with the reference")
    min_deletion_cer: float = option(0.30, "smallest CER of a deletion flagged as not spoken")
    corrections: str | None = option(None, "a file of human-verified references")
    corrections_mode: Literal["replace", "confirm"] = option("replace", "replace the panel, or confirm its findings")
    reference_errors: ReferenceErrors | None = option(
        None, "plant known reference errors in a copy of the dataset", accepts=Any, parse=_block(ReferenceErrors), kind_doc=_BLOCK_KIND
    )

    def settings(self) -> Any:
        from audits.probes.bad_reference import BadRefSettings

        return BadRefSettings(
            supermajority=self.supermajority,
            min_agree=self.min_agree,
            min_ref_match=self.min_ref_match,
            min_eligible_panel=self.min_eligible_panel,
            min_deletion_cer=self.min_deletion_cer,
        )

    def validate(self, where: str) -> None:
        self.settings()  # range checks of the thresholds
        panel = self.panel
        needs_panel = not (self.corrections and self.corrections_mode == "replace")
        if needs_panel and not panel:
            raise ConfigError(
                f"{where}.panel is empty: name at least {self.min_eligible_panel} registry ASR models, chosen independently of "
                "the models under test, whose consensus decides which reference words were not spoken "
                "(or give corrections: a file of human-verified references)"
            )
        if needs_panel and len(panel) < self.min_eligible_panel:
            raise ConfigError(
                f"{where}.panel has {len(panel)} model(s) ({', '.join(panel)}) but min_eligible_panel is {self.min_eligible_panel}: "
                "no clip could ever reach a consensus; add panel models or lower min_eligible_panel"
            )
        dupes = sorted({p for p in panel if panel.count(p) > 1})
        if dupes:
            raise ConfigError(f"{where}.panel names {dupes} more than once; a panel member votes once")


@dataclass(frozen=True)
class MaskingOptions(Options):
    """``probes.masking``: hide target words and see whether a model still writes them (``MaskSettings``)."""

    variants: tuple[str, ...] = option(
        ("silence",), "how words are hidden: silence, noise, attenuate", accepts=Any, parse=_names, kind_doc="list (or one text)"
    )
    primary_variant: str | None = option(None, "the variant the verdict uses (default: silence when listed, else the first)")
    max_targets: int = option(1, "target words hidden per clip", ge=1, le=1000)
    pad_s: float = option(0.05, "seconds hidden each side of a word", ge=0, le=10)
    min_clip_s: float = option(1.0, "shortest clip masked (seconds)", ge=0, le=3600)
    kinds: tuple[str, ...] = option(
        ("number", "proper-noun"), "which words are targets", accepts=Any, parse=_names, kind_doc="list (or one text)"
    )
    ner: str | None = option(None, "spaCy model for 'entity' targets")
    attenuate_db: float = option(-30.0, "the attenuate variant's cut (dB)", ge=-200, le=0)
    noise: str = option("pink", "the noise variant's colour")
    max_span_fraction: float = option(0.5, "most of a clip hidden", gt=0, le=1)
    seed: int = option(0, "seed of the target choice and noise", ge=0, le=2**32 - 1)

    def settings(self) -> MaskSettings:
        primary = self.primary_variant
        if primary is None:
            primary = "silence" if "silence" in self.variants else self.variants[0] if self.variants else "silence"
        return MaskSettings(
            variants=self.variants,
            primary_variant=primary,
            max_targets=self.max_targets,
            pad_s=self.pad_s,
            min_clip_s=self.min_clip_s,
            kinds=self.kinds,
            ner=self.ner,
            attenuate_db=self.attenuate_db,
            noise_color=self.noise,
            max_span_fraction=self.max_span_fraction,
            seed=self.seed,
        )


@dataclass(frozen=True)
class SyntheticOptions(Options):
    """``probes.synthetic_voice``: the masking and bad-reference clips again in synthetic voices (``SyntheticSettings``)."""

    tts: str = option("espeak-ng", "the TTS backend of the generic arm")
    voice: str | None = option(None, "its voice (default: the backend's)")
    sources: tuple[str, ...] = option(
        ("masking", "bad_reference"), "the probes whose clips are re-voiced", accepts=Any, parse=_names, kind_doc="list (or one text)"
    )
    max_clips: int = option(200, "most clips re-voiced", ge=1, le=1_000_000)
    n_boot: int = option(1000, "bootstrap replicates", ge=1, le=100_000)
    seed: int = option(0, "seed of the clip sample", ge=0, le=2**32 - 1)
    arms: tuple[str, ...] = option(
        ("generic", "matched"), "generic and/or matched voices", accepts=Any, parse=_names, kind_doc="list (or one text)"
    )
    matched_pool: tuple[Any, ...] | None = option(None, "'engine:voice' entries the matched voice is chosen from (null: the shipped pool)")
    match_encoder: str = option("resemblyzer", "the speaker encoder that picks the matched voice")
    match_encoder_options: dict[str, Any] = option({}, "its options", null_default=True)
    match_clips_per_speaker: int = option(5, "clips per source speaker the match is made from", ge=1, le=10_000)
    exclude_source_voice: bool = option(True, "never pick the clip's own voice")
    judges: JudgeConfig | None = option(
        None, "audio-LM judges: synthetic-speech likelihood per arm", accepts=dict[str, Any] | None, parse=parse_judge_config
    )

    def settings(self, w: str) -> SyntheticSettings:
        from audits.probes.synthetic_voice import ARMS, DEFAULT_POOL
        from audits.probes.voice_match import parse_pool
        from engine.backends import SV_BACKENDS, TTS_BACKENDS
        from engine.errors import RegistryError

        arms = self.arms
        unknown = [a for a in arms if a not in ARMS]
        if unknown or not arms or len(set(arms)) != len(arms):
            raise ConfigError(f"{w}.arms: {unknown or list(arms)} is not one or both of {list(ARMS)} (each once)")
        raw_pool = DEFAULT_POOL if self.matched_pool is None else self.matched_pool
        pool = parse_pool(raw_pool, f"{w}.matched_pool") if "matched" in arms else tuple(str(p) for p in raw_pool)
        try:
            TTS_BACKENDS.get(self.tts)
        except RegistryError as exc:
            raise ConfigError(f"{w}.tts: {exc}") from None
        try:
            SV_BACKENDS.get(self.match_encoder)
        except RegistryError as exc:
            raise ConfigError(f"{w}.match_encoder: {exc}") from None
        return SyntheticSettings(
            tts=self.tts,
            voice=self.voice,
            sources=self.sources,
            max_clips=self.max_clips,
            n_boot=self.n_boot,
            seed=self.seed,
            arms=arms,
            matched_pool=pool,
            match_encoder=self.match_encoder,
            match_encoder_options=tuple(sorted((str(k), v) for k, v in self.match_encoder_options.items())),
            match_clips_per_speaker=self.match_clips_per_speaker,
            exclude_source_voice=self.exclude_source_voice,
        )


@dataclass(frozen=True)
class ProbesOptions(Options):
    """The ``probes:`` block; a probe runs when its key is present and not ``false`` (nor ``enabled: false``)."""

    word_timings: TimingConfig | None = option(
        None, "how word timings are found", accepts=Any, parse=_block(TimingConfig, switch=False), kind_doc=_BLOCK_KIND
    )
    masking: MaskingOptions | None = option(None, "the masking probe", accepts=Any, parse=_block(MaskingOptions), kind_doc=_BLOCK_KIND)
    orthography: OrthographyConfig | None = option(
        None, "the orthography probe", accepts=Any, parse=_block(OrthographyConfig), kind_doc=_BLOCK_KIND
    )
    bad_reference: BadReferenceConfig | None = option(
        None, "the bad-reference probe", accepts=Any, parse=_block(BadReferenceConfig), kind_doc=_BLOCK_KIND
    )
    synthetic_voice: SyntheticOptions | None = option(
        None, "the synthetic-voice probe", accepts=Any, parse=_block(SyntheticOptions), kind_doc=_BLOCK_KIND
    )


@dataclass(frozen=True)
class ProbeConfig:
    """Validated ``probes:`` section of a recipe; a probe is None when it does not run."""

    timing: TimingConfig = TimingConfig()
    masking: MaskSettings | None = None
    orthography: OrthographyConfig | None = None
    bad_reference: BadReferenceConfig | None = None
    synthetic_voice: SyntheticSettings | None = None
    source: str = ""
    synthetic_judges: JudgeConfig | None = None  # probes.synthetic_voice.judges (audits/judging.py)

    @property
    def enabled(self) -> list[str]:
        return [n for n in ("masking", "orthography", "bad_reference", "synthetic_voice") if getattr(self, n) is not None]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_probe_config(mapping: Mapping[str, Any] | None, source: str = "", registry: Mapping[str, Any] | None = None) -> ProbeConfig:
    """Validate a recipe's ``probes:`` mapping; every error names the recipe and the key.

    Pure apart from reading the model registry (to check panel names); called before any model loads.
    """
    where = f"{source}: probes" if source else "probes"
    opts = ProbesOptions.parse(mapping or {}, where)
    masking = None if opts.masking is None else opts.masking.settings()
    badref = opts.bad_reference
    if badref is not None and badref.panel:
        _check_panel(badref.panel, f"{where}.bad_reference", registry)
    synth = None
    s = opts.synthetic_voice
    if s is not None:
        w = f"{where}.synthetic_voice"
        synth = s.settings(w)
        usable = [src for src in synth.sources if (src == "masking" and masking) or (src == "bad_reference" and badref)]
        if not usable:
            raise ConfigError(f"{w}: its sources {list(synth.sources)} need the masking or bad_reference probe; enable one of them")
    timing = opts.word_timings or TimingConfig()
    return ProbeConfig(timing, masking, opts.orthography, badref, synth, source, None if s is None else s.judges)


def _check_panel(panel: tuple[str, ...], w: str, registry: Mapping[str, Any] | None) -> None:
    from engine.backends import asr_capabilities
    from engine.model_registry import load_model_registry, resolve_models

    reg = registry if registry is not None else load_model_registry()
    try:
        entries = resolve_models(list(panel), reg)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ConfigError(f"{w}.panel: {exc}") from None
    ctrl = [e.name for e in entries if asr_capabilities(e.backend).positive_control]
    if ctrl:
        raise ConfigError(f"{w}.panel: {ctrl} is a positive control (its backend answers from the references), not an independent listener")
