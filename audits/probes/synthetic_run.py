"""Run the synthetic-voice probe end to end: choose the clips, render them in each arm's voice
(generic; matched to the speaker), run the models on the renditions with the engine, pair each
model's outcome on the real clip with its outcome on each rendition, and summarize.

What is measured and why is in ``audits.probes.synthetic_voice``; how the matched voice is chosen
in ``audits.probes.voice_match``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from audits.probes.config import ProbeConfig
from audits.probes.engine_io import failed_models, fresh_workspace, hyp_map, originals, run_models
from audits.probes.helper_passes import Clip, EngineTimings, EngineVoices, Rendered, Speech
from audits.probes.mask_pass import derive_renditions
from audits.probes.masking import derived_utterance
from audits.probes.state import ProbeState
from audits.probes.synthetic_voice import (
    LEAD_S,
    TAIL_S,
    Pair,
    SyntheticSettings,
    corrected_from_spans,
    masking_pairs,
    summarize_pairs,
)
from audits.probes.voice_match import (
    CALIBRATION_TEXT,
    MAX_WILDCARD,
    VoiceMatch,
    choose_voices,
    match_summary,
    mean_speaker_embeddings,
    source_voice,
    speaker_key,
    unit_vector,
)
from engine.audio.shards import write_shards
from engine.data import ModelSpec, ProgressFn, Utterance
from engine.datasets import Dataset, open_dataset
from engine.errors import AuditError
from engine.storage import atomic_write_text

log = logging.getLogger(__name__)


@dataclass
class _Selection:
    """The clips to re-synthesize and what each should say."""

    masking: list[str] = field(default_factory=list)  # parents where some model recovered a masked word
    mask_recs: list[tuple[Any, int]] = field(default_factory=list)
    mask_settings: Any = None
    spoken: dict[str, str] = field(default_factory=dict)  # masking parent -> text spoken
    bad_reference: list[tuple[str, str, str]] = field(default_factory=list)  # (clip, corrected text, how)


@dataclass(frozen=True)
class _Rendition:
    """One synthetic clip to render: its id, source probe, arm, the real clip, the voice and what it says."""

    uid: str
    source: str  # 'masking' | 'bad_reference'
    arm: str
    clip: str  # the real clip it stands in for
    voice: str  # engine:voice
    text: str  # what the voice says
    reference: str  # the reference the models are scored against
    extra: Mapping[str, Any] = field(default_factory=dict)


def _file_clip(unit: str, reference: str, rendered: Rendered) -> Clip:
    """A rendition as a clip for a helper pass (its file is fingerprinted by SHA-256)."""
    return Clip(unit, Utterance(unit, reference, audio_path=str(rendered.path), derivation={"probe": "synthetic_voice"}), None)


def _has_targets(reference: str, settings: Any) -> bool:
    from audits.probes.masking_score import select_mask_targets

    ner = settings.ner if "entity" in settings.kinds else None
    return bool(reference.strip()) and bool(select_mask_targets(reference, settings.max_targets, kinds=settings.kinds, ner=ner))


def _target_key(derivation: Mapping[str, Any]) -> tuple[int, int]:
    t = derivation["target"]
    return int(t["char_start"]), int(t["char_end"])


def _select(
    cfg: ProbeConfig,
    sv: SyntheticSettings,
    by_id: Mapping[str, Utterance],
    state: ProbeState,
    skipped: dict[str, int],
) -> _Selection:
    from audits.probes.bad_reference import Tokenizer, resolve_normalizer
    from audits.probes.masking_score import target_in_text

    sel = _Selection()
    ms = state.masking
    if "masking" in sv.sources and ms is not None and ms.records and cfg.masking is not None:
        build = ms.build
        primary = cfg.masking.primary_variant
        idx = {
            (build.parents[uid], _target_key(d)): int(d["target_index"]) for uid, d in build.derivations.items() if d["variant"] == primary
        }
        recs = [r for r in ms.records if r.variant == primary]
        leaked = sorted(
            {
                r.parent_id
                for r in recs
                if r.hyp_original and r.hyp_masked and target_in_text(r.target, r.hyp_original) and target_in_text(r.target, r.hyp_masked)
            }
        )
        for r in recs:
            k = idx.get((r.parent_id, (r.target.char_start, r.target.char_end)))
            if k is not None:
                sel.mask_recs.append((r, k))
        sel.mask_settings = replace(cfg.masking, variants=(primary,), primary_variant=primary)
        for parent in leaked[: sv.max_clips]:
            u = by_id.get(parent)
            if u is None:
                continue
            sel.masking.append(parent)
            sel.spoken[parent] = ((u.derivation or {}).get("tts") or {}).get("text_spoken") or u.reference or ""
    br = state.bad_reference
    if "bad_reference" in sv.sources and br is not None:
        report = br.report
        ref_clips = sorted({d.clip_id for m, r in report.results.items() for d in r.decisions if d.verdict == "ref"})
        settings = cfg.bad_reference.settings() if cfg.bad_reference else None
        tok = Tokenizer(resolve_normalizer(settings, None), settings.canonicalize_numbers) if settings else None
        for clip in ref_clips[: sv.max_clips]:
            if clip in br.plan:
                text, how = br.plan[clip]["original"], "planted-original"
            elif br.corrections and clip in br.corrections:
                text, how = br.corrections[clip], "corrections"
            elif tok is not None:
                text, how = corrected_from_spans(tok(br.refs[clip]), [s for s in report.spans if s.clip_id == clip]), "panel-spans"
            else:
                text, how = "", "panel-spans"
            if not text.strip():
                skipped["bad_reference:empty-corrected-text"] = skipped.get("bad_reference:empty-corrected-text", 0) + 1
                continue
            sel.bad_reference.append((clip, text, how))
    return sel


def _match_speakers(
    sv: SyntheticSettings,
    dataset: Dataset,
    all_utts: Sequence[Utterance],
    clip_ids: Sequence[str],
    voices: EngineVoices,
    root: Path,
    progress: ProgressFn | None,
) -> tuple[dict[str, VoiceMatch], dict[str, Any]]:
    """The matched voice of each speaker of ``clip_ids``; the summary's facts about the matching.

    The pool voices' calibration renditions (TTS) and every embedding (encoder) are keyed units on
    the run's engine (``EngineVoices``); only the cosine choice is made here.
    """
    pool, notes = voices.expand(sv.matched_pool, MAX_WILDCARD, progress)
    failed: dict[str, str] = {}
    calibration = voices.render([Speech(f"voice:{v}", v, CALIBRATION_TEXT) for v in pool], progress, failed)
    by_speaker: dict[str, list[Utterance]] = {}
    for u in sorted(all_utts, key=lambda u: u.utt_id):
        by_speaker.setdefault(speaker_key(u), []).append(u)
    by_clip = {u.utt_id: speaker_key(u) for u in all_utts}
    wanted = sorted({by_clip[c] for c in clip_ids if c in by_clip})
    chosen = {spk: by_speaker[spk][: sv.match_clips_per_speaker] for spk in wanted}
    clips = [_file_clip(f"voice:{v}", CALIBRATION_TEXT, calibration[f"voice:{v}"]) for v in pool if f"voice:{v}" in calibration]
    clips += [Clip(f"clip:{u.utt_id}", u, dataset.root) for spk in wanted for u in chosen[spk]]
    embedded = voices.embed(clips, progress)
    pool_emb: dict[str, np.ndarray] = {}
    for voice in pool:
        got = embedded.get(f"voice:{voice}") or {"error": failed.get(f"voice:{voice}", "not rendered")}
        if "embedding" in got:
            pool_emb[voice] = unit_vector(got["embedding"])
        else:
            notes.append(f"{voice} left out: {got['error']}")
            log.warning("synthetic_voice: pool voice %s left out: %s", voice, got["error"])
    spk_emb, counts = mean_speaker_embeddings({spk: [embedded[f"clip:{u.utt_id}"].get("embedding") for u in chosen[spk]] for spk in wanted})
    exclude = None
    if sv.exclude_source_voice:
        # the voice that made a speaker's clips: from their derivations, or a speaker label that names a pool voice
        exclude = {spk: {v for u in by_speaker[spk] if (v := source_voice(u))} | ({spk} & set(pool_emb)) for spk in wanted}
    matches = choose_voices(spk_emb, pool_emb, counts, exclude)
    file = root / "matched_voices.json"
    rows = [{**m.to_dict(), "excluded_source_voices": sorted((exclude or {}).get(s, ()))} for s, m in sorted(matches.items())]
    atomic_write_text(file, json.dumps(rows, indent=2))
    unmatched = [s for s in wanted if s not in matches]
    if unmatched:
        notes.append(f"{len(unmatched)} speaker(s) without a matched voice (no clip long enough to embed)")
    facts = match_summary(matches, [k for k in pool if k in pool_emb], notes, file, sv.match_encoder)
    facts["encoder_info"] = {
        "backend": sv.match_encoder,
        "options": dict(sv.match_encoder_options),
        **voices.facts.get(f"encoder:{sv.match_encoder}", {"runner": "stored: every embedding was computed earlier"}),
    }
    facts["match_clips_per_speaker"] = sv.match_clips_per_speaker
    facts["exclude_source_voice"] = sv.exclude_source_voice
    return matches, facts


def run_synthetic_voice(
    cfg: ProbeConfig,
    dataset: Dataset,
    specs: Sequence[ModelSpec],
    probes_dir: Path,
    timer: EngineTimings,
    progress: ProgressFn | None,
    state: ProbeState,
) -> dict[str, Any]:
    """``summary['probes']['synthetic_voice']``: per model real vs each arm, and the probe's facts."""
    from audits.probes.bad_reference import accept_ref

    sv = cfg.synthetic_voice
    if sv is None:
        raise AuditError("synthetic_voice: the probe is not configured")
    key = {
        "settings": asdict(sv),
        "masking": asdict(cfg.masking) if cfg.masking else None,
        "badref": asdict(cfg.bad_reference) if cfg.bad_reference else None,
        "dataset": dataset.fingerprint,
    }
    root = fresh_workspace(probes_dir, "synthetic_voice", key)
    from engine.backends import TTS_BACKENDS

    tts_options = {sv.tts: {"voice": sv.voice}} if sv.voice else {}
    own_voice = sv.voice or str(getattr(TTS_BACKENDS.get(sv.tts)(**tts_options.get(sv.tts, {})), "voice", ""))  # not loaded here
    voices = EngineVoices(probes_dir, state.engine, tts_options, sv.match_encoder, dict(sv.match_encoder_options), LEAD_S, TAIL_S)
    generic_voice = f"{sv.tts}:{own_voice}"
    names = [s.name for s in specs]
    all_utts = originals(dataset)
    by_id = {u.utt_id: u for u in all_utts}
    facts: dict[str, Any] = {"tts": {"engine": sv.tts, "voice": own_voice or None}, "arms": list(sv.arms)}
    skipped: dict[str, int] = {}
    sel = _select(cfg, sv, by_id, state, skipped)
    clip_ids = sel.masking + [c for c, _, _ in sel.bad_reference]

    matches: dict[str, VoiceMatch] = {}
    if "matched" in sv.arms and clip_ids:
        matches, facts["matched"] = _match_speakers(sv, dataset, all_utts, clip_ids, voices, root, progress)

    def voice_of(arm: str, clip: str) -> tuple[str, dict[str, Any]] | None:
        """(engine:voice, derivation facts) of ``clip`` in ``arm``; None when no voice matched its speaker."""
        if arm == "generic":
            return generic_voice, {}
        u = by_id.get(clip)
        m = matches.get(speaker_key(u)) if u is not None else None
        if m is None:
            return None
        return m.voice, {"matched_speaker": m.speaker, "similarity": round(m.similarity, 4)}

    def tts_facts(voice: str, version: str) -> dict[str, Any]:
        engine, name = voice.split(":", 1)
        return {"engine": engine, "voice": name, "version": version}

    # 1. what to render: one clean rendition per (arm, clip) whose arm has a voice for it
    plan: list[_Rendition] = []
    refs = state.bad_reference.refs if state.bad_reference is not None else {}
    for arm in sv.arms:
        suffix = "" if arm == "generic" else f"-{arm}"
        for parent in sel.masking:
            choice = voice_of(arm, parent)
            if choice is None:
                skipped[f"{arm}:no-matched-voice"] = skipped.get(f"{arm}:no-matched-voice", 0) + 1
                continue
            voice, extra = choice
            plan.append(
                _Rendition(f"{parent}~tts{suffix}", "masking", arm, parent, voice, sel.spoken[parent], by_id[parent].reference or "", extra)
            )
        for clip, text, how in sel.bad_reference:
            choice = voice_of(arm, clip)
            if choice is None:
                skipped[f"{arm}:no-matched-voice"] = skipped.get(f"{arm}:no-matched-voice", 0) + 1
                continue
            voice, extra = choice
            plan.append(
                _Rendition(
                    f"{clip}~tts-corrected{suffix}", "bad_reference", arm, clip, voice, text, refs[clip], {"corrected_from": how, **extra}
                )
            )
    # 2. render (TTS units on the engine: files under the voices work folder), 3. word timings of the masking renditions
    files = voices.render([Speech(r.uid, r.voice, r.text) for r in plan], progress)
    if sel.mask_settings is not None:
        need = [r for r in plan if r.source == "masking" and _has_targets(r.reference, sel.mask_settings)]
        timer.compute([_file_clip(r.uid, r.reference, files[r.uid]) for r in need], {r.uid: r.reference for r in need}, progress)
    # 4. the derived clips, made by the engine's workers: clean renditions (FLAC), and for the masking source the rendition masked again
    made, _ = derive_renditions(
        [(_file_clip(r.uid, r.reference, files[r.uid]), r.source == "masking") for r in plan],
        timer,
        sel.mask_settings,
        root / "derive",
        state.engine,
        progress,
    )
    rendered: list[Utterance] = []
    mask_ids: dict[str, dict[tuple[str, int], tuple[str, str]]] = {arm: {} for arm in sv.arms}
    br_ids: dict[str, dict[str, str]] = {arm: {} for arm in sv.arms}
    for r in plan:
        d = made[r.uid]
        der = {
            "probe": "synthetic_voice",
            "source": r.source,
            "arm": r.arm,
            "tts": tts_facts(r.voice, files[r.uid].version),
            "text_spoken": r.text,
            **r.extra,
        }
        clean = Utterance(
            r.uid,
            r.reference,
            audio_bytes=d.source,
            duration_s=d.duration_s,
            speaker=f"tts:{r.voice}",
            labels={},
            parent_id=r.clip,
            derivation=der,
        )
        rendered.append(clean)
        if r.source == "bad_reference":
            br_ids[r.arm][r.clip] = r.uid
            continue
        for s in d.skips:
            skipped[f"masking:{s.reason}"] = skipped.get(f"masking:{s.reason}", 0) + 1
        for uid, data, derivation in d.clips:
            k = int(derivation["target_index"])
            mu = derived_utterance(replace(clean, parent_id=None), uid, data, d.duration_s or 0.0, derivation)
            mu = replace(mu, parent_id=r.clip, derivation={**derivation, "probe": "synthetic_voice", "source": "masking", "arm": r.arm})
            rendered.append(mu)
            mask_ids[r.arm][(r.clip, k)] = (clean.utt_id, mu.utt_id)
    facts.update(
        **{f"n_{arm}_clips": sum(1 for u in rendered if (u.derivation or {}).get("arm") == arm) for arm in sv.arms},
        n_masking_clips=len(sel.masking),
        n_bad_reference_clips=len(sel.bad_reference),
        skipped=skipped,
    )
    if not rendered:
        facts.update(
            status="no-clips", note="no model wrote a bad reference or recovered a masked word, so there is nothing to re-synthesize"
        )
        return facts
    if cfg.synthetic_judges is not None:  # audio-LM judges: how synthetic each arm sounds (audits/probes/synthetic_judge.py)
        from audits.probes.synthetic_judge import judge_synthetic, real_and_rendered_arms

        clips = real_and_rendered_arms(rendered, by_id, dataset.root, cfg.synthetic_judges.max_items)
        facts["judges"] = judge_synthetic(cfg.synthetic_judges, clips, root, state.engine)
    (root / "derived").mkdir(parents=True, exist_ok=True)
    for old in (root / "derived").glob("shard-*.parquet"):
        old.unlink()
    write_shards(rendered, root / "derived", shard_size=64)
    rows, run_facts = run_models(open_dataset(root / "derived", "parquet"), specs, root, progress, state.engine)
    ghyps = hyp_map(rows)
    pairs: list[Pair] = []
    for arm in sv.arms:
        pairs += masking_pairs(sel.mask_recs, ghyps, mask_ids[arm], arm)
    br = state.bad_reference
    if br is not None and sel.bad_reference:
        report = br.report
        settings = cfg.bad_reference.settings() if cfg.bad_reference else None
        for arm in sv.arms:
            gen_ids = br_ids[arm]
            chosen = [(i, s) for i, s in enumerate(report.spans) if s.clip_id in gen_ids]
            spans = [s for _, s in chosen]
            for m in names:
                if m not in report.results or not spans:
                    continue
                real = {d.span_index: d.verdict for d in report.results[m].decisions}
                gh = {c: ghyps.get((m, gen_ids[c])) or "" for c in {s.clip_id for s in spans}}
                gres = accept_ref(spans, gh, br.refs, settings, model=m)
                for (orig_i, span), gd in zip(chosen, gres.decisions):
                    rv = real.get(orig_i)
                    if rv in (None, "ineligible") or gd.verdict == "ineligible":
                        continue
                    pairs.append(Pair(m, "bad_reference", span.clip_id, f"span-{orig_i}", int(rv == "ref"), int(gd.verdict == "ref"), arm))
    out: dict[str, Any] = summarize_pairs(pairs, names, sv.n_boot, sv.seed, sv.arms)
    failed = failed_models(run_facts)
    if failed:
        facts["failed_models"] = failed
    return {**out, **facts, "status": "ok"}
