"""Derived datasets: every clip of a dataset at every level of every perturbation family, stored as shards.

For each source shard the derived clips are written to one Parquet shard (the shard schema of
``engine.audio.shards``: FLAC bytes, ``parent_id`` = the source clip, ``derivation`` = how it was
made) under ``<cache>/<key>/``, where ``key`` hashes the source dataset's fingerprint, the
families and the seed. A shard file is written atomically with its SHA-256 recorded beside it, so
an interrupted build resumes where it stopped and a finished one is reused, but only while its
size and digest match (a truncated or edited shard is rebuilt, never read). The dataset a run sees is the source
clips (label ``perturbation=clean``) followed by the derived shards (``perturbation=<family>:<level>``);
its fingerprint covers both, so the run plan and resume treat derived clips like any other.
A derived clip is a level of its source, not a new clip: the audit reads derived clips only in
the sections that declare so (``audits/clips.py``), and the ``perturbation`` labels are reserved
(``engine.data.DERIVATION_LABELS``): a dataset that has one is refused when it is read.

Every derived clip is a pure function of the source audio, the family, the level and the seed
(``rng`` seeded from a hash of all four), so the same seed gives the same bytes. A family that
draws from a folder of recordings (``engine.perturb.banks``: recorded noise, room impulse
responses) depends on that folder's files too: the cache key holds the folder's digest (every
file's SHA-256), so a changed file rebuilds the shards and an unchanged folder reuses them, and
each derived clip records the file it used (``sources.json`` lists them all).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.audio.decoding import decode
from engine.audio.shards import encode_audio, iter_table_utterances, record_shard_digest, utterances_to_table, verified_shard
from engine.data import DERIVATION_COLUMN, SAMPLE_RATE, SOURCE_DERIVATION, DecodeOptions, Shard, Utterance
from engine.datasets.base import Dataset, ShardIndex, audio_stamps, clip_digest, fingerprint_utterances
from engine.errors import AudioError, AuditError, ConfigError
from engine.perturb import banks, ops
from engine.storage import atomic_write_text

log = logging.getLogger(__name__)

KINDS = ("noise", "telephone", "mp3", "opus", "reverb", "room", "speed", "gain")
UNITS = {
    "noise": "dB SNR",
    "telephone": "kHz",
    "mp3": "kbps",
    "opus": "kbps",
    "reverb": "s RT60",
    "room": "s RT60",
    "speed": "x",
    "gain": "dB",
}
VERSION = 1  # bump when a perturbation's output changes, so cached shards are rebuilt
BABBLE_TALKERS = 4


@dataclass(frozen=True)
class Family:
    """One perturbation family: ``kind`` (with ``noise`` for additive noise) at ``levels``, mildest first.

    ``source`` is the folder a ``recorded`` noise or a ``room`` family draws its files from, and
    ``bank`` that folder scanned (``banks.scan_bank``; scanned here when not yet).
    """

    name: str
    kind: str
    levels: tuple[float, ...]
    noise: str = ""
    source: banks.BankSpec | None = None
    bank: banks.Bank | None = None

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    def label(self, level: float) -> str:
        return f"{self.name}:{level:g}"

    def key(self) -> dict[str, Any]:
        """What the family's derived clips depend on (the cache key's part): with a folder, its digest, not its path."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "levels": list(self.levels), "noise": self.noise}
        if self.bank is not None:
            out["bank"] = self.bank.key()
        return out

    def describe(self) -> dict[str, Any]:
        out = self.key()
        if self.bank is not None:
            out["bank"] = self.bank.describe()
        return out


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()[:8], "little")


def perturb(
    x: np.ndarray, sr: int, fam: Family, level: float, rng: np.random.Generator, others: Sequence[np.ndarray] = (), pick: int = 0
) -> tuple[np.ndarray, dict[str, Any]]:
    """Apply one family at one level (``pick``: the clip's draw from a family's folder, from its identity and the seed)."""
    if fam.bank is not None:
        return banks.apply(x, sr, fam.kind, fam.bank, fam.levels, level, pick)
    if fam.kind == "noise":
        return ops.add_noise(x, sr, fam.noise, level, rng, others)
    if fam.kind == "telephone":
        return ops.telephone(x, sr)
    if fam.kind in ops.CODECS:
        return ops.codec(x, sr, fam.kind, level)
    if fam.kind == "reverb":
        return ops.reverb(x, sr, level, rng)
    if fam.kind == "speed":
        return ops.speed(x, sr, level)
    if fam.kind == "gain":
        return ops.gain(x, level)
    raise ValueError(f"unknown perturbation kind '{fam.kind}' (known: {', '.join(KINDS)})")


