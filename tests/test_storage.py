"""The run's storage (engine/storage.py): files fingerprinted while written, and a run that checks its
engine options, builds its normalizer and fingerprints ``utterances.parquet`` once."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.storage import write_hashed
from tests.reliability_env import Env, speech_clips, write_dataset


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


TABLE = pa.table({"model": ["m"] * 300, "utt_id": [f"u{i:04d}" for i in range(300)], "hyp_raw": ["a b c"] * 300})


def test_write_hashed_gives_the_digest_of_the_bytes_a_path_write_gives(tmp_path: Path) -> None:
    pq.write_table(TABLE, tmp_path / "by_path.parquet")
    digest = write_hashed(tmp_path / "hashed.parquet", lambda fh: pq.write_table(TABLE, fh))
    assert (tmp_path / "hashed.parquet").read_bytes() == (tmp_path / "by_path.parquet").read_bytes()
    assert digest == _sha256(tmp_path / "hashed.parquet")
    frame = TABLE.to_pandas()
    frame.to_parquet(tmp_path / "pandas_by_path.parquet", index=False)
    digest = write_hashed(tmp_path / "pandas.parquet", lambda fh: frame.to_parquet(fh, index=False))
    assert (tmp_path / "pandas.parquet").read_bytes() == (tmp_path / "pandas_by_path.parquet").read_bytes()
    assert digest == _sha256(tmp_path / "pandas.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["by_path.parquet", "hashed.parquet", "pandas.parquet", "pandas_by_path.parquet"]


def test_write_hashed_leaves_nothing_when_the_writer_fails(tmp_path: Path) -> None:
    (tmp_path / "t.parquet").write_bytes(b"earlier")

    def dies(fh: Any) -> None:
        fh.write(b"PAR1 partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_hashed(tmp_path / "t.parquet", dies)
    assert (tmp_path / "t.parquet").read_bytes() == b"earlier", "the earlier file was replaced by a partial one"
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"], "a temporary file was left behind"


def test_a_run_checks_options_builds_its_normalizer_and_fingerprints_its_rows_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import audits.pipeline
    import audits.run_dir
    from audits.pipeline import run_audit
    from audits.recipes import load_recipe
    from engine.engine import EngineOptions

    env = Env(tmp_path, monkeypatch)
    data = write_dataset(tmp_path / "data", speech_clips(6))
    calls = {"check": 0, "normalizer": 0}
    real_check, real_normalizer = EngineOptions.check, audits.pipeline.get_normalizer

    def counted_check(self: EngineOptions) -> None:
        calls["check"] += 1
        real_check(self)

    def counted_normalizer(name: str) -> Any:
        calls["normalizer"] += 1
        return real_normalizer(name)

    def no_read_back(path: Path) -> str:
        raise AssertionError(f"{path} was read back to fingerprint it")

    monkeypatch.setattr(EngineOptions, "check", counted_check)
    monkeypatch.setattr(audits.pipeline, "get_normalizer", counted_normalizer)
    monkeypatch.setattr(audits.run_dir, "rows_fingerprint", no_read_back)
    out = tmp_path / "out"
    result = run_audit(load_recipe(str(env.recipe(data))), out, engine=EngineOptions())
    assert calls == {"check": 1, "normalizer": 1}
    rows = result.summary["rows"]
    assert rows["sha256"] == _sha256(out / "utterances.parquet") and rows["n_rows"] == 6
    assert len(pd.read_parquet(out / "utterances.parquet")) == 6
