"""Robustness profiles: condition maps against their files, every figure against an independent computation."""

from __future__ import annotations

import json
from pathlib import Path

import jiwer
import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import kendalltau

from audits.asr.scoring import score_table
from audits.clips import rows_for
from audits.normalizing import get_normalizer
from audits.profiles.config import STUDY_GAPS, parse_profiles_config
from audits.profiles.maps import conditions_dir, load_map, normalize_value
from audits.profiles.report import profiles_lines, render_profiles
from audits.profiles.results import ProfilesResult
from audits.profiles.run import compute_profiles
from audits.profiles.section import ProfilesSection
from audits.profiles.stats import kendall_tau_b
from engine.config import load_yaml
from engine.errors import ConfigError

PREDS = Path(__file__).resolve().parent / "fixtures" / "voxpopuli-150-predictions"
ACCENTS = ["en-us", "en-gb", "Indian English", "nigerian", "japanese", "German", "martian"]
EMOTIONS = ["neutral", "happy", "angry", "sad", "excited", "frustrated"]
BACKGROUNDS = ["clean", "noise-20db", "noise-10db", "noise-5db", "music", "babble"]
NORM = get_normalizer("whisper-english")


@pytest.fixture(scope="module")
def scored() -> pd.DataFrame:
    """Five real models' VoxPopuli predictions, with labels assigned by clip (30 speakers)."""
    rows = []
    for f in sorted(PREDS.glob("*.jsonl")):
        for i, line in enumerate(f.read_text().splitlines()):
            r = json.loads(line)
            spk = i % 30
            rows.append(
                {
                    "utt_id": f"u{i}",
                    "model": f.stem,
                    "ref_raw": r["text"],
                    "hyp_raw": r["pred_text"],
                    "duration_s": 5.0,
                    "infer_s": 0.1 * (1 + len(f.stem) % 3),
                    "error": None,
                    "speaker": f"s{spk}",
                    "shard": "s0",
                    "parent_id": None,
                    "accent": ACCENTS[spk % len(ACCENTS)],
                    "emotion": EMOTIONS[i % len(EMOTIONS)],
                    "background": BACKGROUNDS[(i // 2) % len(BACKGROUNDS)],
                    "conversation": "single" if i % 3 else "overlap",
                }
            )
    return score_table(pd.DataFrame(rows), NORM).frame


CONFIG = {
    "condition_maps": [
        {"map": "kachru", "column": "accent"},
        {"map": "emotion-quadrants", "column": "emotion"},
        {"map": "background", "column": "background"},
    ],
    "columns": ["conversation"],
    "n_boot": 200,
    "gpu_hour_usd": 2.0,
    "breaking_margin": 0.01,
    "ladders": [
        {"column": "background", "baseline": "clean", "levels": {"noise-20db": 20, "noise-10db": 10, "noise-5db": 5}, "unit": "dB SNR"}
    ],
}


@pytest.fixture(scope="module")
def result(scored: pd.DataFrame) -> dict:
    return compute_profiles(scored, parse_profiles_config(CONFIG, "recipe.yaml"))


def direct_wer(frame: pd.DataFrame, model: str, mask: pd.Series) -> float:
    sub = frame[(frame["model"] == model) & mask & (frame["ref_norm"] != "")]
    return jiwer.wer(list(sub["ref_norm"]), list(sub["hyp_norm"]))


def mapped_mask(frame: pd.DataFrame, column: str, values: set[str]) -> pd.Series:
    return frame[column].isin(values)


# ---------------------------------------------------------------- maps against their files


@pytest.mark.parametrize("name", ["kachru", "emotion-quadrants", "background"])
def test_every_entry_and_alias_maps_as_its_file_says(name: str) -> None:
    raw = load_yaml(conditions_dir() / f"{name}.yaml")
    cmap = load_map(name, "t")
    assert cmap.outputs == tuple(raw["outputs"])
    for entry, body in raw["values"].items():
        assert body["source"] in raw["sources"], entry
        for label in [entry, *body.get("aliases", [])]:
            a, how = cmap.lookup(label)
            assert how == "exact" and a.entry == entry, label
            assert dict(a.outputs) == {o: body[o] for o in raw["outputs"]}, label


def test_kachru_1985_figure_countries() -> None:
    """The countries Kachru (1985, Figure 1) names in each circle get that circle."""
    cmap = load_map("kachru", "t")
    figure = {
        "inner": ["USA", "UK", "Canada", "Australia", "New Zealand"],
        "outer": [
            "Bangladesh",
            "Ghana",
            "India",
            "Kenya",
            "Malaysia",
            "Nigeria",
            "Pakistan",
            "Philippines",
            "Singapore",
            "Sri Lanka",
            "Tanzania",
            "Zambia",
        ],
        "expanding": ["China", "Egypt", "Indonesia", "Israel", "Japan", "Korea", "Nepal", "Saudi Arabia", "Taiwan", "USSR"],
    }
    for circle, countries in figure.items():
        for c in countries:
            a, _ = cmap.lookup(c)
            assert a.outputs["circle"] == circle and a.source == "kachru1985", c
            assert a.outputs["nativeness"] == ("native" if circle == "inner" else "non-native")


def test_lookup_by_prefix_and_pattern_and_unmapped() -> None:
    kachru = load_map("kachru", "t")
    a, how = kachru.lookup("en-GB-x-rp")
    assert a.entry == "United Kingdom" and how == "prefix:en-gb"
    assert kachru.lookup("martian") is None
    bg = load_map("background", "t")
    a, how = bg.lookup("Noise 10dB")
    assert a.outputs["background_type"] == "noise" and how == "pattern"
    assert normalize_value("  United States English ") == "united-states-english"
    emo = load_map("emotion-quadrants", "t")
    assert emo.lookup("ANGER")[0].outputs["quadrant"] == "negative-high"
    assert emo.lookup("calm")[0].outputs["quadrant"] == "positive-low"
    assert emo.lookup("neutral")[0].outputs["arousal"] == "neutral"


def test_recipe_values_override_and_are_sourced(tmp_path: Path) -> None:
    cfg = parse_profiles_config(
        {
            "condition_maps": [
                {"map": "kachru", "column": "accent", "values": {"martian": {"circle": "expanding", "nativeness": "non-native"}}}
            ]
        },
        "r.yaml",
    )
    a, _ = cfg.maps[0].map.lookup("martian")
    assert a.outputs["circle"] == "expanding" and a.source == "recipe"


@pytest.mark.parametrize(
    "raw, match",
    [
        (
            {"condition_maps": [{"map": "nope", "column": "accent"}]},
            r"r\.yaml: profiles\.condition_maps\[0\]\.map: no shipped condition map 'nope'",
        ),
        ({"condition_maps": [{"map": "kachru"}]}, r"condition_maps\[0\]: missing required key 'column'"),
        (
            {"condition_maps": [{"map": "kachru", "column": "a", "values": {"x": {"circle": "middle", "nativeness": "native"}}}]},
            r"values\.x\.circle: 'middle' is not allowed",
        ),
        ({"n_boot": "many"}, r"profiles\.n_boot: expected an integer"),
        ({"breaking_margin": float("nan")}, r"profiles\.breaking_margin: expected a finite number"),
        ({"gaps": [["circle", "outer"]]}, r"profiles\.gaps\[0\]: expected \[label, value_a, value_b\]"),
        (
            {"ladders": [{"column": "bg", "baseline": "clean", "levels": {"n20": "loud"}}]},
            r"ladders\[0\]\.levels\.n20: expected a number",
        ),
        ({"gpu_hour": 2}, r"unknown key 'gpu_hour' \(did you mean 'gpu_hour_usd'\?\)"),
    ],
)
def test_bad_options_name_file_and_key(raw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_profiles_config(raw, "r.yaml")


def test_bad_map_file_names_file_and_key(tmp_path: Path) -> None:
    p = tmp_path / "m.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "name": "m",
                "outputs": ["t"],
                "allowed": {"t": ["a"]},
                "sources": {"s": "x"},
                "values": {"one": {"t": "a", "source": "s"}, "two": {"t": "a", "source": "s", "aliases": ["ONE"]}},
            }
        )
    )
    with pytest.raises(ConfigError, match=r"m\.yaml\.values\.two\.aliases\[0\]: 'ONE' \(as 'one'\) is already an alias of 'one'"):
        parse_profiles_config({"condition_maps": [{"map": str(p), "column": "c"}]}, "r.yaml")


