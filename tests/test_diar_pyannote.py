"""The pyannote diarization backend against the real pyannote.audio library, on a small pipeline
built here: randomly initialised segmentation (PyanNet) and embedding (x-vector SincNet) models
and a PLDA, saved in the layout of a downloaded ``speaker-diarization-community-1`` folder
(``config.yaml`` with ``$model/...`` entries, ``segmentation/``, ``embedding/``, ``plda/``). The
backend loads it exactly as it loads a downloaded checkpoint. A random model's turns mean
nothing; what is tested is that the loading and running code works with the library's API and
that its output is well-formed for the conversation scorer.

Skipped where the optional extra ``diarization`` is not installed (or its torchaudio build does
not match torch, which the backend reports as such; see docs/conversation.md).
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine.errors import BackendUnavailable


def _pyannote_importable() -> str | None:
    try:
        import pyannote.audio  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"pyannote.audio cannot be imported here ({exc})"
    return None


_WHY_NOT = _pyannote_importable()
pytestmark = [
    pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or ""),
    pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("flite") is None, reason="needs espeak-ng and flite"),
]

EMBED_DIM = 32
LDA_DIM = 16


def build_tiny_pipeline(root: Path) -> Path:
    """A community-1-style pipeline folder with tiny random models; returns the folder."""
    import lightning
    import torch
    from pyannote.audio import __version__ as pyannote_version
    from pyannote.audio.core.task import Problem, Resolution, Specifications
    from pyannote.audio.models.embedding import XVectorSincNet
    from pyannote.audio.models.segmentation import PyanNet

    torch.manual_seed(0)

    def save(model: torch.nn.Module, spec: Specifications, path: Path) -> None:
        # What lightning's checkpointing writes, plus pyannote's own block (on_save_checkpoint).
        model.specifications = spec
        model.setup()
        path.parent.mkdir(parents=True, exist_ok=True)
        ckpt = {
            "state_dict": model.state_dict(),
            "hyper_parameters": dict(model.hparams),
            "pytorch-lightning_version": lightning.__version__,
        }
        model.on_save_checkpoint(ckpt)
        torch.save(ckpt, path)

    seg = PyanNet(sincnet={"stride": 10}, lstm={"hidden_size": 16, "num_layers": 1}, linear={"hidden_size": 16, "num_layers": 1})
    save(
        seg,
        Specifications(
            problem=Problem.MONO_LABEL_CLASSIFICATION,
            resolution=Resolution.FRAME,
            duration=5.0,
            classes=["speaker#1", "speaker#2", "speaker#3"],
            powerset_max_classes=2,
            permutation_invariant=True,
        ),
        root / "segmentation" / "pytorch_model.bin",
    )
    save(
        XVectorSincNet(dimension=EMBED_DIM),
        Specifications(problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=5.0),
        root / "embedding" / "pytorch_model.bin",
    )
    rng = np.random.default_rng(0)
    lda, _ = np.linalg.qr(rng.standard_normal((EMBED_DIM, LDA_DIM)))
    (root / "plda").mkdir()
    np.savez(root / "plda" / "xvec_transform.npz", mean1=np.zeros(EMBED_DIM), mean2=np.zeros(LDA_DIM), lda=lda)
    np.savez(root / "plda" / "plda.npz", mu=np.zeros(LDA_DIM), tr=np.eye(LDA_DIM), psi=np.linspace(2.0, 0.1, LDA_DIM))
    (root / "config.yaml").write_text(
        f"dependencies:\n  pyannote.audio: {pyannote_version}\n"
        "pipeline:\n  name: pyannote.audio.pipelines.SpeakerDiarization\n  params:\n"
        "    segmentation: $model/segmentation\n    embedding: $model/embedding\n    plda: $model/plda\n"
        "    clustering: VBxClustering\n    segmentation_step: 0.5\n    segmentation_batch_size: 16\n    embedding_batch_size: 16\n"
        "params:\n  segmentation:\n    min_duration_off: 0.0\n  clustering:\n    threshold: 0.6\n    Fa: 0.07\n    Fb: 0.8\n",
        encoding="utf-8",
    )
    return root


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """The tiny LSTM spends seconds spin-waiting for a second intra-op thread when the other
    core is busy; one thread runs the whole test in about a second."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_pipeline(tmp_path_factory.mktemp("pyannote") / "tiny-community-1")


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.corpus.conversation import build_conversation_set

    return build_conversation_set(tmp_path_factory.mktemp("conv") / "set", n_recordings=1, min_s=12, max_s=16).root


