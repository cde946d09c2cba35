"""Every recipe block and section declares its options once (engine/options.py) and refuses bad values the same way.

One table per block: a value of the wrong type (a quoted "false" for a boolean, a string for a
number), a value out of range, an unknown key (with "did you mean") and a NaN or infinity at any
depth. Each refusal names the file, the block and the key. Pure parsing: nothing loads or runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ConfigError

NAN, INF = math.nan, math.inf


def _recipe(raw: dict[str, Any]) -> Any:
    from audits.recipes import parse_recipe

    return parse_recipe({"dataset": "m.jsonl", "models": [], **raw}, "r.yaml")


def _emotion(raw: dict[str, Any]) -> Any:
    from audits.emotion.run import parse_emotion_config

    return parse_emotion_config({"backends": ["prosody"], **raw}, "r.yaml")


def _speaker(raw: dict[str, Any]) -> Any:
    from audits.speaker.run import parse_speaker_config

    return parse_speaker_config({"backends": ["resemblyzer"], **raw}, "r.yaml")


def _conversation(raw: dict[str, Any]) -> Any:
    from audits.conversation.run import parse_conversation_config

    return parse_conversation_config(raw, "r.yaml")


def _profiles(raw: dict[str, Any]) -> Any:
    from audits.profiles.config import parse_profiles_config

    return parse_profiles_config(raw, "r.yaml")


def _perturbations(raw: dict[str, Any]) -> Any:
    from audits.profiles.perturbations import parse_perturbations

    return parse_perturbations({"families": [{"kind": "speed", "levels": [1.1]}], **raw}, "r.yaml")


def _family(raw: dict[str, Any]) -> Any:
    from audits.profiles.perturbations import parse_perturbations

    return parse_perturbations({"families": [{"kind": "speed", "levels": [1.1], **raw}]}, "r.yaml")


def _probes(raw: dict[str, Any]) -> Any:
    from audits.probes.config import parse_probe_config

    return parse_probe_config(raw, "r.yaml", registry={})


BLOCKS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "recipe": _recipe,
    "dataset": lambda raw: _recipe({"dataset": {"path": "m.jsonl", **raw}}),
    "scoring": lambda raw: _recipe({"scoring": raw}),
    "emotion": _emotion,
    "speaker": _speaker,
    "judges": lambda raw: _speaker({"judges": {"backends": ["gemini"], **raw}}),
    "conversation": _conversation,
    "profiles": _profiles,
    "perturbations": _perturbations,
    "perturbation family": _family,
    "probes.masking": lambda raw: _probes({"masking": raw}),
    "probes.orthography": lambda raw: _probes({"orthography": raw}),
    "probes.bad_reference": lambda raw: _probes({"bad_reference": {"corrections": "c.txt", **raw}}),
    "probes.synthetic_voice": lambda raw: _probes({"masking": {}, "synthetic_voice": raw}),
}

CASES: list[tuple[str, dict[str, Any], str]] = [
    ("recipe", {"shard_size": "32"}, r"r\.yaml: shard_size: expected an integer, got str '32'"),
    ("recipe", {"warmup": -1}, r"r\.yaml: warmup: -1 is out of range; it must be >= 0"),
    ("recipe", {"shard_sise": 3}, r"r\.yaml: unknown key 'shard_sise' \(did you mean 'shard_size'\?\)"),
    ("recipe", {"models": ["a", 3]}, r"r\.yaml: models\[1\]: expected a string"),
    ("dataset", {"allow_outside_root": "false"}, r"r\.yaml: dataset\.allow_outside_root: expected a boolean"),
    ("dataset", {"limit": 0}, r"r\.yaml: dataset\.limit: 0 is out of range; it must be >= 1"),
    ("dataset", {"limt": 5}, r"r\.yaml: dataset: unknown key 'limt' \(did you mean 'limit'\?\)"),
    ("dataset", {"max_duration_s": NAN}, r"r\.yaml: dataset\.max_duration_s: expected a finite number"),
    ("dataset", {"options": {"x": [1.0, INF]}}, r"r\.yaml: dataset\.options\.x\[1\]: expected a finite number"),
    ("scoring", {"semantic_similarity": "false"}, r"r\.yaml: scoring\.semantic_similarity: expected a boolean"),
    ("scoring", {"n_boot": -1}, r"r\.yaml: scoring\.n_boot: -1 is out of range; it must be >= 1"),
    ("scoring", {"n_bot": 5}, r"r\.yaml: scoring: unknown key 'n_bot' \(did you mean 'n_boot'\?\)"),
    ("scoring", {"seed": NAN}, r"r\.yaml: scoring\.seed: expected an integer, got float nan"),
    ("emotion", {"derive_labels": "false"}, r"r\.yaml: emotion\.derive_labels: expected a boolean"),
    ("emotion", {"comparison_min_gap": "0.1"}, r"r\.yaml: emotion\.comparison_min_gap: expected a number, got str"),
    ("emotion", {"contrast_threshold": 9}, r"r\.yaml: emotion\.contrast_threshold: 9 is out of range; it must be >= 0 and <= 8"),
    ("emotion", {"contrast_treshold": 4}, r"r\.yaml: emotion: unknown key 'contrast_treshold' \(did you mean 'contrast_threshold'\?\)"),
    ("emotion", {"min_confidence": NAN}, r"r\.yaml: emotion\.min_confidence: expected a finite number"),
    ("emotion", {"backend_options": {"prosody": {"x": [NAN]}}}, r"r\.yaml: emotion\.backend_options\.prosody\.x\[0\]: expected a finite"),
    ("speaker", {"seed": "1"}, r"r\.yaml: speaker\.seed: expected an integer, got str '1'"),
    ("speaker", {"dev_fraction": 1.0}, r"r\.yaml: speaker\.dev_fraction: 1\.0 is out of range; it must be > 0 and < 1"),
    ("speaker", {"p_traget": 0.1}, r"r\.yaml: speaker: unknown key 'p_traget' \(did you mean 'p_target'\?\)"),
    ("speaker", {"threshold": NAN}, r"r\.yaml: speaker\.threshold: expected a finite number"),
    ("speaker", {"cohort": "false"}, r"r\.yaml: speaker\.cohort: expected false, true, 's-norm' or 'as-norm', got 'false'"),
    ("judges", {"max_items": 0}, r"r\.yaml: speaker\.judges\.max_items: 0 is out of range; it must be >= 1"),
    ("judges", {"seed": "0"}, r"r\.yaml: speaker\.judges\.seed: expected an integer"),
    ("judges", {"max_item": 5}, r"r\.yaml: speaker\.judges: unknown key 'max_item' \(did you mean 'max_items'\?\)"),
    (
        "judges",
        {"backend_options": {"gemini": {"temperature": NAN}}},
        r"judges\.backend_options\.gemini\.temperature: expected a finite number",
    ),
    ("conversation", {"oracle_speakers": "false"}, r"r\.yaml: conversation\.oracle_speakers: expected a boolean"),
    ("conversation", {"collar": 11}, r"r\.yaml: conversation\.collar: 11 is out of range; it must be >= 0 and <= 10"),
    ("conversation", {"colar": 1}, r"r\.yaml: conversation: unknown key 'colar' \(did you mean 'collar'\?\)"),
    ("conversation", {"tcp_collar": INF}, r"r\.yaml: conversation\.tcp_collar: expected a finite number"),
    ("profiles", {"gpu_hour_usd": "2"}, r"r\.yaml: profiles\.gpu_hour_usd: expected a number, got str '2'"),
    ("profiles", {"n_boot": 5}, r"r\.yaml: profiles\.n_boot: 5 is out of range; it must be >= 10"),
    ("profiles", {"seeds": 1}, r"r\.yaml: profiles: unknown key 'seeds' \(did you mean 'seed'\?\)"),
    ("profiles", {"alpha": NAN}, r"r\.yaml: profiles\.alpha: expected a finite number"),
    (
        "profiles",
        {"ladders": [{"column": "bg", "baseline": "clean", "levels": {"n20": NAN}}]},
        r"r\.yaml: profiles\.ladders\[0\]\.levels\.n20: expected a finite number",
    ),
    ("profiles", {"ladders": [{"column": "bg", "baseline": "clean", "levls": {}}]}, r"ladders\[0\]: unknown key 'levls' \(did you mean"),
    ("perturbations", {"seed": "1"}, r"r\.yaml: perturbations\.seed: expected an integer"),
    ("perturbations", {"n_boot": 5}, r"r\.yaml: perturbations\.n_boot: 5 is out of range; it must be >= 10"),
    ("perturbations", {"n_bot": 50}, r"r\.yaml: perturbations: unknown key 'n_bot' \(did you mean 'n_boot'\?\)"),
    ("perturbations", {"alpha": NAN}, r"r\.yaml: perturbations\.alpha: expected a finite number"),
    ("perturbation family", {"music_vocals": "false"}, r"r\.yaml: perturbations\.families\[0\]\.music_vocals: expected a boolean"),
    ("perturbation family", {"max_rir_s": 61}, r"families\[0\]\.max_rir_s: 61 is out of range; it must be > 0 and <= 60"),
    ("perturbation family", {"levls": [1]}, r"families\[0\]: unknown key 'levls' \(did you mean 'levels'\?\)"),
    ("perturbation family", {"levels": [NAN]}, r"r\.yaml: perturbations\.families\[0\]\.levels\[0\]: expected a finite number"),
    ("probes.masking", {"enabled": "false"}, r"r\.yaml: probes\.masking\.enabled: expected a boolean"),
    ("probes.masking", {"max_targets": 0}, r"r\.yaml: probes\.masking\.max_targets: 0 is out of range; it must be >= 1"),
    ("probes.masking", {"max_target": 1}, r"r\.yaml: probes\.masking: unknown key 'max_target' \(did you mean 'max_targets'\?\)"),
    ("probes.masking", {"pad_s": NAN}, r"r\.yaml: probes\.masking\.pad_s: expected a finite number"),
    ("probes.orthography", {"pool": "false"}, r"r\.yaml: probes\.orthography\.pool: expected a boolean"),
    ("probes.orthography", {"min_clips_per_arm": 0}, r"probes\.orthography\.min_clips_per_arm: 0 is out of range; it must be >= 1"),
    ("probes.orthography", {"pol": True}, r"r\.yaml: probes\.orthography: unknown key 'pol' \(did you mean 'pool'\?\)"),
    ("probes.orthography", {"min_clips_per_arm": NAN}, r"probes\.orthography\.min_clips_per_arm: expected a finite number, got nan"),
    ("probes.bad_reference", {"min_agree": "2"}, r"r\.yaml: probes\.bad_reference\.min_agree: expected an integer"),
    ("probes.bad_reference", {"min_agree": 0}, r"probes\.bad_reference\.min_agree: 0 is out of range; it must be >= 1"),
    ("probes.bad_reference", {"corections": "x"}, r"probes\.bad_reference: unknown key 'corections' \(did you mean 'corrections'\?\)"),
    ("probes.bad_reference", {"min_ref_match": NAN}, r"r\.yaml: probes\.bad_reference\.min_ref_match: expected a finite number"),
    (
        "probes.bad_reference",
        {"reference_errors": {"fraction": 0}},
        r"probes\.bad_reference\.reference_errors\.fraction: 0 is out of range; it must be > 0 and <= 1",
    ),
    ("probes.bad_reference", {"reference_errors": {"enabled": "false"}}, r"reference_errors\.enabled: expected a boolean"),
    ("probes.synthetic_voice", {"exclude_source_voice": "false"}, r"probes\.synthetic_voice\.exclude_source_voice: expected a boolean"),
    ("probes.synthetic_voice", {"max_clips": 0}, r"probes\.synthetic_voice\.max_clips: 0 is out of range; it must be >= 1"),
    ("probes.synthetic_voice", {"n_bot": 100}, r"probes\.synthetic_voice: unknown key 'n_bot' \(did you mean 'n_boot'\?\)"),
    ("probes.synthetic_voice", {"match_encoder_options": {"x": NAN}}, r"synthetic_voice\.match_encoder_options\.x: expected a finite"),
]


@pytest.mark.parametrize(("block", "raw", "message"), CASES, ids=[f"{b}-{next(iter(r))}-{i}" for i, (b, r, _) in enumerate(CASES)])
def test_a_bad_option_is_refused_naming_file_block_and_key(block: str, raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BLOCKS[block](raw)


def test_every_block_has_all_four_kinds_of_refusal() -> None:
    """Each block's table holds a bad type, a bad range, an unknown key and a non-finite number."""
    for block in BLOCKS:
        messages = [m for b, _, m in CASES if b == block]
        assert any("expected a" in m and "finite" not in m for m in messages), block
        assert any("out of range" in m or "expected false, true" in m for m in messages) or block == "recipe", block
        assert any("did you mean" in m for m in messages), block
        assert any("finite" in m or "float nan" in m for m in messages) or block == "recipe", block


