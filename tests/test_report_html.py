"""report.html: every section carries the numbers of summary.json, text is escaped, the page renders."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rapidfuzz.distance import Levenshtein

from audits.asr.cohort import cohort_scores
from audits.asr.scoring import ScoringOptions
from audits.asr.stats import wilson_interval
from audits.asr.summary import build_summary, load_summary, write_summary
from audits.normalizing import get_normalizer
from audits.reports.findings import findings
from audits.reports.formatting import json_for_script
from audits.reports.html import render_html, write_html_report
from audits.run_dir import rows_fingerprint
from engine.data import RESULT_COLUMNS

SENTENCES = [
    "the quick brown fox jumps over the lazy dog near the river bank",
    "please call stella and ask her to bring these things with her from the store",
    "we need to find urgent solutions to get aid into the region before winter",
    "six spoons of fresh snow peas and five thick slabs of blue cheese",
    "the commission has to take strong action before july",
    "she sells sea shells by the sea shore every single morning",
]
SCRIPT_REF = "Evil <script>alert('x')</script> & co went home"
ODD_ROOM = '<lab> "A&B"'
MODELS = {"alpha": 0.04, "beta": 0.12, "gamma": 0.30}


def _h(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def _corrupt(ref: str, model: str, rate: float) -> str:
    out = []
    for i, w in enumerate(ref.split()):
        r = _h(model, ref, i) % 1000 / 1000
        if r < rate / 2:
            out.append("uh" + w[::-1])  # substitution
        elif r < rate * 0.75:
            continue  # deletion
        elif r < rate:
            out.extend([w, "um"])  # insertion
        else:
            out.append(w)
    return " ".join(out)


def make_table(models: dict[str, float] = MODELS, n_speakers: int = 8, per_speaker: int = 4, failed: bool = True) -> pd.DataFrame:
    """Synthetic result rows: accent_group, background, emotion and room labels; speakers known."""
    rows = []
    for s in range(n_speakers):
        for k in range(per_speaker):
            utt = f"utt-{s:02d}-{k}"
            ref = SCRIPT_REF if (s, k) == (1, 1) else SENTENCES[(s + k) % len(SENTENCES)]
            labels = {
                "accent_group": "native" if s % 2 == 0 else "non-native",
                "background": "clean" if k % 2 == 0 else "noise-5db",
                "emotion": "neutral" if (s + k) % 3 else "positive-high-arousal",
                "room": ODD_ROOM if k == 3 else "studio",
            }
            for model, rate in models.items():
                r = rate * (2.5 if model == "gamma" and labels["accent_group"] == "non-native" else 1.0)
                r *= 1.5 if labels["background"] != "clean" else 1.0
                hyp = _corrupt(ref, model, min(r, 0.95))
                if model == "gamma" and ref == SCRIPT_REF:
                    hyp = "completely different words were heard here"
                err = None
                if failed and model == "beta" and utt == "utt-03-2":
                    hyp, err = None, "AudioError: could not decode"
                dur = 1.0 + 0.1 * len(ref.split())
                rows.append(
                    {
                        "utt_id": utt,
                        "model": model,
                        "hyp_raw": hyp,
                        "ref_raw": ref,
                        "duration_s": dur,
                        "infer_s": dur / {"alpha": 5.0, "beta": 40.0, "gamma": 120.0, "delta": 300.0}.get(model, 10.0)
                        if err is None
                        else None,
                        "error": err,
                        "speaker": f"spk{s}",
                        "shard": f"s{s // 4:05d}",
                        "parent_id": None,
                        **labels,
                    }
                )
    df = pd.DataFrame(rows)
    return df[list(RESULT_COLUMNS) + ["accent_group", "background", "emotion", "room"]]


def speaker_section() -> dict[str, Any]:
    from audits.speaker.metrics import evaluate_speaker, generate_trials

    rng = np.random.default_rng(0)
    centres = {f"spk{s}": rng.normal(size=16) for s in range(6)}
    emb, spk, labels = {}, {}, {}
    for s in range(6):
        for k in range(4):
            u = f"utt-{s:02d}-{k}"
            emb[u] = centres[f"spk{s}"] + rng.normal(scale=0.9, size=16)
            spk[u] = f"spk{s}"
            labels[u] = {"accent_group": "native" if s % 2 == 0 else "non-native"}
    trials = generate_trials(spk, labels, seed=0)
    return {"resemblyzer": evaluate_speaker(emb, trials, backend="resemblyzer", utt_labels=labels).to_dict()}


def emotion_section() -> dict[str, Any]:
    from audits.emotion.metrics import evaluate_emotion
    from engine.backends.base import EmotionOutput

    classes = ["neutral", "happy", "angry", "sad"]
    refs, outs, labs = {}, {}, {}
    for i in range(40):
        u = f"e{i:02d}"
        ref = classes[i % 4]
        pred = ref if i % 3 else classes[(i + 1) % 4]
        refs[u] = ref
        outs[u] = EmotionOutput(posteriors={c: (0.7 if c == pred else 0.1) for c in classes})
        labs[u] = {"accent_group": "native" if i % 2 else "non-native"}
    return {"prosody": evaluate_emotion(outs, backend="prosody", ref_labels=refs, utt_labels=labs).to_dict()}


def probe_section() -> dict[str, Any]:
    def entry(k: int, n: int) -> dict[str, Any]:
        return {"rate": k / n, "ci95": list(wilson_interval(k, n)), "n_ref": k, "n_eligible": n}

    return {
        "bad_reference": {
            "memorizer": entry(19, 20),
            "gamma": entry(11, 20),
            "alpha": entry(3, 20),
            "beta": entry(2, 20),
            "n_clips": 32,
            "panel": ["p1", "p2", "p3"],
            "n_spans": 20,
            "source": "panel",
        }
    }


def make_run(
    out: Path,
    models: dict[str, float] = MODELS,
    extras: bool = True,
    fingerprint: str = "fp-demo",
    normalizer: str = "whisper-english",
    failed: bool = True,
    table: pd.DataFrame | None = None,
) -> Path:
    """A run directory (summary.json + utterances.parquet) built with the project's own scoring."""
    if table is None:
        table = make_table(models, failed=failed)
    else:
        models = {m: MODELS.get(m, 0.1) for m in table["model"].unique()}
    norm = get_normalizer(normalizer)
    opts = ScoringOptions(
        n_boot=200,
        seed=0,
        slice_columns=["accent_group", "background", "emotion", "room"],
        gaps=[
            ("accent_group", "non-native", "native"),
            ("background", "noise-5db", "clean"),
            ("emotion", "positive-high-arousal", "neutral"),
        ],
    )
    facts = {
        m: {
            "status": "loaded",
            "backend": "synthetic",
            "batch_size": 8,
            "warmup_batches": 1,
            "info": {"device": "cpu", "dtype": "float32"},
            "params_m": {"alpha": 1550.0, "beta": 244.0, "gamma": 39.0}.get(m, 74.0),
            "tags": ["test"],
        }
        for m in models
    }
    dataset = {
        "name": "synthetic-slices",
        "source": "tests",
        "reader": "synthetic",
        "n_utts": int(table["utt_id"].nunique()),
        "fingerprint": fingerprint,
    }
    extra = {"probes": probe_section(), "speaker": speaker_section(), "emotion": emotion_section()} if extras else None
    recipe = {
        "name": "synthetic",
        "normalizer": normalizer,
        "scoring": {"n_boot": 200, "seed": 0, "slices": opts.slice_columns, "gaps": [list(g) for g in opts.gaps]},
    }
    summary, _ = build_summary(table, norm, recipe, dataset, facts, {"processor": "x86_64", "cpu_count": 2}, opts, extra)
    out.mkdir(parents=True, exist_ok=True)
    table.to_parquet(out / "utterances.parquet", index=False)
    # as a run does: the rows' digest in the summary, then the summary sealed with its own (audits.run_dir)
    summary["rows"] = {"file": "utterances.parquet", "sha256": rows_fingerprint(out / "utterances.parquet"), "n_rows": len(table)}
    write_summary(out, summary)
    return out


