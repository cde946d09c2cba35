"""NVIDIA NeMo backend: by pretrained name or local checkpoint, in two families.

* ``nemo-asr``: ``ASRModel`` (Parakeet CTC/RNNT/TDT, Conformer/FastConformer, Canary).
  ``transcribe`` on in-memory arrays. Canary (``EncDecMultiTaskModel``) takes its prompt slots
  (``source_lang``, ``target_lang``, ``task``, ``pnc``) from the entry's options; the decoder
  prompt they make (the model's own prompt format over its defaults) is rendered at load, so a
  slot the format lacks fails there, and recorded in ``backend_info`` with the decoding config.
* ``nemo-salm``: speechlm2 ``SALM`` (nvidia/canary-qwen-2.5b), per its model card
  (engine/backends/asr/nemo_salm.py).

NeMo is a heavy optional extra, installed by ``make test-families`` only; without it ``load()``
raises ``BackendUnavailable`` with the install command.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from engine.backends.asr.nemo_salm import check_salm_weights, is_cached_salm, load_salm, rendered_prompt, salm_transcribe
from engine.backends.availability import Availability, local_or_cached
from engine.backends.base import ASRBackend, AsrCapabilities, BackendInfo, BackendOptions, package_versions
from engine.backends.bundled import check_audio_batch
from engine.backends.device import dtype_name_for, resolve_device
from engine.data import SAMPLE_RATE
from engine.errors import BackendUnavailable, ConfigError
from engine.options import option

log = logging.getLogger(__name__)

_INSTALL_HINT = "pip install '.[nemo]' (nemo_toolkit[asr]==2.7.3)"

_FAMILIES = ("nemo-asr", "nemo-salm")
_CANARY_SLOTS = ("source_lang", "target_lang", "task", "pnc")
_SALM_ONLY = ("llm",)
_TASKS = ("asr", "ast", "transcribe", "translate")
_PNC = {"yes": "yes", "no": "no", "true": "yes", "false": "no", "pnc": "yes", "nopnc": "no"}


def _pnc(value: Any, where: str) -> str | None:
    """Canary's pnc slot as 'yes'/'no'. An unquoted YAML ``yes`` is the boolean True, which NeMo's
    slot mapping would silently read as no-punctuation: both spellings are accepted here."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and value.strip().lower() in _PNC:
        return _PNC[value.strip().lower()]
    raise ConfigError(f"{where}: must be yes or no (punctuation and capitalisation), got {value!r}")


@dataclass(frozen=True)
class NemoOptions(BackendOptions):
    """The checkpoint, where it runs, Canary's prompt slots and the SALM family's settings."""

    model: str = option(doc="a NeMo pretrained name (nvidia/parakeet-tdt-0.6b-v2), a .nemo file or a SALM folder")
    device: str = option("auto", "auto, cpu, cuda or cuda:N")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = option("auto", "auto: bfloat16 on CUDA, float32 elsewhere (the leaderboard)")
    batch_size: int | None = option(None, "clips per NeMo batch; null: the batch the caller passes", ge=1, le=100_000)
    source_lang: str | None = option(None, "Canary prompt slot: the audio's language")
    target_lang: str | None = option(None, "Canary prompt slot: the text's language")
    pnc: Any = option(None, "Canary prompt slot: punctuation and capitalisation (yes/no)", parse=_pnc, kind_doc="yes/no or boolean or null")
    task: Literal["asr", "ast", "transcribe", "translate"] | None = option(None, "Canary task; null: the model's default")
    family: Literal["nemo-asr", "nemo-salm"] = option("nemo-asr", "nemo-asr: ASRModel; nemo-salm: speechlm2 SALM (canary-qwen)")
    prompt: str = option("Transcribe the following:", "nemo-salm: the instruction before the audio locator (model card)")
    max_new_tokens: int = option(128, "nemo-salm: cap on generated tokens (model card)", ge=1, le=100_000)
    llm: str | None = option(None, "nemo-salm: local folder with the LLM's tokenizer and config (else config.json's pretrained_llm)")

    def validate(self, where: str) -> None:
        wrong = _SALM_ONLY if self.family == "nemo-asr" else _CANARY_SLOTS
        given = [k for k in wrong if getattr(self, k) is not None]
        if given:
            raise ConfigError(f"{where}: option(s) {', '.join(given)} do not apply to family {self.family}")


def _hypothesis_text(item: Any) -> str:
    """NeMo returns str, Hypothesis objects, or (best, all) tuples depending on model and version."""
    if isinstance(item, tuple) and item:
        item = item[0]
    if isinstance(item, list) and item:
        item = item[0]
    text = getattr(item, "text", item)
    return str(text) if text is not None else ""


