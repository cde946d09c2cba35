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

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from audits.judging import JudgeConfig, parse_judge_config
from audits.probes.masking import MaskSettings
from audits.probes.synthetic_voice import SyntheticSettings
from audits.probes.word_timings import METHODS
from engine.config import check_keys, check_number, expect_type
from engine.errors import ConfigError

PROBE_KEYS = {"word_timings", "masking", "orthography", "bad_reference", "synthetic_voice"}
TIMING_KEYS = {"method", "model"}
MASKING_KEYS = {
    "enabled",
    "variants",
    "primary_variant",
    "max_targets",
    "pad_s",
    "min_clip_s",
    "kinds",
    "ner",
    "attenuate_db",
    "noise",
    "max_span_fraction",
    "seed",
}
ORTHO_KEYS = {"enabled", "min_clips_per_arm", "pool", "families"}
BADREF_KEYS = {
    "enabled",
    "panel",
    "supermajority",
    "min_agree",
    "min_eligible_panel",
    "min_ref_match",
    "min_deletion_cer",
    "corrections",
    "corrections_mode",
    "reference_errors",
}
REFERR_KEYS = {"enabled", "fraction", "kinds", "seed", "prepend", "append", "datasets"}
SYNTH_KEYS = {
    "enabled",
    "tts",
    "voice",
    "sources",
    "max_clips",
    "n_boot",
    "seed",
    "arms",
    "matched_pool",
    "match_encoder",
    "match_encoder_options",
    "match_clips_per_speaker",
    "exclude_source_voice",
    "judges",
}
ERROR_KINDS = ("prepend", "append", "drop-first", "drop-last")


# ------------------------------------------------------------------ configuration


@dataclass(frozen=True)
class TimingConfig:
    method: str = "auto"
    model: str = "whisper-tiny.en"


