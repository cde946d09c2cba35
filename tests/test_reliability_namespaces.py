"""Reliability class 15: section namespaces.

summary.json's core keys (``dataset``, ``models``, ``comparisons``, ``rows``, ``digest``, ...), a
recipe's own keys and the report's and query's names are reserved: an audit section, built in or
a plug-in, that registers one of them (by entry point or in code), or a name that is not a plain
lower-case key, is refused at registration with the reason; and a section's result can only be
stored under its own name, never over a core key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from audits import sections
from audits.asr.scoring import ScoringOptions
from audits.asr.summary import build_summary
from audits.recipes import BASE_KEYS
from audits.records import Record
from audits.schema import Summary
from audits.sections import AuditSection, builtin_registry, reserved_names
from engine.errors import RegistryError
from normalizers import IdentityNormalizer


class DatasetSection(AuditSection[dict, Record]):
    """A plug-in section that would write its result over summary.json's ``dataset`` block."""

    key = "dataset"
    title = "Dataset"
    result_type = Record

    def parse(self, raw: Any, source: str) -> dict:
        return dict(raw)

    def run(self, config: dict, ctx: Any) -> Record:
        return Record.from_json({"hijacked": True})

    def markdown(self, result: Record, run: Any) -> list[str]:
        return []


@pytest.mark.parametrize(
    "name",
    [
        "dataset",
        "models",
        "comparisons",
        "rows",
        "digest",
        "engine",
        "recipe",
        "normalizer",
        "scoring",
        "name",
        "shard_size",
        "utterances",
        "findings",
        "sweep",
        "merged_from",
    ],
)
def test_a_section_may_not_take_a_reserved_name(name: str) -> None:
    reg = builtin_registry()
    with pytest.raises(RegistryError, match=rf"audit section '{name}' .*the name is reserved"):
        reg.register(name)(DatasetSection)
    with pytest.raises(RegistryError, match="reserved"):
        builtin_registry().register_lazy(name, "tests.test_reliability_namespaces:DatasetSection", "my-plugin 1.0")


@pytest.mark.parametrize("name", ["Dataset", "my-section", "a.b", "", "x" * 40, "1st"])
def test_a_section_name_must_be_a_plain_key(name: str) -> None:
    with pytest.raises(RegistryError, match="must match"):
        builtin_registry().register(name)(DatasetSection)


def test_a_plugin_distribution_offering_a_reserved_section_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A separately installed package whose entry point names a section 'dataset' is refused when the sections are read."""
    site = tmp_path / "site"
    info = site / "evil_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil-plugin\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[audit_engine.sections]\ndataset = tests.test_reliability_namespaces:DatasetSection\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(site))
    reg = builtin_registry()
    with pytest.raises(RegistryError, match=r"audit section 'dataset' \(evil-plugin 1.0: .*the name is reserved \(a core key of summary"):
        reg.names()
    monkeypatch.setattr(sections, "SECTIONS", reg)
    with pytest.raises(RegistryError, match="reserved"):  # every later use says the same, never a half-filled registry
        sections.section_names()


def test_every_core_summary_key_and_recipe_key_is_reserved() -> None:
    reserved = set(reserved_names())
    assert set(Summary.__annotations__) <= reserved
    assert BASE_KEYS <= reserved
    assert not reserved & set(builtin_registry().names())  # no built-in section takes one either


def test_a_section_result_never_replaces_a_core_key() -> None:
    """Even past registration (a section result handed in by code), summary.json's dataset block is never replaced."""
    rows = pd.DataFrame(
        [
            {
                "utt_id": "u0",
                "model": "m",
                "ref_raw": "a b",
                "hyp_raw": "a b",
                "duration_s": 1.0,
                "infer_s": 0.1,
                "error": None,
                "speaker": "s",
                "shard": "s0",
                "parent_id": None,
            }
        ]
    )
    dataset = {"name": "mine", "fingerprint": "fp"}
    with pytest.raises(RegistryError, match="would replace summary.json's own 'dataset'"):
        build_summary(
            rows,
            IdentityNormalizer(),
            {},
            dataset,
            {"m": {"status": "loaded"}},
            {},
            ScoringOptions(n_boot=10),
            {"dataset": {"hijacked": True}},
        )
    summary, _ = build_summary(
        rows, IdentityNormalizer(), {}, dataset, {"m": {"status": "loaded"}}, {}, ScoringOptions(n_boot=10), {"toy": {"ok": True}}
    )
    assert summary["dataset"] == dataset and summary["toy"] == {"ok": True}  # type: ignore[typeddict-item]
