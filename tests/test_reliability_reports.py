"""Reliability class 7: reports.

Model names, speaker ids, label values and slice names come from users' registries and
manifests. Every one of them reaches report.md and report.html through the one escaping layer
(audits/reports/formatting.py): no raw HTML, no pipe that shifts a Markdown column, no
bidirectional override. Checked end to end on a real run (Hallucinations and Cohort tables
included) and on the conversation section's report part.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from audits.conversation.results import ConversationResult
from audits.conversation.run import html_section, markdown_lines
from tests.reliability_env import audit, noise, write_dataset

EVIL_MODEL = "evil|<script>alert(1)</script>"
EVIL_LABEL = "a|b<img src=x onerror=alert(2)>\u202e"
EVIL_SPEAKER = "<b>spk</b>|1"


def _pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def _tables_are_rectangular(md: str) -> None:
    """Every Markdown table keeps its header's column count on every row."""
    table: list[str] = []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            widths = {_pipes(r) for r in table}
            assert len(widths) == 1, "a table row has a shifted column:\n" + "\n".join(table)
            table = []


def _no_raw_markup(text: str) -> None:
    assert "<script>" not in text and "<img" not in text and "<b>spk" not in text and "\u202e" not in text


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("reports")
    mp = pytest.MonkeyPatch()
    try:
        (tmp / "configs" / "models").mkdir(parents=True)
        (tmp / "configs" / "models" / "sim.yaml").write_text(
            "models:\n"
            f"  '{EVIL_MODEL}': {{backend: simulated, options: {{rtfx: 1000}}, batch_size: 4}}\n"
            "  sim-b: {backend: simulated, options: {rtfx: 1000, seed: 1}, batch_size: 4}\n"
            "  sim-c: {backend: simulated, options: {rtfx: 1000, seed: 2}, batch_size: 4}\n"
        )
        mp.setenv("AUDIT_CONFIG_DIR", str(tmp / "configs"))
        clips: list[dict[str, Any]] = [
            {
                "audio": noise(1.0, i),
                "text": "the a of and",
                "speaker": EVIL_SPEAKER if i % 2 else "s2",
                "accent": EVIL_LABEL if i % 2 else "plain",
            }
            for i in range(6)
        ]
        clips.append({"audio": noise(1.0, 50), "text": "", "content": "speech-free", "speaker": EVIL_SPEAKER, "accent": EVIL_LABEL})
        data = write_dataset(tmp / "data", clips)
        recipe = tmp / "r.yaml"
        recipe.write_text(
            f"name: r\ndataset: {{path: '{data}'}}\nmodels: ['{EVIL_MODEL}', sim-b, sim-c]\nwarmup: 0\n"
            f"scoring: {{n_boot: 20, gaps: [[accent, '{EVIL_LABEL}', plain]]}}\n"
        )
        res = audit("run", recipe, "--out", tmp / "out")
        assert res.exit_code == 0, res.output
    finally:
        mp.undo()
    return tmp / "out"


def test_report_md_escapes_every_name_and_label(run: Path) -> None:
    md = (run / "report.md").read_text()
    assert "Hallucinations and insertions" in md and "Cohort scores" in md  # the tables under test are there
    assert "evil\\|&lt;script&gt;" in md
    _no_raw_markup(md)
    _tables_are_rectangular(md)


def test_report_html_escapes_every_name_and_label(run: Path) -> None:
    html = (run / "report.html").read_text()
    body = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)  # the page's own scripts and embedded JSON
    _no_raw_markup(body)
    assert "evil|&lt;script&gt;" in body
    assert "\u202e" not in html


def _conversation_summary() -> dict[str, Any]:
    fig = {"wer": 0.1, "cpwer": {"wer": 0.2}, "tcpwer": {"wer": 0.3}, "rtfx": 10.0}
    der = {"der": 0.1, "jer": 0.2}
    return {
        "dataset": {"n_recordings": 2, "audio_s": 120.0},
        "segmentation": {"max_chunk_s": 30.0, "pad_s": 0.2},
        "scoring": {"der": "collar 0 s"},
        "diarization": {
            "backend": "<i>diar</i>|x",
            "missed_s": 1.0,
            "false_alarm_s": 1.0,
            "confusion_s": 1.0,
            "scored_s": 10.0,
            "slices": {f"background={EVIL_LABEL}": der},
            **der,
        },
        "models": {EVIL_MODEL: {**fig, "slices": {f"background={EVIL_LABEL}": fig}}},
        "problems": {"count": 1, "examples": [f"speaker {EVIL_SPEAKER} overlaps itself"]},
    }


def test_the_conversation_part_escapes_models_slices_backends_and_problems() -> None:
    s = ConversationResult.from_json(_conversation_summary())
    md = "\n".join(markdown_lines(s))
    _no_raw_markup(md)
    assert "<i>" not in md
    _tables_are_rectangular(md)
    html = html_section(s)
    _no_raw_markup(html)
    assert "<i>diar" not in html and "&lt;i&gt;diar" in html and "overlaps itself" in html


HOSTILE = [
    "a|b",
    "<script>x</script>",
    "x\u202ey\u2066z",
    "line\nbreak|",
    "`code`|**bold**",
    "&lt;already&gt;",
    "\\|escaped",
    "<img src=x onerror=y>",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_any_hostile_model_name_keeps_every_report_table_rectangular(run: Path, name: str) -> None:
    """The run's summary with its models renamed: the Markdown tables (slices, hallucinations,
    cohort, comparisons) and the HTML page stay well-formed and free of raw markup."""
    import json

    from audits.asr.cohort import cohort_markdown
    from audits.reports.markdown import render_markdown
    from audits.reports.robustness import hallucination_html, hallucination_markdown

    summary = json.loads((run / "summary.json").read_text())
    renamed = {f"{name}{i}": m for i, m in enumerate(summary["models"].values())}
    summary["models"] = renamed
    md = render_markdown(summary) + "\n" + "\n".join(hallucination_markdown(summary)) + "\n" + cohort_markdown(summary)
    _tables_are_rectangular(md)
    _no_raw_markup(md)
    assert "<script>" not in md and "\u2066" not in md and "<img" not in md
    html = hallucination_html(summary)
    assert "<script>" not in html and "<img" not in html and "\u202e" not in html