ENTRY_CASES = [
    ("{backend: simulated, gated: 'false'}", r"model 'm'\.gated: expected a boolean \(true/false, unquoted\), got str 'false'"),
    ("{backend: simulated, params_m: '39'}", r"model 'm'\.params_m: expected a number, got str '39'"),
    ("{backend: simulated, batch_size: 0}", r"model 'm'\.batch_size: 0 is out of range; it must be >= 1"),
    ("{backend: simulated, batchsize: 8}", r"model 'm': unknown key 'batchsize' \(did you mean 'batch_size'\?\)"),
    ("{backend: simulated, rtfx: .nan}", r"model 'm'\.rtfx: expected a finite number"),
    ("{backend: simulated, options: {x: [1, .inf]}}", r"model 'm'\.options\.x\[1\]: expected a finite number"),
    (
        "{backend: simulated, rtfx: 2, measured: {fields: [rtfx], device: cpu, dtype: float32, batch: 1, by: x, treads: 2}}",
        r"model 'm'\.measured: unknown key 'treads' \(did you mean 'threads'\?\)",
    ),
]


@pytest.mark.parametrize(("entry", "message"), ENTRY_CASES)
def test_a_bad_model_registry_entry_is_refused_naming_file_model_and_key(tmp_path: Path, entry: str, message: str) -> None:
    from engine.model_registry import load_model_registry

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.yaml").write_text(f"models:\n  m: {entry}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"m\.yaml: " + message):
        load_model_registry(tmp_path)