# ---------------------------------------------------------------- figures against independent computations


def test_unmapped_values_are_listed_not_dropped(result: dict, scored: pd.DataFrame) -> None:
    kachru = result["condition_maps"][0]
    n_martian = scored[scored["model"] == "whisper-tiny.en"]["accent"].eq("martian").sum()
    assert kachru["unmapped"] == {"martian": int(n_martian)}
    assert "martian (20 clips)" in "\n".join(profiles_lines(ProfilesResult.from_json(result), "Robustness profiles"))


def test_profile_and_gaps_match_jiwer(result: dict, scored: pd.DataFrame) -> None:
    inner = {"en-us", "en-gb"}
    outer = {"Indian English", "nigerian"}
    expanding = {"japanese", "German"}
    for model in scored["model"].unique():
        prof = result["profiles"][model]
        w_inner = direct_wer(scored, model, mapped_mask(scored, "accent", inner))
        w_outer = direct_wer(scored, model, mapped_mask(scored, "accent", outer))
        w_exp = direct_wer(scored, model, mapped_mask(scored, "accent", expanding))
        assert prof["conditions"]["circle=inner"]["wer"] == pytest.approx(w_inner, abs=1e-12)
        lo, hi = prof["conditions"]["circle=inner"]["ci95"]
        assert lo <= w_inner <= hi
        gaps = {f"{g['label']}: {g['a']} − {g['b']}": g for g in result["gap_table"]["models"][model]}
        assert gaps["circle: outer − inner"]["gap"] == pytest.approx(w_outer - w_inner, abs=1e-12)
        assert gaps["circle: expanding − inner"]["gap"] == pytest.approx(w_exp - w_inner, abs=1e-12)
        non_native = direct_wer(scored, model, mapped_mask(scored, "accent", outer | expanding))
        assert gaps["nativeness: non-native − native"]["gap"] == pytest.approx(non_native - w_inner, abs=1e-12)
        pos = direct_wer(scored, model, mapped_mask(scored, "emotion", {"happy", "excited"}))
        neg = direct_wer(scored, model, mapped_mask(scored, "emotion", {"angry", "frustrated"}))
        assert gaps["quadrant: positive-high − negative-high"]["gap"] == pytest.approx(pos - neg, abs=1e-12)
        noise = direct_wer(scored, model, mapped_mask(scored, "background", {"noise-20db", "noise-10db", "noise-5db"}))
        music = direct_wer(scored, model, mapped_mask(scored, "background", {"music"}))
        assert gaps["background_type: noise − music"]["gap"] == pytest.approx(noise - music, abs=1e-12)
        for g in gaps.values():
            assert g["ci95"][0] <= g["gap"] <= g["ci95"][1] and 0 < g["p_value"] <= g["p_holm"] <= 1
    assert result["gap_table"]["gaps"] == [f"{c}: {a} − {b}" for c, a, b in STUDY_GAPS]