class _Collector(HTMLParser):
    """Start tags with attributes, ids, and the text of the report-data script."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.ids: set[str] = set()
        self._in_data = False
        self.data_text = ""
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        self.tags.append((tag, a))
        if "id" in a:
            self.ids.add(a["id"])
        self._in_data = tag == "script" and a.get("id") == "report-data"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_data = False

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data_text += data
        else:
            self.text.append(data)

    def find(self, cls: str | None = None, **attrs: str) -> list[dict[str, str]]:
        out = []
        for _, a in self.tags:
            if cls is not None and cls not in a.get("class", "").split():
                continue
            if all(a.get("data-" + k.replace("_", "-")) == v for k, v in attrs.items()):
                out.append(a)
        return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def page(run_dir: Path) -> tuple[str, _Collector, dict[str, Any]]:
    path = write_html_report([run_dir], run_dir)
    text = path.read_text(encoding="utf-8")
    p = _Collector()
    p.feed(text)
    return text, p, load_summary(run_dir)


def _f(s: str) -> float | None:
    return None if s == "" else float(s)


def test_every_section_is_present(page: tuple[str, _Collector, dict[str, Any]]) -> None:
    _, p, _ = page
    for sid in (
        "summary",
        "run-facts",
        "overall",
        "speed",
        "heatmap",
        "slices",
        "gaps",
        "cohort",
        "probes",
        "speaker",
        "emotion",
        "worst",
        "report-data",
        "models-table",
    ):
        assert sid in p.ids, sid


def test_self_contained(page: tuple[str, _Collector, dict[str, Any]]) -> None:
    text, p, _ = page
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text
    assert not [a for t, a in p.tags if t in ("script", "img", "link") and (a.get("src") or a.get("href"))]
    assert text.count("<svg") >= 6  # overall, CER, scatter, slice panels, gaps, probes, DET, histogram


def test_run_facts(page: tuple[str, _Collector, dict[str, Any]]) -> None:
    text, p, s = page
    facts = {a["data-fact"] for a in p.find() if "data-fact" in a}
    assert {"dataset", "normalizer", "hardware"} <= facts
    assert s["normalizer"]["version"] in text and s["dataset"]["fingerprint"] in text
    for m, e in s["models"].items():
        assert p.find(wer=repr(e["wer"])), m
        assert p.find("model-row", model=m), m
    cells = [a for _, a in p.tags if "data-batch-size" in a]
    assert len(cells) == len(s["models"]) and all(a["data-batch-size"] == "8" for a in cells)
    failed = {a["data-n-failed"] for _, a in p.tags if "data-n-failed" in a}
    assert failed == {"0", "1"}  # beta has one failed row


def test_slice_tables_match_summary(page: tuple[str, _Collector, dict[str, Any]]) -> None:
    _, p, s = page
    n = 0
    for m, e in s["models"].items():
        for key, sl in e["slices"].items():
            cells = p.find("slice-cell", model=m, slice=key)
            assert len(cells) == 1, (m, key)
            c = cells[0]
            assert _f(c["data-wer"]) == sl["wer"]
            assert _f(c["data-ci-lo"]) == sl["ci95"][0] and _f(c["data-ci-hi"]) == sl["ci95"][1]
            assert int(c["data-n-utts"]) == sl["n_utts"] and int(c["data-n-words"]) == sl["n_words"]
            heat = p.find("hm", model=m, slice=key)
            assert len(heat) == 1 and _f(heat[0]["data-wer"]) == sl["wer"]
            n += 1
    assert n == 3 * 8  # 3 models x (2 accent + 2 background + 2 emotion + 2 room)


def test_gaps_marked(page: tuple[str, _Collector, dict[str, Any]]) -> None:
    text, p, s = page
    n_sig = 0
    for m, e in s["models"].items():
        for g in e["gaps"]:
            rows = p.find("gap-row", model=m, label=g["label"], a=g["a"], b=g["b"])
            assert len(rows) == 1
            r = rows[0]
            assert _f(r["data-gap"]) == g["gap"]
            assert r["data-excludes-zero"] == ("true" if g["excludes_zero"] else "false")
            assert ("sig" in r["class"].split()) == bool(g["excludes_zero"])
            n_sig += bool(g["excludes_zero"])
    # gamma's non-native gap is built in (2.5x the error rate): it must be flagged
    gamma = next(g for g in s["models"]["gamma"]["gaps"] if g["label"] == "accent_group")
    assert gamma["excludes_zero"] and gamma["gap"] > 0
    assert n_sig >= 1 and "✱ yes" in text


def test_embedded_json_matches_summary(page: tuple[str, _Collector, dict[str, Any]]) -> None:
    _, p, s = page
    data = json.loads(p.data_text)
    for m, e in s["models"].items():
        assert data["models"][m]["wer"] == e["wer"]
        assert data["models"][m]["ci95"] == e["ci95"]
        assert data["models"][m]["batch_size"] == e["batch_size"]
        for key, sl in e["slices"].items():
            assert data["slices"][m][key]["wer"] == sl["wer"]
            assert data["slices"][m][key]["ci95"] == sl["ci95"]
    assert data["normalizer"] == s["normalizer"]
    assert data["probes"]["bad_reference"]["controls"] == ["memorizer"]
    assert data["speaker"]["resemblyzer"]["eer"] == s["speaker"]["resemblyzer"]["eer"]
    assert data["emotion"]["prosody"]["ua"] == s["emotion"]["prosody"]["ua"]
    assert data["cohort"]["overall"] == cohort_scores(s).overall


def test_cohort_probe_speaker_emotion_numbers(page: tuple[str, _Collector, dict[str, Any]]) -> None:
    text, p, s = page
    cs = cohort_scores(s)
    for m in cs.models:
        assert _f(p.find(model=m, family="overall")[0]["data-score"]) == cs.overall[m]
        for fam, scores in cs.families.items():
            assert _f(p.find(model=m, family=fam)[0]["data-score"]) == scores[m]
    assert "relative to the evaluated cohort" in text
    probe = s["probes"]["bad_reference"]
    for m in ("memorizer", "alpha", "beta", "gamma"):
        r = p.find("probe-row", probe="bad_reference", model=m)
        assert len(r) == 1
        assert _f(r[0]["data-rate"]) == probe[m]["rate"]
        assert int(r[0]["data-k"]) == probe[m]["n_ref"] and int(r[0]["data-n"]) == probe[m]["n_eligible"]
        assert r[0]["data-control"] == ("true" if m == "memorizer" else "false")
    assert "below memorizer; intervals do not overlap" in text
    sp = s["speaker"]["resemblyzer"]
    assert _f(p.find(eer=repr(sp["eer"]))[0]["data-eer"]) == sp["eer"]
    for key in sp["slices"]:
        assert len(p.find(backend="resemblyzer", slice=key)) >= 1
    em = s["emotion"]["prosody"]
    assert _f(p.find(ua=repr(em["ua"]))[0]["data-ua"]) == em["ua"]
    labels, mat = em["confusion"]["labels"], em["confusion"]["matrix"]
    for i, lr in enumerate(labels):
        for j, lp in enumerate(labels):
            assert p.find(ref=lr, pred=lp)[0]["data-count"] == str(mat[i][j])


def test_worst_utterances_are_the_worst(page: tuple[str, _Collector, dict[str, Any]], run_dir: Path) -> None:
    _, p, s = page
    table = pd.read_parquet(run_dir / "utterances.parquet")
    norm = get_normalizer(s["normalizer"]["name"])
    for m, g in table[table["error"].isna()].groupby("model"):
        errs = []
        for r in g.itertuples():
            rw, hw = norm(r.ref_raw).split(), norm(r.hyp_raw).split()
            if rw:
                errs.append((Levenshtein.distance(rw, hw), r.utt_id))
        shown = [a for a in p.find("worst", model=m)]
        assert 1 <= len(shown) <= 5
        assert int(shown[0]["data-errors"]) == max(e for e, _ in errs)
        counts = [int(a["data-errors"]) for a in shown]
        assert counts == sorted(counts, reverse=True)
        for a in shown:
            assert (int(a["data-errors"]), a["data-utt"]) in errs


def test_script_in_reference_is_escaped(page: tuple[str, _Collector, dict[str, Any]]) -> None:
    text, p, _ = page
    assert "<script>alert" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co went home" in text  # gamma's worst utterance
    assert "<lab>" not in text and "&lt;lab&gt;" in text
    assert text.count("<script") == 2  # the data block and the page's own script, nothing else
    data = json.loads(p.data_text)
    refs = [r["ref_raw"] for rows in data["worst"].values() for r in rows]
    assert SCRIPT_REF in refs  # the JSON round-trips the raw text exactly


def test_json_for_script_cannot_close_the_element() -> None:
    obj = {"t": "</script><script>alert(1)</script> & <!--", "u": "\u2028"}
    s = json_for_script(obj)
    assert "</" not in s and "<" not in s and ">" not in s and "&" not in s
    assert json.loads(s) == obj


def test_findings_only_rank_with_interval_support() -> None:
    base = {"status": "loaded", "slices": {}, "gaps": []}
    overlapping = {"models": {"a": dict(base, wer=0.10, ci95=[0.08, 0.12]), "b": dict(base, wer=0.11, ci95=[0.09, 0.13])}}
    text = " ".join(findings(overlapping))
    assert "within the intervals" in text and "lower than every other model" not in text
    separated = {"models": {"a": dict(base, wer=0.10, ci95=[0.08, 0.12]), "b": dict(base, wer=0.20, ci95=[0.17, 0.23])}}
    text = " ".join(findings(separated))
    assert "a has the lowest WER" in text and "does not overlap" in text
    assert "b has the highest WER" in text and "non-overlapping" in text


def test_report_without_rows_or_extras(tmp_path: Path) -> None:
    run = make_run(tmp_path / "plain", extras=False)
    html_text = render_html(load_summary(run), None)
    assert 'id="probes"' not in html_text and 'id="speaker"' not in html_text
    assert 'id="worst"' in html_text and "No utterance rows" in html_text


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
]


@pytest.mark.skipif(_chromium() is None, reason="Debian package 'chromium' is not installed")
def test_renders_in_headless_chromium(run_dir: Path, page: tuple[str, _Collector, dict[str, Any]], tmp_path: Path) -> None:
    exe = _chromium()
    assert exe is not None
    url = (run_dir / "report.html").resolve().as_uri()
    shot = tmp_path / "report.png"
    res = subprocess.run(
        [exe, *CHROME_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1400,3000", url],
        check=False,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert shot.exists() and shot.stat().st_size > 50_000, res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(shot.read_bytes()[16:20], "big"), int.from_bytes(shot.read_bytes()[20:24], "big")
    assert (width, height) == (1400, 3000)
    dom = subprocess.run(
        [exe, *CHROME_FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--dump-dom", url],
        check=False,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert 'data-rendered="ok"' in dom.stdout, dom.stderr[-2000:]
    assert 'data-n-models="3"' in dom.stdout
    for log in (res.stderr, dom.stderr):
        assert "Uncaught" not in log
        assert not [ln for ln in log.splitlines() if "CONSOLE" in ln and ("error" in ln.lower() or "Error" in ln)]


def test_report_from_a_real_predictions_run(tmp_path: Path, voxpopuli_preds: Path) -> None:
    """End to end on real transcripts: the score-predictions recipe (5 models, VoxPopuli predictions) -> report."""
    from audits.pipeline import run_recipe
    from audits.recipes import load_recipe, with_overrides

    recipe = with_overrides(load_recipe("score-predictions"), dataset=str(voxpopuli_preds), reader="oasr-predictions")
    out = tmp_path / "preds"
    summary = run_recipe(recipe, out)
    path = write_html_report([out], out)
    p = _Collector()
    p.feed(path.read_text(encoding="utf-8"))
    data = json.loads(p.data_text)
    assert set(data["models"]) == set(summary["models"]) and len(summary["models"]) == 5
    for m, e in summary["models"].items():
        assert p.find("model-row", model=m)
        assert p.find(wer=repr(e["wer"]))
        assert data["models"][m]["ci95"] == e["ci95"]
        assert p.find("worst", model=m)  # real errors shown, aligned
    assert "predictions" not in data["dataset"]  # the reader's raw predictions stay out of the page
    assert any("lowest" in f for f in data["findings"])


def test_summary_size_does_not_grow_with_the_number_of_utterances(tmp_path: Path, voxpopuli_preds: Path) -> None:
    """summary.json holds figures and provenance only: 150 clips give the same size as 30, and no hypothesis text."""
    from audits.pipeline import run_recipe
    from audits.recipes import load_recipe, with_overrides
    from audits.schema import SCHEMA_VERSION

    sizes = {}
    for n in (30, 150):
        recipe = with_overrides(load_recipe("score-predictions"), dataset=str(voxpopuli_preds), reader="oasr-predictions", limit=n)
        summary = run_recipe(recipe, tmp_path / f"n{n}")
        assert summary["schema_version"] == SCHEMA_VERSION and summary["dataset"]["n_utts"] == n
        assert sorted(summary["dataset"]["prediction_models"]) == sorted(summary["models"])
        text = (tmp_path / f"n{n}" / "summary.json").read_text(encoding="utf-8")
        first_hyp = json.loads((voxpopuli_preds / "whisper-tiny.en.jsonl").read_text().splitlines()[0])["pred_text"]
        assert first_hyp.strip() not in text
        sizes[n] = len(text)
    assert abs(sizes[150] - sizes[30]) < 0.05 * sizes[30], sizes


def test_positive_controls_are_what_the_backend_declares_not_a_name() -> None:
    from audits.reports.findings import control_models

    summary = {
        "models": {
            "anti-memorizer-whisper": {"backend": "faster-whisper", "backend_info": {"backend": "faster-whisper"}, "tags": ["local"]},
            "my-control": {"backend": "memorizer", "backend_info": {"backend": "memorizer", "positive_control": True}},
            "old-run-memorizer": {"backend": "memorizer"},  # a summary written before backends declared it
            "tagged": {"backend": "faster-whisper", "tags": ["control"]},
        }
    }
    names = [*sorted(summary["models"]), "memorizer-predictions"]  # the last: a prediction file, no backend known
    assert control_models(summary, names) == ["my-control", "old-run-memorizer", "tagged", "memorizer-predictions"]