def test_a_condition_map_file_names_its_bad_key(tmp_path: Path) -> None:
    from audits.profiles.maps import load_map

    p = tmp_path / "m.yaml"
    p.write_text(
        "name: m\noutputs: [t]\nallowed: {t: [a]}\nsources: {s: x}\nvalues: {v: {t: a, source: s}}\nprefix_falback: true\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"m\.yaml: unknown key 'prefix_falback' \(did you mean 'prefix_fallback'\?\)"):
        load_map(str(p), "r.yaml: profiles.condition_maps[0].map")


def test_defaults_are_the_declared_ones() -> None:
    """A block left empty is every declared default (the values fingerprints and settings digests hash)."""
    from audits.emotion.run import EmotionConfig
    from audits.speaker.run import SpeakerConfig

    emo = _emotion({})
    assert (emo.contrast_threshold, emo.batch_size, emo.pairs, emo.label, emo.label_given) == (4.0, 16, "auto", "emotion", False)
    assert isinstance(emo.contrast_threshold, float)
    spk = _speaker({"backend_options": None, "seed": None})
    assert (spk.max_per_class, spk.seed, spk.top_k, spk.backend_options) == (5000, 0, 100, {})
    assert set(EmotionConfig.declared()) >= {"backends", "judges"} and "label_given" not in EmotionConfig.declared()
    assert "trials" in SpeakerConfig.declared()
    rec = _recipe({})
    assert (rec.name, rec.scoring.n_boot, rec.dataset.path, rec.dataset.max_duration_s) == ("r", 1000, "m.jsonl", 1800.0)