def test_paired_gap_tests(result: dict) -> None:
    pairs = result["gap_table"]["paired"]["pairs"]
    assert len(pairs) == 10 * len(STUDY_GAPS)  # 5 models: 10 pairs per gap
    by = {(g["label"], g["a"], g["b"], m): g["gap"] for m, gs in result["gap_table"]["models"].items() for g in gs}
    from audits.asr.paired import holm

    assert [e["p_holm"] for e in pairs] == pytest.approx(list(holm([e["p_value"] for e in pairs])))
    for e in pairs:
        # every model scored every clip, so the paired diff is the difference of the two models' gaps
        assert e["diff"] == pytest.approx(
            by[(e["label"], e["a_value"], e["b_value"], e["model_a"])] - by[(e["label"], e["a_value"], e["b_value"], e["model_b"])],
            abs=1e-12,
        )
        assert e["ci95"][0] <= e["diff"] <= e["ci95"][1]
        if e["smaller_gap"]:
            assert e["p_holm"] < 0.05


def test_kendall_tau_matches_scipy(result: dict, scored: pd.DataFrame) -> None:
    models = sorted(scored["model"].unique())
    overall = [direct_wer(scored, m, scored["model"] == m) for m in models]
    rs = result["rank_stability"]
    for cond, col, vals in [
        ("circle=outer", "accent", {"Indian English", "nigerian"}),
        ("conversation=overlap", "conversation", {"overlap"}),
        ("quadrant=negative-low", "emotion", {"sad"}),
    ]:
        per = [direct_wer(scored, m, scored[col].isin(vals)) for m in models]
        tau = kendalltau(overall, per).statistic
        assert rs["conditions"][cond]["tau"] == pytest.approx(tau, abs=1e-12)
        lo, hi = rs["conditions"][cond]["ci95"]
        assert -1 <= lo <= hi <= 1
    shifts = [abs(x["max_shift"]) for x in rs["movers"]]
    assert shifts == sorted(shifts, reverse=True)