def _decoding_facts(model: Any) -> dict[str, Any]:
    """The decoding strategy in the model's config and the settings of that strategy."""
    from omegaconf import OmegaConf

    cfg = getattr(model, "cfg", None)
    decoding = cfg.get("decoding") if cfg is not None else None
    if decoding is None:
        return {"decoding": "the model class default (no decoding config)"}
    plain: Any = OmegaConf.to_container(decoding, resolve=True)
    if not isinstance(plain, dict):
        return {"decoding": str(plain)}
    strategy = str(plain.get("strategy", "default"))
    section = plain.get("beam" if "beam" in strategy or strategy in ("tsd", "alsd", "maes") else "greedy")
    settings = {k: v for k, v in section.items() if isinstance(v, (str, int, float, bool))} if isinstance(section, dict) else {}
    return {"decoding": strategy, "decoding_settings": settings}


def _leaderboard_decoding(model: Any) -> str | None:
    """As the Open ASR Leaderboard's NeMo script: a model whose decoding strategy is not beam search
    decodes with ``greedy_batch``. Returns the strategy it replaced, or None when nothing changed."""
    cfg = getattr(model, "cfg", None)
    decoding = cfg.get("decoding") if cfg is not None else None
    if decoding is None or not hasattr(model, "change_decoding_strategy"):
        return None
    strategy = str(decoding.get("strategy", ""))
    if strategy in ("beam", "greedy_batch"):
        return None
    from omegaconf import open_dict

    with open_dict(model.cfg):
        model.cfg.decoding.strategy = "greedy_batch"
    model.change_decoding_strategy(model.cfg.decoding)
    return f"{strategy} -> greedy_batch"