def derived_id(utt_id: str, fam: Family, level: float) -> str:
    """The id of ``utt_id``'s clip at ``level`` of ``fam``: ``<utt_id>~<family>:<level>`` (the level as ``{:g}`` writes it)."""
    return f"{utt_id}~{fam.label(level)}"


def check_derivation_plan(dataset: Dataset, families: Sequence[Family], where: str = "perturbations") -> None:
    """Refuse, before anything is derived, loaded or written, derived clips whose identity is wrong.

    Known from the ids alone: two levels of a family that format to one label (``10`` and
    ``10.0000001`` both become ``:10``), a derived id equal to a clip of the dataset (a source
    ``a~noise:10`` beside ``a`` at noise 10) or to another derived clip, and a babble family over a
    shard of one clip (babble mixes the other clips of the shard).
    """
    for i, fam in enumerate(families):
        seen: dict[str, float] = {}
        for level in fam.levels:
            label = fam.label(level)
            if label in seen:
                raise ConfigError(
                    f"{where}.families[{i}] ({fam.name}): levels {seen[label]!r} and {level!r} both become '{label}' in the derived "
                    "clips' ids and labels (levels are written with 6 significant digits); list levels that differ there"
                )
            seen[label] = level
    source: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for sid in dataset.shard_ids:
        ids = dataset.shard_index(sid).utt_ids
        sizes[sid] = len(ids)
        for u in ids:
            source.setdefault(u, sid)
    derived: dict[str, str] = {}
    for u in source:
        for fam in families:
            for level in fam.levels:
                d = derived_id(u, fam, level)
                other = "a clip of the dataset" if d in source else derived.get(d)
                if other is not None:
                    raise ConfigError(
                        f"{where}: clip {u!r} at {fam.label(level)} would be derived as {d!r}, the id of {other}; every clip's id "
                        f"must be unique: rename that clip in the dataset (or the family '{fam.name}')"
                    )
                derived[d] = f"the derived clip of {u!r} at {fam.label(level)}"
    if any(f.kind == "noise" and f.noise == "babble" for f in families):
        lonely = [sid for sid, n in sizes.items() if n == 1]
        if lonely:
            raise ConfigError(
                f"{where}: babble noise mixes the other clips of a clip's shard, and shard {lonely[0]} holds one clip; "
                "set shard_size so that no shard holds a single clip (or use another noise)"
            )


