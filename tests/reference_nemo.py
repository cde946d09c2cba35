"""Reference procedures for the NeMo systems of the study line-up, written here as plain functions
from the Open ASR Leaderboard's ``nemo_asr/run_eval.py`` (Parakeet, Conformer, FastConformer,
Canary) and ``nemo_asr/run_eval_salm.py`` (Canary-Qwen). They share nothing with the engine's
backend (``engine/backends/asr/nemo.py``, ``nemo_salm.py``).

Both scripts run on the GPU in bfloat16; on the CPU ``run_eval.py`` uses float32, which is what
these functions do (``dtype`` is the one parameter). ``run_eval_salm.py``'s ``parse_hyp`` compares
the answer with a boolean mask (``answer == torch.isin(answer, eos)``), which in effect cuts an
answer at its first token of id 0 (``!`` in Qwen's vocabulary) instead of at end-of-text; the
function here cuts at end-of-text, as the script means to (docs/loaders.md records this).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def asr_model(path: Path, dtype: Any = None) -> Any:
    """run_eval.py's loading: ``ASRModel.restore_from``, cast to the compute dtype, eval, and greedy_batch
    decoding unless the model's own strategy is beam search."""
    import torch
    from nemo.collections.asr.models import ASRModel

    model = ASRModel.restore_from(str(path), map_location=torch.device("cpu"))
    model.to(dtype or torch.float32)
    model.eval()
    if model.cfg.decoding.strategy != "beam":
        model.cfg.decoding.strategy = "greedy_batch"
        model.change_decoding_strategy(model.cfg.decoding)
    return model


def transcribe(model: Any, model_id: str, clips: Sequence[np.ndarray], batch: int, folder: Path) -> list[Any]:
    """run_eval.py's transcription: each clip written to a WAV file (``soundfile.write``, its default
    16-bit PCM), then ``transcribe(paths, batch_size, verbose=False, [pnc=...], num_workers=1)``, where
    Canary gets ``pnc='nopnc'`` unless its id names v2 (then ``'pnc'``). Returns the hypotheses."""
    import soundfile
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, clip in enumerate(clips):
        path = folder / f"clip{i}.wav"
        soundfile.write(str(path), np.float32(clip), 16000)
        paths.append(str(path))
    with torch.inference_mode(), torch.no_grad():
        if "canary" in model_id:
            pnc = "nopnc" if "v2" not in model_id else "pnc"
            out = model.transcribe(paths, batch_size=batch, verbose=False, pnc=pnc, num_workers=1)
        else:
            out = model.transcribe(paths, batch_size=batch, verbose=False, num_workers=1)
    if isinstance(out, tuple) and len(out) == 2:
        out = out[0]
    return list(out)


def salm_transcribe(model: Any, clips: Sequence[np.ndarray], max_new_tokens: int = 128) -> list[tuple[tuple[int, ...], str]]:
    """run_eval_salm.py's ``transcribe`` for one batch: the zero-padded audio with its lengths, the user
    turn ``Transcribe the following: <audio locator>`` as a ``message`` slot, ``generate`` with the
    script's GenerationConfig, each answer up to end-of-text, ``tokenizer.ids_to_text``, stripped."""
    import torch
    from transformers import GenerationConfig

    lens = torch.tensor([len(c) for c in clips], dtype=torch.long)
    audios = torch.zeros((len(clips), int(lens.max())), dtype=torch.float32)
    for i, c in enumerate(clips):
        audios[i, : len(c)] = torch.from_numpy(np.asarray(c, dtype=np.float32))
    eos_tokens = torch.tensor([model.text_eos_id])
    with torch.inference_mode():
        answer_ids = model.generate(
            prompts=[[{"role": "user", "slots": {"message": f"Transcribe the following: {model.audio_locator_tag}"}}]] * len(clips),
            audios=audios,
            audio_lens=lens,
            generation_config=GenerationConfig(
                max_new_tokens=max_new_tokens, bos_token_id=model.text_bos_id, eos_token_id=eos_tokens, pad_token_id=model.text_pad_id
            ),
        )
    out = []
    for row in answer_ids.cpu().tolist():
        kept = row[: row.index(model.text_eos_id)] if model.text_eos_id in row else row
        out.append((tuple(kept), str(model.tokenizer.ids_to_text(kept)).strip()))
    return out