def test_local_pipeline_loads_runs_and_scores(
    tiny_pipeline: Path, conversation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audits.conversation.metrics import diarization_scores
    from audits.conversation.readers import Segment, read_rttm, write_rttm
    from audits.conversation.run import load_conversation_data, parse_conversation_config
    from engine.backends import DIAR_BACKENDS
    from engine.keyed.keyed_workers import load_recording as _load_audio

    monkeypatch.delenv("PYANNOTE_METRICS_ENABLED", raising=False)
    # The recipe block a user writes for a downloaded pipeline, and what the section builds from it.
    cfg = parse_conversation_config({"diarization": {"backend": "pyannote", "options": {"checkpoint": str(tiny_pipeline)}}}, "r.yaml")
    cls = DIAR_BACKENDS.get(cfg.diarization)
    avail = cls.availability(dict(cfg.diarization_options))
    assert avail.runnable, avail.reason
    diar = cls(**dict(cfg.diarization_options))
    diar.load()
    assert os.environ["PYANNOTE_METRICS_ENABLED"] == "false"  # no usage report leaves the machine
    info = diar.info().as_dict()
    assert info["model_id"] == str(tiny_pipeline) and info["pyannote.audio_version"]

    data = load_conversation_data(conversation)
    rec = "conv-000"
    duration = float(data.recordings[rec]["duration"])
    audio = _load_audio(data.recordings[rec]["path"])
    for n in (None, 2):
        turns = diar.diarize(audio, num_speakers=n)
        assert turns, "the pipeline gave no turns"
        assert turns == sorted(turns, key=lambda t: (t.start, t.end, t.speaker))
        for t in turns:
            assert 0.0 <= t.start < t.end <= duration and isinstance(t.speaker, str) and t.speaker
    hyp = [Segment(rec, t.speaker, t.start, t.end) for t in turns]
    write_rttm(hyp, tmp_path / "hyp.rttm")
    back = read_rttm(tmp_path / "hyp.rttm").segments
    key = lambda s: (s.speaker, s.start, s.end)  # noqa: E731
    assert len(back) == len(hyp)
    for a, b in zip(sorted(back, key=key), sorted(hyp, key=key)):
        assert a.session_id == rec and a.speaker == b.speaker
        assert abs(a.start - b.start) < 0.002 and abs(a.end - b.end) < 0.002  # RTTM keeps milliseconds
    ref = [s for s in data.turns.segments if s.session_id == rec]
    score = diarization_scores(ref, back, {rec: duration})[rec]
    assert score.der is not None and math.isfinite(score.der) and score.der >= 0.0
    diar.close()

    # The config.yaml path works as well as its folder.
    again = cls(checkpoint=str(tiny_pipeline / "config.yaml"))
    assert all(0.0 <= t.start < t.end <= 6.05 for t in again.diarize(audio[: 16000 * 6]))


def test_broken_local_pipeline_is_a_clear_error(tiny_pipeline: Path, tmp_path: Path) -> None:
    from engine.backends import DIAR_BACKENDS

    broken = tmp_path / "broken"
    shutil.copytree(tiny_pipeline, broken)
    (broken / "embedding" / "pytorch_model.bin").unlink()
    with pytest.raises(BackendUnavailable, match=r"pyannote pipeline at .*broken.*config\.yaml could not load"):
        DIAR_BACKENDS.get("pyannote")(checkpoint=str(broken)).load()
    (broken / "segmentation" / "pytorch_model.bin").write_bytes(b"not a checkpoint")
    with pytest.raises(BackendUnavailable, match="could not load"):
        DIAR_BACKENDS.get("pyannote")(checkpoint=str(broken / "config.yaml")).load()


def test_config_falling_back_to_the_hub_plda_is_refused(tiny_pipeline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyannote.audio 4 fetches community-1's PLDA when a SpeakerDiarization config names none,
    even with local models and a clustering that does not use it (a 3.1-style config): refused
    before the library is asked, naming the entry."""
    from engine.backends import DIAR_BACKENDS

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    seg, emb = tiny_pipeline / "segmentation" / "pytorch_model.bin", tiny_pipeline / "embedding" / "pytorch_model.bin"
    (tmp_path / "config.yaml").write_text(
        "version: 3.1.0\npipeline:\n  name: pyannote.audio.pipelines.SpeakerDiarization\n  params:\n"
        f"    clustering: AgglomerativeClustering\n    segmentation: {seg}\n    embedding: {emb}\n"
        "params:\n  clustering: {method: centroid, min_cluster_size: 2, threshold: 0.7}\n  segmentation: {min_duration_off: 0.0}\n"
    )
    with pytest.raises(BackendUnavailable, match=r"plda: pyannote/speaker-diarization-community-1"):
        DIAR_BACKENDS.get("pyannote")(checkpoint=str(tmp_path)).load()


def test_conversation_section_with_the_local_pipeline(tiny_pipeline: Path, conversation: Path, tmp_path: Path) -> None:
    """The conversation section end to end with the pyannote backend: diarization, the
    speaker-attributed ASR pass over its turns, and DER in the summary with its provenance."""
    from audits.conversation.run import conversation_summary, load_conversation_data, parse_conversation_config, run_conversation
    from audits.normalizing import get_normalizer
    from engine.model_registry import load_model_registry, resolve_models

    spec = resolve_models(["pocketsphinx-en-us"], load_model_registry())[0].spec(None)
    cfg = parse_conversation_config({"diarization": {"backend": "pyannote", "options": {"checkpoint": str(tiny_pipeline)}}}, "r.yaml")
    data = load_conversation_data(conversation)
    facts = run_conversation(cfg, data, [spec], tmp_path)
    assert facts["diarization"]["backend"] == "pyannote" and facts["diarization"]["pyannote.audio_version"]
    result, rows = conversation_summary(cfg, data, [spec], tmp_path, get_normalizer("whisper-english"))
    diar = result.diarization
    assert diar is not None and diar.backend == "pyannote" and diar.options == {"checkpoint": str(tiny_pipeline)}
    assert diar.der is not None and math.isfinite(diar.der) and diar.n_hyp_speakers >= 1
    cpwer = result.model(spec.name).cpwer
    assert cpwer is not None and cpwer.n_words > 0 and len(rows) == 1