def cache_key(source_fingerprint: str, families: Sequence[Family], seed: int) -> str:
    blob = json.dumps(
        {"source": source_fingerprint, "families": [f.key() for f in families], "seed": seed, "version": VERSION}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def derive_shard(shard: Shard, dataset: Dataset, families: Sequence[Family], seed: int, decode_options: DecodeOptions) -> list[Utterance]:
    """The derived clips of one source shard (clips that cannot be decoded or have no reference are skipped, logged)."""
    decoded = []
    for u in shard.utterances:
        d = decode(u, dataset.root, SAMPLE_RATE, decode_options.max_duration_s, decode_options.allow_outside_root)
        if d.error is not None:
            log.warning("perturbations: %s not derived: %s", u.utt_id, d.error)
            continue
        decoded.append((u, d.samples))
    out: list[Utterance] = []
    for i, (u, x) in enumerate(decoded):
        for fam in families:
            for level in fam.levels:
                rng = np.random.default_rng(_seed(seed, u.utt_id, fam.name, f"{level:g}", VERSION))
                others: list[np.ndarray] = []
                if fam.kind == "noise" and fam.noise == "babble":
                    others_any = [j for j in range(len(decoded)) if j != i]
                    pool = [j for j in others_any if decoded[j][0].speaker is None or decoded[j][0].speaker != u.speaker] or others_any
                    if not pool:
                        raise AudioError(f"perturbations: babble for {u.utt_id} needs other clips in its shard; use a larger shard_size")
                    picks = rng.choice(len(pool), size=min(BABBLE_TALKERS, len(pool)), replace=False)
                    others = [decoded[pool[int(k)]][1] for k in sorted(picks)]
                y, info = perturb(x, SAMPLE_RATE, fam, level, rng, others, _seed(seed, u.utt_id, fam.name, VERSION))
                label = fam.label(level)
                labels = {**dict(u.labels), DERIVATION_COLUMN: label, "perturbation_family": fam.name, "perturbation_level": f"{level:g}"}
                out.append(
                    Utterance(
                        utt_id=derived_id(u.utt_id, fam, level),
                        reference=u.reference,
                        audio_bytes=encode_audio(y, SAMPLE_RATE),
                        duration_s=len(y) / SAMPLE_RATE,
                        speaker=u.speaker,
                        labels=labels,
                        parent_id=u.utt_id,
                        derivation={
                            "perturbation": {
                                "family": fam.name,
                                "kind": fam.kind,
                                "noise": fam.noise or None,
                                "level": level,
                                "unit": fam.unit,
                                "seed": seed,
                                "version": VERSION,
                                **info,
                            },
                            "source_derivation": dict(u.derivation) if u.derivation else None,
                        },
                    )
                )
    return out


def derive_dataset(
    dataset: Dataset,
    families: Sequence[Family],
    seed: int,
    cache_dir: Path,
    decode_options: DecodeOptions = DecodeOptions(),
    progress: Callable[[int, int], None] | None = None,
) -> Dataset:
    """The source dataset plus every derived clip, built (or resumed, or reused) under ``cache_dir``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    families = [replace(f, bank=banks.scan_bank(f.source)) if f.source is not None and f.bank is None else f for f in families]
    key = cache_key(dataset.fingerprint, families, seed)
    root = Path(cache_dir) / key
    root.mkdir(parents=True, exist_ok=True)
    spec = {"source_fingerprint": dataset.fingerprint, "families": [f.describe() for f in families], "seed": seed, "version": VERSION}
    atomic_write_text(root / "spec.json", json.dumps(spec, indent=2, sort_keys=True))
    paths: dict[str, Path] = {}
    for n, sid in enumerate(dataset.shard_ids):
        path = root / f"derived-{sid}.parquet"
        if not verified_shard(path):
            if path.exists():
                log.warning(
                    "perturbations: cached %s does not match its recorded digest (truncated, edited or unfinished); rebuilding it", path
                )
            utts = derive_shard(dataset.load_shard(sid), dataset, families, seed, decode_options)
            label_keys = sorted({k for u in utts for k in u.labels})
            table = utterances_to_table(utts, label_keys) if utts else pa.table({})
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            pq.write_table(table, tmp)
            os.replace(tmp, path)
            record_shard_digest(path)
        paths[sid] = path
        if progress is not None:
            progress(n + 1, len(dataset.shard_ids))

    def load_derived(sid: str) -> Shard:
        try:
            table = pq.read_table(paths[sid])
        except Exception as exc:  # damaged after it was verified: the engine's error, naming the file, not pyarrow's traceback
            raise AuditError(
                f"derived shard {paths[sid]} cannot be read ({type(exc).__name__}: {exc}); it changed after it was "
                "verified: delete it and run the same command again to rebuild it"
            ) from None
        utts = tuple(iter_table_utterances(table, str(paths[sid]))) if table.num_columns else ()
        return Shard(f"perturbed-{sid}", utts)

    def load_source(sid: str) -> Shard:
        shard = dataset.load_shard(sid)
        return Shard(
            f"clean-{sid}", tuple(replace(u, labels={**dict(u.labels), DERIVATION_COLUMN: SOURCE_DERIVATION}) for u in shard.utterances)
        )

    def loader(sid: str) -> Shard:
        return load_source(sid[len("clean-") :]) if sid.startswith("clean-") else load_derived(sid[len("perturbed-") :])

    shard_ids = [f"clean-{s}" for s in dataset.shard_ids] + [f"perturbed-{s}" for s in dataset.shard_ids]
    index: dict[str, ShardIndex] = {}
    light: list[Utterance] = []  # ids and references only, for the fingerprint
    all_stamps: list[tuple[str, str]] = []
    tally = banks.SourceTally({f.name: f.bank for f in families if f.bank is not None})
    for sid in shard_ids:
        held = loader(sid).utterances
        for u in held:
            tally.add(u.derivation)
        stamps = audio_stamps(list(held), dataset.root)
        index[sid] = ShardIndex(tuple(u.utt_id for u in held), tuple(clip_digest(u, st) for u, st in zip(held, stamps)))
        light.extend(Utterance(u.utt_id, u.reference) for u in held)
        all_stamps.extend(stamps)
    n_utts = len(light)
    fingerprint = fingerprint_utterances(light, None, all_stamps)
    sources: dict[str, Any] = {}
    if tally.banks:  # every file the derived clips used, and a summary of it
        atomic_write_text(root / "sources.json", json.dumps(tally.manifest(), indent=2, sort_keys=True))
        sources = tally.summary(f"{key}/sources.json")
    meta = {
        **dataset.meta,
        "perturbations": {
            "cache_key": key,
            "families": [f.describe() for f in families],
            "seed": seed,
            "source_fingerprint": dataset.fingerprint,
            "source_n_utts": dataset.n_utts,
            **({"sources": sources} if sources else {}),
        },
    }
    return Dataset(
        name=dataset.name,
        source=dataset.source,
        reader=dataset.reader,
        shard_ids=shard_ids,
        _loader=loader,
        root=dataset.root,
        has_audio=True,
        n_utts=n_utts,
        fingerprint=fingerprint,
        meta=meta,
        shard_size=dataset.shard_size,
        index=index,
    )
