"""An audio-LM judge used as a speech-emotion backend, so the emotion audit can run it unchanged.

Each clip gets the judge's ``emotion_label`` task over the configured ``labels``; the answer
becomes a one-hot posterior. A reply that does not parse is that clip's error (``Unparseable
JudgeAnswer``), so the emotion audit counts and lists it among its failed clips and never scores a
guess. Cached answers make the engine's warm-up call and any clip-by-clip retry free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from engine.backends.availability import Availability
from engine.backends.base import BackendInfo, BackendOptions, EmotionOutput, SERBackend
from engine.backends.hosted.judges import AudioJudge, JudgeOptions
from engine.data import SAMPLE_RATE
from engine.errors import AuditError, ConfigError
from engine.options import option


class UnparseableJudgeAnswer(AuditError):
    """The judge's reply was not in the requested form; the clip is counted, not guessed."""


@dataclass(frozen=True)
class JudgeSEROptions(JudgeOptions):
    """A judge used as an emotion backend: the judge's options and the ``labels`` it chooses from."""

    labels: tuple[str, ...] = option(doc="the emotion labels the judge chooses from (at least two)")

    def validate(self, where: str) -> None:
        super().validate(where)
        if len(self.labels) < 2 or not all(self.labels):
            at = self.key_path(where, "labels")
            raise ConfigError(f"{at}: expected at least two non-empty emotion labels, got {list(self.labels)!r}")


class JudgeSER(SERBackend):
    """``emotion_label`` of an audio-LM judge as an SER backend (options: :class:`JudgeSEROptions`)."""

    name = "judge-ser"
    judge_backend: ClassVar[str] = ""
    OPTIONS: ClassVar[type[BackendOptions] | None] = JudgeSEROptions
    options: JudgeSEROptions

    @classmethod
    def _judge_cls(cls) -> Any:
        from engine.backends import JUDGE_BACKENDS

        return JUDGE_BACKENDS.get(cls.judge_backend)

    @classmethod
    def check_weights(cls, options: Mapping[str, Any]) -> Availability:
        cls.parse_options(options)
        result: Availability = cls._judge_cls().check_weights({k: v for k, v in options.items() if k != "labels"})
        return result

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.judge: AudioJudge = self._judge_cls()(**{k: v for k, v in options.items() if k != "labels"})
        self.labels = list(self.options.labels)

    def load(self) -> None:
        self.judge.load()

    def predict_batch(self, audios: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> list[EmotionOutput]:
        out: list[EmotionOutput] = []
        for clip in audios:
            answer = self.judge.emotion_label(clip, self.labels)
            if answer.value is None:
                raise UnparseableJudgeAnswer(
                    f"unparseable judge answer (not one of {self.labels} in the requested JSON): {answer.raw[:120]!r}"
                )
            out.append(EmotionOutput(posteriors={lab: 1.0 if lab == answer.value else 0.0 for lab in self.labels}))
        return out

    def usage(self) -> dict[str, Any]:
        """The judge's calls, cache hits, tokens and unparseable replies in this process."""
        return self.judge.usage()

    def info(self) -> BackendInfo:
        base = self.judge.info()
        return BackendInfo(
            base.backend,
            base.model_id,
            base.device,
            base.dtype,
            base.batch_size,
            {**dict(base.extra), "labels": self.labels, "task": "emotion_label"},
        )

    def close(self) -> None:
        self.judge.close()


class GeminiJudgeSER(JudgeSER):
    name = "gemini-judge"
    judge_backend = "gemini"


class OpenAIAudioJudgeSER(JudgeSER):
    name = "openai-audio-judge"
    judge_backend = "openai-audio"