class NemoBackend(ASRBackend):
    """NeMo ``ASRModel`` (``from_pretrained(name)`` or ``restore_from(path.nemo)``) or speechlm2 ``SALM``."""

    name = "nemo"
    OPTIONS = NemoOptions
    options: NemoOptions
    requires = ("nemo",)
    capabilities = AsrCapabilities(families=("nemo-asr", "nemo-salm"))
    extra = "nemo"
    #: the registry passes the entry's ``family`` as the option ``family``
    takes_family = True

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        """A local ``.nemo`` file, a SALM folder (and the LLM it names), or a cached hub id."""
        o = cls.parse_options(options)
        model = o.model
        if model.endswith(".nemo"):
            ok = Path(model).expanduser().is_file()
            return Availability(ok, "local .nemo file" if ok else f"{model} not found")
        llm = o.llm
        family = o.family
        if family == "nemo-salm" or (family != "nemo-asr" and Path(model).expanduser().is_dir()):
            return check_salm_weights(model, llm)
        found = local_or_cached(model, model, lambda p: False)
        if found and is_cached_salm(model):  # a cached SALM checkpoint: the LLM it names must be at hand too
            return check_salm_weights(model, llm)
        return found

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._model: Any = None
        self._device: str | None = None
        self._torch: Any = None
        self._dtype_name: str | None = None
        self._largest_batch = 0
        self._facts: dict[str, Any] = {}

    def load(self) -> None:
        """Import NeMo (optional extra) and restore or download the model."""
        salm = self.options.family == "nemo-salm"
        try:
            import torch

            if salm:
                import nemo.collections.speechlm2.models  # noqa: F401 - fail here, with the install hint
            else:
                from nemo.collections.asr.models import ASRModel
        except ImportError as exc:
            raise BackendUnavailable(f"the nemo backend needs NeMo ({'speechlm2' if salm else 'asr'} collection): {_INSTALL_HINT}") from exc
        self._torch = torch
        device = resolve_device(self.options.device)
        # the leaderboard's precision: weights cast to bfloat16 on CUDA, float32 on the CPU
        dtype_name = dtype_name_for(device, "bfloat16", self.options.dtype)
        self._dtype_name = dtype_name
        model = self.options.model
        if salm:
            self._model, self._facts = load_salm(model, self.options.llm, device, getattr(torch, dtype_name))
            self._facts["prompt"] = rendered_prompt(self._model, self.options.prompt)
            self._device = device
            log.info("loaded NeMo SALM %s on %s/%s", model, device, dtype_name)
            return
        path = Path(model).expanduser()
        try:
            if model.endswith(".nemo") or path.exists():
                if not path.is_file():
                    raise BackendUnavailable(f"NeMo model file {path} does not exist")
                self._model = ASRModel.restore_from(str(path), map_location=torch.device(device))
            else:
                self._model = ASRModel.from_pretrained(model_name=model, map_location=torch.device(device))
        except BackendUnavailable:
            raise
        except (OSError, RuntimeError, ValueError) as exc:
            raise BackendUnavailable(
                f"cannot load NeMo model '{model}' ({exc}); if the hub is unreachable, download the .nemo file "
                "where it is reachable and pass its path as 'model'"
            ) from exc
        self._model.to(getattr(torch, dtype_name))
        self._model.eval()
        self._device = device
        greedy = _leaderboard_decoding(self._model)
        self._facts = {"model_class": type(self._model).__name__, **_decoding_facts(self._model)}
        if greedy:
            self._facts["decoding_changed"] = greedy
        self._facts.update(self._canary_prompt())
        log.info("loaded NeMo model %s on %s/%s", model, device, dtype_name)

    def _prompt_kwargs(self) -> dict[str, Any]:
        return {k: getattr(self.options, k) for k in _CANARY_SLOTS if getattr(self.options, k) is not None}

    def _transcribe_kwargs(self, size: int) -> dict[str, Any]:
        """``transcribe`` arguments. Canary: its prompt slots, and long-form chunking switched off.
        NeMo turns chunking on by itself when one clip (or batch_size 1) reaches a Canary that ships
        a timestamps model, so a clip would be cut into 30-40 s pieces alone but not in a batch;
        off, every clip is decoded whole, as in the leaderboard's batched runs."""
        if not self._facts.get("prompt_format"):
            return {"batch_size": size, "verbose": False}
        from nemo.collections.asr.models.aed_multitask_models import MultiTaskTranscriptionConfig

        config = MultiTaskTranscriptionConfig(batch_size=size, verbose=False, enable_chunking=False, prompt=self._prompt_kwargs() or None)
        return {"override_config": config}

    def _canary_prompt(self) -> dict[str, Any]:
        """Canary: the decoder prompt ``transcribe`` will build (the model's prompt format over its
        defaults, the options' slots on top), rendered now, so a slot the format lacks, or one it
        needs and nobody gave, fails before any audio is read."""
        kwargs = self._prompt_kwargs()
        prompt = getattr(self._model, "prompt", None)
        if prompt is None or not hasattr(prompt, "encode_dialog"):
            if kwargs:
                raise ConfigError(
                    f"{self.name}: option(s) {', '.join(kwargs)} are Canary prompt slots, but "
                    f"'{self.options.model}' is a {type(self._model).__name__} (no prompt)"
                )
            return {"prompt": None}
        from nemo.collections.asr.models.aed_multitask_models import parse_multitask_prompt

        turns = parse_multitask_prompt(dict(kwargs)) or prompt.get_default_dialog_slots()
        for turn in turns:  # the defaults fill what the options leave out, as in transcribe
            for default in prompt.get_default_dialog_slots():
                if default["role"] == turn["role"]:
                    turn["slots"] = {
                        **{k: v for k, v in default["slots"].items() if v is not None},
                        **{k: v for k, v in turn["slots"].items() if v is not None},
                    }
        try:
            ids = prompt.encode_dialog(turns=turns)["context_ids"]
        except (AssertionError, KeyError, RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"{self.name}: '{self.options.model}' (prompt format {self._model.prompt_format}) cannot "
                f"build its decoder prompt from {kwargs or 'its defaults'}: {exc}; set the slots its format needs "
                f"({', '.join(prompt.get_slots('user'))})"
            ) from exc
        text = str(self._model.tokenizer.ids_to_text(ids.tolist()))
        return {"prompt": text, "prompt_format": str(self._model.prompt_format), "prompt_slots": dict(turns[0]["slots"])}

    def transcribe_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[str]:
        """NeMo ``transcribe`` on in-memory arrays (SALM: ``generate``), ``batch_size`` at a time."""
        clips = check_audio_batch(audios, sample_rate, self.name)
        if self._model is None:
            raise BackendUnavailable(f"{self.name}: call load() before transcribing")
        size = self.options.batch_size or max(1, len(clips))
        self._largest_batch = max(self._largest_batch, min(size, len(clips)))
        torch = self._torch
        device = self._device or "cpu"
        with torch.inference_mode():
            if self.options.family == "nemo-salm":
                texts: list[str] = []
                for start in range(0, len(clips), size):
                    texts.extend(
                        salm_transcribe(self._model, clips[start : start + size], self.options.prompt, self.options.max_new_tokens, device)
                    )
                return texts
            output = self._model.transcribe(list(clips), **self._transcribe_kwargs(size))
        if isinstance(output, tuple):  # older RNNT models return (best, all_hypotheses)
            output = output[0]
        return [_hypothesis_text(item).strip() for item in output]

    def info(self) -> BackendInfo:
        """Model, family, the prompt as the model reads it, decoding settings, device, dtype, NeMo version."""
        extra: dict[str, Any] = {"family": self.options.family, "prompt": None}
        if self.options.family == "nemo-salm":
            extra.update(
                instruction=self.options.prompt,
                decoding="greedy",
                max_new_tokens=self.options.max_new_tokens,
                post_processing="tokenizer.ids_to_text of the answer (special tokens dropped), strip",
            )
        else:
            extra.update(post_processing="hypothesis text, strip")
            extra.update(self._prompt_kwargs())
        extra.update(self._facts)
        extra.update(package_versions("nemo_toolkit"))
        return BackendInfo(
            backend=self.name,
            model_id=self.options.model,
            device=self._device or self.options.device,
            dtype=self._dtype_name or self.options.dtype,
            batch_size=self.options.batch_size or self._largest_batch or 1,
            extra=extra,
        )

    def close(self) -> None:
        """Drop the model and free accelerator memory."""
        self._model = None
        if self._torch is not None and (self._device or "").startswith("cuda"):
            self._torch.cuda.empty_cache()

    def __repr__(self) -> str:
        return f"NemoBackend(model={self.options.model!r})"