def test_vectorized_tau_b_matches_scipy_with_ties() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(50, 7)).astype(float)
    y = rng.integers(0, 4, size=(50, 7)).astype(float)
    ours = kendall_tau_b(x, y)
    for i in range(50):
        ref = kendalltau(x[i], y[i]).statistic
        assert (np.isnan(ref) and np.isnan(ours[i])) or ours[i] == pytest.approx(ref, abs=1e-12)


def test_ladder_matches_direct_per_level_wer(result: dict, scored: pd.DataFrame) -> None:
    lad = result["ladders"][0]
    for model, r in lad["models"].items():
        base = direct_wer(scored, model, scored["background"] == "clean")
        per = [direct_wer(scored, model, scored["background"] == v) for v in ("noise-20db", "noise-10db", "noise-5db")]
        assert r["baseline"]["wer"] == pytest.approx(base, abs=1e-12)
        assert [x["wer"] for x in r["levels"]] == pytest.approx(per, abs=1e-12)
        assert r["slope"] == pytest.approx(np.polyfit([20, 10, 5], per, 1)[0], abs=1e-12)
        first = next((lvl for lvl, w in zip([20.0, 10.0, 5.0], per) if w - base > 0.01), None)
        assert r["breaking_point"] == first
        assert r["slope_ci95"][0] <= r["slope"] <= r["slope_ci95"][1]


def test_trade_offs_and_pareto(result: dict, scored: pd.DataFrame) -> None:
    to = result["trade_offs"]
    for m, r in to["models"].items():
        g = scored[scored["model"] == m]
        rtfx = g["duration_s"].sum() / g["infer_s"].sum()
        assert r["rtfx"] == pytest.approx(rtfx)
        assert r["cost_per_audio_hour_usd"] == pytest.approx(2.0 / rtfx)
    pts = {m: (r["wer"], r["rtfx"]) for m, r in to["models"].items()}
    for m in pts:
        dominated = any(w <= pts[m][0] and x >= pts[m][1] and (w, x) != pts[m] for o, (w, x) in pts.items() if o != m)
        assert (m in to["pareto_wer_rtfx"]) == (not dominated)


def test_reports_render_and_escape(result: dict) -> None:
    html = render_profiles(ProfilesResult.from_json(result), {})
    assert "<svg" in html and "Kendall" in html and "martian" in html
    evil = json.loads(json.dumps(result))
    evil["condition_maps"][0]["unmapped"] = {"<script>x</script>": 1}
    assert "<script>x" not in render_profiles(ProfilesResult.from_json(evil), {})
    md = "\n".join(profiles_lines(ProfilesResult.from_json(result), "Robustness profiles"))
    assert "| whisper-tiny.en | circle: outer − inner |" in md and "breaking point" in md
    json.dumps(result, allow_nan=False)


def test_perturbed_copies_do_not_enter_the_conditions(scored: pd.DataFrame, result: dict) -> None:
    clean = scored.assign(perturbation="clean")
    noisy = scored.assign(
        perturbation="white-noise:0",
        utt_id=scored["utt_id"] + "~w",
        hyp_raw="",
        hyp_norm="",
        word_errors=scored["n_words"],
        parent_id=scored["utt_id"],
    )
    mixed = pd.concat([clean, noisy], ignore_index=True)
    # the section reads source clips (its declaration): the pipeline hands it these rows (audits.clips)
    both = compute_profiles(rows_for(ProfilesSection.reads, mixed), parse_profiles_config(CONFIG, "recipe.yaml"))
    assert both["rows"] == "source clips"
    assert both["gap_table"] == result["gap_table"] and both["profiles"] == result["profiles"]


