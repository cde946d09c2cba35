"""Reliability class 6: numbers that are not numbers.

NaN, infinities, negative or absurd values, floats where a count is meant and strings where a
number is meant are refused by the one typed option layer (engine.options) wherever they come
from: a recipe key, a command-line flag, a backend option. The refusal names the file and key
(or the flag) and comes before any model loads and before run.json is written.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from engine.backends import ASR_BACKENDS
from engine.errors import ConfigError
from engine.options import Field, check_number, check_value
from tests.reliability_env import Env, audit, refused_before_work, speech_clips, write_dataset


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


# -- the layer itself ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (Field(bool, False), "false", "expected a boolean (true/false, unquoted), got str 'false'"),
        (Field(bool, False), 0, "expected a boolean"),
        (Field(int, 1), 1.0, "expected an integer, got float"),
        (Field(int, 1), True, "expected an integer, got bool"),
        (Field(int, 1), "3", "expected an integer, got str"),
        (Field(float, 1.0), math.nan, "expected a finite number, got nan"),
        (Field(float, 1.0), math.inf, "expected a finite number, got inf"),
        (Field(float, 1.0), -math.inf, "expected a finite number"),
        (Field(float, 1.0, gt=0), 0, "0 is out of range; it must be > 0"),
        (Field(int, 1, ge=1, le=10), 11, "11 is out of range; it must be >= 1 and <= 10"),
        (Field(str, "a", choices=("a", "b")), "c", "'c' is not allowed"),
        (Field(float, 1.0), None, "got null"),
        (Field(dict, {}), [1], "expected a mapping, got list"),
    ],
)
def test_the_field_refuses_with_the_key_named(field: Field, value: object, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        field.check(value, "r.yaml: sec.key")
    assert str(exc.value).startswith("r.yaml: sec.key: ") and message in str(exc.value)


def test_the_field_keeps_good_values_and_their_types() -> None:
    assert Field(float, 1.0).check(2, "w") == 2.0 and isinstance(Field(float, 1.0).check(2, "w"), float)
    assert Field(int, 1).check(3, "w") == 3
    assert Field(bool, True).check(False, "w") is False
    assert Field(int, None, nullable=True).check(None, "w") is None


def test_check_value_refuses_nan_at_any_depth() -> None:
    with pytest.raises(ConfigError, match=r"r.yaml: emotion.dimensions.a\[1\]: expected a finite number"):
        check_value(dict[str, Any], {"a": [1.0, math.nan]}, "r.yaml: emotion.dimensions")
    assert check_number(3, "--n", integer=True, ge=1) == 3


# -- recipe keys -------------------------------------------------------------------------------------

RECIPE_CASES = [
    ("scoring: {n_boot: -5}", "scoring.n_boot: -5 is out of range"),
    ("scoring: {n_boot: 1000000000000}", "scoring.n_boot: 1000000000000 is out of range"),
    ("scoring: {n_boot: 0}", "scoring.n_boot: 0 is out of range"),
    ("scoring: {n_boot: 100.5}", "scoring.n_boot: expected an integer"),
    ("scoring: {n_boot: '100'}", "scoring.n_boot: expected an integer"),
    ("scoring: {seed: -1}", "scoring.seed: -1 is out of range"),
    ("scoring: {seed: .nan}", "scoring.seed: expected an integer"),
    ("scoring: {semantic_similarity: 'false'}", "scoring.semantic_similarity: expected a boolean"),
    ("dataset_extra: {max_duration_s: .nan}", "dataset.max_duration_s: expected a finite number"),
    ("dataset_extra: {max_duration_s: -1}", "dataset.max_duration_s: -1 is out of range"),
    ("dataset_extra: {limit: 0}", "dataset.limit: 0 is out of range"),
    ("dataset_extra: {allow_outside_root: 'no'}", "dataset.allow_outside_root: expected a boolean"),
    ("top: {shard_size: 0}", "shard_size: 0 is out of range"),
    ("top: {warmup: -1}", "warmup: -1 is out of range"),
    ("top: {batch_size: 0}", "batch_size: 0 is out of range"),
    ("top: {batch_size: 2.0}", "batch_size: expected an integer"),
    ("probes: {masking: {pad_s: .nan}}", "probes.masking.pad_s: expected a finite number"),
    ("probes: {masking: {seed: -3}}", "probes.masking.seed: -3 is out of range"),
]


def _recipe(env: Env, data: Path, case: str) -> Path:
    key, _, value = case.partition(": ")
    inner = value.strip("{}")
    if key == "scoring":
        text = f"name: r\ndataset: {{path: '{data}'}}\nmodels: [sim-a]\nscoring: {{{inner}}}\n"
    elif key == "dataset_extra":
        text = f"name: r\ndataset: {{path: '{data}', {inner}}}\nmodels: [sim-a]\n"
    elif key == "top":
        text = f"name: r\ndataset: {{path: '{data}'}}\nmodels: [sim-a]\n{inner.replace(': ', ': ', 1)}\n"
    else:
        text = f"name: r\ndataset: {{path: '{data}'}}\nmodels: [sim-a]\n{key}: {value}\n"
    path = env.tmp / "r.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("case", "message"), RECIPE_CASES, ids=[c for c, _ in RECIPE_CASES])
def test_a_recipe_number_out_of_range_is_refused_before_any_work(env: Env, case: str, message: str) -> None:
    data = write_dataset(env.tmp / "data", speech_clips(2))
    out = env.tmp / "out"
    res = audit("run", _recipe(env, data, case), "--out", out)
    refused_before_work(res, env, out, "r.yaml", message)


# -- command-line flags ----------------------------------------------------------------------------

FLAG_CASES = [
    (["--memory-budget-mb", "-5"], "--memory-budget-mb: -5.0 is out of range"),
    (["--memory-budget-mb", "nan"], "--memory-budget-mb: expected a finite number"),
    (["--max-models-loaded", "0"], "--max-models-loaded: 0 is out of range"),
    (["--workers", "0"], "--workers: 0 is out of range"),
    (["--limit", "0"], "--limit: 0 is out of range"),
]


@pytest.mark.parametrize(("flags", "message"), FLAG_CASES, ids=[" ".join(f) for f, _ in FLAG_CASES])
def test_a_sweep_flag_out_of_range_is_refused_before_run_json(env: Env, flags: list[str], message: str) -> None:
    data = write_dataset(env.tmp / "data", speech_clips(2))
    out = env.tmp / "out"
    res = audit("sweep", env.recipe(data), "--models", "sim-a", "--out", out, *flags)
    refused_before_work(res, env, out, message)
    assert not out.exists(), "the run directory was created before the refusal"


def test_run_limit_flag_is_typed(env: Env) -> None:
    data = write_dataset(env.tmp / "data", speech_clips(2))
    out = env.tmp / "out"
    refused_before_work(audit("run", env.recipe(data), "--out", out, "--limit", "-3"), env, out, "--limit: -3 is out of range")


def test_the_engine_options_are_checked_in_python_too(tmp_path: Path) -> None:
    from engine.engine import EngineOptions

    for bad in (EngineOptions(memory_budget_mb=-5), EngineOptions(max_models_loaded=0), EngineOptions(memory_budget_mb=math.nan)):
        with pytest.raises(ConfigError):
            bad.check()
    EngineOptions(memory_budget_mb=512, max_models_loaded=2, workers=3).check()


@pytest.mark.parametrize(("flags", "message"), [(["--worst", "-1"], "--worst: -1 is out of range")])
def test_report_flags_are_typed(tmp_path: Path, flags: list[str], message: str) -> None:
    res = audit("report", tmp_path, *flags)
    assert res.exit_code == 2 and message in " ".join(res.output.split()) and "Traceback" not in res.output


def test_query_max_rows_is_typed(tmp_path: Path) -> None:
    res = audit("query", tmp_path, "SELECT 1", "--max-rows", "0")
    assert res.exit_code == 2 and "--max-rows: 0 is out of range" in " ".join(res.output.split())


# -- backend options ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["timeout_s", "backoff_s", "poll_timeout_s"])
def test_a_hosted_option_that_is_nan_is_refused_when_the_model_is_built(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPGRAM_API_KEY", "k")
    cls = ASR_BACKENDS.get("deepgram")
    with pytest.raises(ConfigError, match=rf"deepgram backend options\.{key}: expected a finite number"):
        cls(model="nova-2", **{key: math.nan})
    with pytest.raises(ConfigError):
        cls(model="nova-2", **{key: math.inf})


def test_a_simulated_option_that_is_nan_is_refused() -> None:
    with pytest.raises(ConfigError, match="finite"):
        ASR_BACKENDS.get("simulated")(rtfx=math.nan)


def test_diarizer_options_are_typed_when_built() -> None:
    from engine.backends import DIAR_BACKENDS

    cls = DIAR_BACKENDS.get("vad-resemblyzer")
    with pytest.raises(ConfigError, match="smooth_frames: expected an integer"):
        cls(smooth_frames=2.5)
    with pytest.raises(ConfigError, match="rate: 0.1 is out of range"):
        cls(rate=0.1)


def test_the_option_ranges_in_the_docs_are_the_ones_the_code_checks() -> None:
    """docs/datasets.md's option tables hold exactly the rows the field specs produce."""
    from audits.conversation.run import ConversationConfig
    from audits.recipes import DATASET_FIELDS, SCORING_FIELDS, TOP_FIELDS
    from engine.audio.segmentation import SegmentationConfig
    from engine.backends.diarization.baseline import VadResemblyzerDiarizer
    from engine.backends.diarization.pyannote import PyannoteDiarizer
    from engine.engine import ENGINE_FIELDS
    from engine.options import field_rows as fields_doc

    doc = (Path(__file__).resolve().parents[1] / "docs" / "datasets.md").read_text(encoding="utf-8")
    specs = [
        TOP_FIELDS,
        DATASET_FIELDS,
        SCORING_FIELDS,
    ]
    rows = [row for spec in specs for row in fields_doc(spec)] + ConversationConfig.doc_rows()
    rows += SegmentationConfig.doc_rows() + VadResemblyzerDiarizer.OPTIONS.doc_rows() + PyannoteDiarizer.OPTIONS.doc_rows()
    flags = {k: v for k, v in ENGINE_FIELDS.items() if k in ("workers", "max_models_loaded", "memory_budget_mb")}
    rows += [r.replace("_", "-") if r.startswith("| `--") else r for r in fields_doc(flags, "`--{}`")]
    missing = [r for r in rows if r not in doc]
    assert not missing, "docs/datasets.md lacks (or has stale) option rows:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["corpus", "conversation", "--n", "0"], "--n: 0 is out of range"),
        (["corpus", "conversation", "--min-s", "nan"], "--min-s: expected a finite number"),
        (["corpus", "conversation", "--min-s", "90", "--max-s", "30"], "--max-s: 30.0 is out of range; it must be >= 90"),
        (["corpus", "demo", "--seed", "-1"], "--seed: -1 is out of range"),
        (["probe", "orthography", "--preds", ".", "--min-per-arm", "0"], "--min-per-arm: 0 is out of range"),
        (
            ["probe", "bad-reference", "--preds", ".", "--panel", "a,b,c", "--supermajority", "nan"],
            "--supermajority: expected a finite number",
        ),
        (["probe", "bad-reference", "--preds", ".", "--panel", "a,b,c", "--min-agree", "-2"], "--min-agree: -2 is out of range"),
    ],
)
def test_other_numeric_flags_are_typed(tmp_path: Path, args: list[str], message: str) -> None:
    if args[0] == "corpus":
        args = [*args, "--out", str(tmp_path / "c")]
    res = audit(*args)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert message in " ".join(res.output.split())
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    ("registry", "backend", "options", "message"),
    [
        ("asr", "memorizer", {"threshold": "0.9"}, "memorizer backend options.threshold: expected a number"),
        ("asr", "memorizer", {"length_tolerance": math.nan}, "finite"),
        ("tts", "kokoro", {"timeout_s": math.nan}, "kokoro backend options.timeout_s: expected a finite number"),
        ("tts", "kokoro", {"max_tokens": "500"}, "kokoro backend options.max_tokens: expected an integer"),
        ("tts", "kokoro", {"threads": 2.5}, "kokoro backend options.threads: expected an integer"),
    ],
)
def test_backends_that_parse_numbers_themselves_use_the_layer(
    registry: str, backend: str, options: dict[str, object], message: str
) -> None:
    from engine.backends import TTS_BACKENDS

    reg = ASR_BACKENDS if registry == "asr" else TTS_BACKENDS
    with pytest.raises(ConfigError, match=message):
        reg.get(backend)(**options)