@dataclass(frozen=True)
class OrthographyConfig:
    min_clips_per_arm: int = 5
    pool: bool = False
    families: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ReferenceErrors:
    """Known reference errors planted in a copy of the dataset (see the module docstring)."""

    fraction: float = 0.5
    kinds: tuple[str, ...] = ERROR_KINDS
    seed: int = 0
    prepend: str = "Madam President,"
    append: str = "Thank you very much."
    datasets: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BadReferenceConfig:
    panel: tuple[str, ...]
    supermajority: float = 0.8
    min_agree: int = 2
    min_eligible_panel: int = 3
    min_ref_match: float = 0.5
    min_deletion_cer: float = 0.30
    corrections: str | None = None
    corrections_mode: str = "replace"
    reference_errors: ReferenceErrors | None = None

    def settings(self) -> Any:
        from audits.probes.bad_reference import BadRefSettings

        return BadRefSettings(
            supermajority=self.supermajority,
            min_agree=self.min_agree,
            min_ref_match=self.min_ref_match,
            min_eligible_panel=self.min_eligible_panel,
            min_deletion_cer=self.min_deletion_cer,
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


def _section(raw: Mapping[str, Any], key: str, allowed: set[str], where: str) -> dict[str, Any] | None:
    if key not in raw:
        return None
    sec = raw[key]
    if sec is None or sec is True:
        sec = {}
    if sec is False:
        return None
    check_keys(sec, allowed, f"{where}.{key}")
    if sec.get("enabled", True) is False:
        return None
    return {k: v for k, v in sec.items() if k != "enabled"}


def _num(sec: Mapping[str, Any], key: str, default: Any, where: str, types: Any = (int, float), **bounds: float) -> Any:
    """A number from the typed option layer: integers only from integers, finite, within ``bounds`` (ge/gt/le/lt)."""
    if key not in sec:
        return default
    return check_number(sec[key], f"{where}.{key}", integer=types is int, **bounds)


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    expect_type(value, list, where)
    for i, v in enumerate(value):
        expect_type(v, str, f"{where}[{i}]")
    return tuple(value)


def parse_probe_config(mapping: Mapping[str, Any] | None, source: str = "", registry: Mapping[str, Any] | None = None) -> ProbeConfig:
    """Validate a recipe's ``probes:`` mapping; every error names the recipe and the key.

    Pure apart from reading the model registry (to check panel names); called before any model loads.
    """
    where = f"{source}: probes" if source else "probes"
    raw = mapping or {}
    check_keys(raw, PROBE_KEYS, where)

    t = _section(raw, "word_timings", TIMING_KEYS, where) or {}
    timing = TimingConfig(method=str(t.get("method", "auto")), model=str(t.get("model", "whisper-tiny.en")))
    if timing.method not in METHODS:
        raise ConfigError(f"{where}.word_timings.method must be one of {list(METHODS)}, got '{timing.method}'")

    masking = None
    m = _section(raw, "masking", MASKING_KEYS, where)
    if m is not None:
        w = f"{where}.masking"
        variants = _str_list(m.get("variants", ["silence"]), f"{w}.variants")
        masking = MaskSettings(
            variants=variants,
            primary_variant=str(m.get("primary_variant", "silence" if "silence" in variants else variants[0] if variants else "silence")),
            max_targets=int(_num(m, "max_targets", 1, w, int, ge=1, le=1000)),
            pad_s=float(_num(m, "pad_s", 0.05, w, ge=0, le=10)),
            min_clip_s=float(_num(m, "min_clip_s", 1.0, w, ge=0, le=3600)),
            kinds=_str_list(m.get("kinds", ["number", "proper-noun"]), f"{w}.kinds"),
            ner=m.get("ner"),
            attenuate_db=float(_num(m, "attenuate_db", -30.0, w, ge=-200, le=0)),
            noise_color=str(m.get("noise", "pink")),
            max_span_fraction=float(_num(m, "max_span_fraction", 0.5, w, gt=0, le=1)),
            seed=int(_num(m, "seed", 0, w, int, ge=0, le=2**32 - 1)),
        )

    ortho = None
    o = _section(raw, "orthography", ORTHO_KEYS, where)
    if o is not None:
        w = f"{where}.orthography"
        fams = _str_list(o["families"], f"{w}.families") if o.get("families") is not None else None
        ortho = OrthographyConfig(int(_num(o, "min_clips_per_arm", 5, w, int)), expect_type(o.get("pool", False), bool, f"{w}.pool"), fams)
        if ortho.min_clips_per_arm < 1:
            raise ConfigError(f"{w}.min_clips_per_arm must be >= 1, got {ortho.min_clips_per_arm}")
        if fams is not None:
            from audits.probes.orthography import default_families

            known = [f.name for f in default_families(include_optional_compounds=True)]
            unknown = [f for f in fams if f not in known]
            if unknown:
                raise ConfigError(f"{w}.families: unknown family {unknown}; known: {', '.join(known)}")

    badref = None
    b = _section(raw, "bad_reference", BADREF_KEYS, where)
    if b is not None:
        badref = _parse_badref(b, f"{where}.bad_reference", registry)

    synth = None
    s = _section(raw, "synthetic_voice", SYNTH_KEYS, where)
    synth_judges = parse_judge_config(s.get("judges"), f"{where}.synthetic_voice.judges") if s is not None else None
    if s is not None:
        w = f"{where}.synthetic_voice"
        sources = _str_list(s.get("sources", ["masking", "bad_reference"]), f"{w}.sources")
        synth = _parse_synthetic(s, w, sources)
        usable = [src for src in synth.sources if (src == "masking" and masking) or (src == "bad_reference" and badref)]
        if not usable:
            raise ConfigError(f"{w}: its sources {list(synth.sources)} need the masking or bad_reference probe; enable one of them")
    return ProbeConfig(timing, masking, ortho, badref, synth, source, synth_judges)


def _parse_synthetic(s: Mapping[str, Any], w: str, sources: tuple[str, ...]) -> SyntheticSettings:
    from audits.probes.synthetic_voice import ARMS, DEFAULT_POOL
    from audits.probes.voice_match import parse_pool
    from engine.backends import SV_BACKENDS, TTS_BACKENDS
    from engine.errors import RegistryError

    arms = _str_list(s.get("arms", list(ARMS)), f"{w}.arms")
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms or len(set(arms)) != len(arms):
        raise ConfigError(f"{w}.arms: {unknown or list(arms)} is not one or both of {list(ARMS)} (each once)")
    raw_pool = s.get("matched_pool", list(DEFAULT_POOL))
    if not isinstance(raw_pool, (list, tuple)):
        raise ConfigError(
            f"{w}.matched_pool must be a list of 'engine:voice' entries (e.g. ['flite:slt', 'espeak-ng:en-us+m3', 'kokoro:*'])"
        )
    pool = parse_pool(raw_pool, f"{w}.matched_pool") if "matched" in arms else tuple(str(p) for p in raw_pool)
    encoder = str(s.get("match_encoder", "resemblyzer"))
    encoder_options = expect_type(s.get("match_encoder_options") or {}, dict, f"{w}.match_encoder_options")
    try:
        TTS_BACKENDS.get(str(s.get("tts", "espeak-ng")))
    except RegistryError as exc:
        raise ConfigError(f"{w}.tts: {exc}") from None
    try:
        SV_BACKENDS.get(encoder)
    except RegistryError as exc:
        raise ConfigError(f"{w}.match_encoder: {exc}") from None
    return SyntheticSettings(
        tts=str(s.get("tts", "espeak-ng")),
        voice=s.get("voice"),
        sources=sources,
        max_clips=int(_num(s, "max_clips", 200, w, int, ge=1, le=1_000_000)),
        n_boot=int(_num(s, "n_boot", 1000, w, int, ge=1, le=100_000)),
        seed=int(_num(s, "seed", 0, w, int, ge=0, le=2**32 - 1)),
        arms=arms,
        matched_pool=pool,
        match_encoder=encoder,
        match_encoder_options=tuple(sorted((str(k), v) for k, v in encoder_options.items())),
        match_clips_per_speaker=int(_num(s, "match_clips_per_speaker", 5, w, int, ge=1, le=10_000)),
        exclude_source_voice=expect_type(s.get("exclude_source_voice", True), bool, f"{w}.exclude_source_voice"),
    )


def _parse_badref(b: Mapping[str, Any], w: str, registry: Mapping[str, Any] | None) -> BadReferenceConfig:
    panel = _str_list(b.get("panel", []) or [], f"{w}.panel")
    corrections = b.get("corrections")
    mode = str(b.get("corrections_mode", "replace"))
    if mode not in ("replace", "confirm"):
        raise ConfigError(f"{w}.corrections_mode must be 'replace' or 'confirm', got '{mode}'")
    cfg = BadReferenceConfig(
        panel=panel,
        supermajority=float(_num(b, "supermajority", 0.8, w)),
        min_agree=int(_num(b, "min_agree", 2, w, int, ge=1)),
        min_eligible_panel=int(_num(b, "min_eligible_panel", 3, w, int, ge=1)),
        min_ref_match=float(_num(b, "min_ref_match", 0.5, w)),
        min_deletion_cer=float(_num(b, "min_deletion_cer", 0.30, w)),
        corrections=None if corrections is None else str(expect_type(corrections, str, f"{w}.corrections")),
        corrections_mode=mode,
    )
    cfg.settings()  # range checks of the thresholds
    needs_panel = not (cfg.corrections and cfg.corrections_mode == "replace")
    if needs_panel and not panel:
        raise ConfigError(
            f"{w}.panel is empty: name at least {cfg.min_eligible_panel} registry ASR models, chosen independently of "
            "the models under test, whose consensus decides which reference words were not spoken "
            "(or give corrections: a file of human-verified references)"
        )
    if needs_panel and len(panel) < cfg.min_eligible_panel:
        raise ConfigError(
            f"{w}.panel has {len(panel)} model(s) ({', '.join(panel)}) but min_eligible_panel is {cfg.min_eligible_panel}: "
            "no clip could ever reach a consensus; add panel models or lower min_eligible_panel"
        )
    dupes = sorted({p for p in panel if panel.count(p) > 1})
    if dupes:
        raise ConfigError(f"{w}.panel names {dupes} more than once; a panel member votes once")
    if panel:
        from engine.model_registry import load_model_registry, resolve_models

        reg = registry if registry is not None else load_model_registry()
        try:
            entries = resolve_models(list(panel), reg)  # type: ignore[arg-type]
        except ConfigError as exc:
            raise ConfigError(f"{w}.panel: {exc}") from None
        from engine.backends import asr_capabilities

        ctrl = [e.name for e in entries if asr_capabilities(e.backend).positive_control]
        if ctrl:
            raise ConfigError(
                f"{w}.panel: {ctrl} is a positive control (its backend answers from the references), not an independent listener"
            )
    re_raw = b.get("reference_errors")
    if re_raw not in (None, False):
        rw = f"{w}.reference_errors"
        re_raw = {} if re_raw is True else re_raw
        check_keys(re_raw, REFERR_KEYS, rw)
        if re_raw.get("enabled", True) is not False:
            kinds = _str_list(re_raw.get("kinds", list(ERROR_KINDS)), f"{rw}.kinds")
            bad = [k for k in kinds if k not in ERROR_KINDS]
            if bad or not kinds:
                raise ConfigError(f"{rw}.kinds: {bad or 'empty'}; choose from {list(ERROR_KINDS)}")
            frac = float(_num(re_raw, "fraction", 0.5, rw))
            if not 0.0 < frac <= 1.0:
                raise ConfigError(f"{rw}.fraction must be in (0, 1], got {frac}")
            ds = re_raw.get("datasets")
            cfg = replace(
                cfg,
                reference_errors=ReferenceErrors(
                    fraction=frac,
                    kinds=kinds,
                    seed=int(_num(re_raw, "seed", 0, rw, int, ge=0, le=2**32 - 1)),
                    prepend=str(re_raw.get("prepend", "Madam President,")),
                    append=str(re_raw.get("append", "Thank you very much.")),
                    datasets=None if ds is None else _str_list(ds, f"{rw}.datasets"),
                ),
            )
    return cfg