def test_demo_recipe_maps_every_demo_label() -> None:
    """demo-profiles: every accent, emotion and background value of the demo corpus maps to a group."""
    from audits.recipes import load_recipe
    from audits.sections import get_section
    from engine.corpus.demo import FAMILIES, VOICES

    recipe = load_recipe("demo-profiles")
    cfg = get_section("profiles").parse(recipe.section("profiles"), recipe.source)
    get_section("perturbations").parse(recipe.section("perturbations"), recipe.source)
    by_col = {u.column: u.map for u in cfg.maps}
    for v in VOICES:
        a, _ = by_col["accent"].lookup(v.accent)
        assert a.outputs["circle"] == ("expanding" if v.engine == "kokoro" else "inner"), v.accent
    for e in FAMILIES["emotion"]:
        assert by_col["emotion"].lookup(e) is not None, e
    speech_backgrounds = [b for b in FAMILIES["background"] if not b.endswith("-only") and b != "silence"]
    assert {b: by_col["background"].lookup(b)[0].outputs["background_type"] for b in speech_backgrounds} == {
        "clean": "clean",
        "noise-20db": "noise",
        "noise-10db": "noise",
        "noise-5db": "noise",
        "music": "music",
    }


def test_breaking_point_and_its_interval_on_a_clear_ladder() -> None:
    """WER 5 % clean, 6 % at 20 dB, 30 % at 10 dB over 40 speakers: breaks at 10 dB in (nearly) every replicate."""
    from audits.profiles.ladder import LadderSpec, ladder_for_model

    rng = np.random.default_rng(0)
    rows = []
    for value, rate in (("clean", 0.05), ("n20", 0.06), ("n10", 0.30), ("n0", 0.70)):
        for s in range(40):
            for k in range(3):
                rows.append(
                    {
                        "model": "m",
                        "utt_id": f"{value}-{s}-{k}",
                        "speaker": f"s{s}",
                        "ok": True,
                        "speech_free": False,
                        "n_words": 20,
                        "word_errors": int(rng.binomial(20, rate)),
                        "bg": value,
                    }
                )
    frame = pd.DataFrame(rows)
    spec = LadderSpec("bg", "clean", (("n20", 20.0), ("n10", 10.0), ("n0", 0.0)), "dB SNR")
    r = ladder_for_model(frame, spec, margin=0.05, n_boot=300, seed=0, alpha=0.05)
    wers = {
        v: frame[frame["bg"] == v]["word_errors"].sum() / frame[frame["bg"] == v]["n_words"].sum() for v in ("clean", "n20", "n10", "n0")
    }
    assert r["breaking_point"] == 10.0 and r["breaking_value"] == "n10"
    assert r["breaking_ci95"] == [10.0, 10.0] and r["breaking_share"] == 1.0
    assert r["slope"] == pytest.approx(np.polyfit([20, 10, 0], [wers["n20"], wers["n10"], wers["n0"]], 1)[0])
    never = ladder_for_model(frame, spec, margin=0.9, n_boot=100, seed=0, alpha=0.05)
    assert never["breaking_point"] is None and never["breaking_ci95"] == [None, None] and never["breaking_share"] == 0.0


def test_hosted_cost_is_the_registry_price_and_a_missing_price_is_unknown(scored: pd.DataFrame, result: dict) -> None:
    from audits.profiles.run import trade_offs
    from engine.data import ModelSpec

    specs = [
        ModelSpec("whisper-tiny.en", "deepgram", {"price_per_audio_hour_usd": 0.258}),
        ModelSpec("whisper-base.en", "speechmatics", {"price_per_audio_hour_usd": None}),
    ]
    to = trade_offs(scored, result["profiles"], specs, gpu_hour_usd=None)
    tiny = to["models"]["whisper-tiny.en"]
    assert tiny["cost_per_audio_hour_usd"] == 0.258 and "registry" in tiny["cost_basis"]
    assert to["models"]["whisper-base.en"]["cost_per_audio_hour_usd"] is None
    assert to["models"]["whisper-small.en"]["cost_per_audio_hour_usd"] is None  # local, no gpu_hour_usd: unknown, never 0
    assert to["pareto_wer_cost"] == ["whisper-tiny.en"]
