"""The probes section's typed result: one record per probe that ran (``summary.json``'s ``probes.<probe>``)."""

from __future__ import annotations

from dataclasses import dataclass

from audits.records import EntriesResult, Record


@dataclass(frozen=True)
class ProbesResult(EntriesResult[Record]):
    """Every probe's result by probe name (masking, orthography, bad_reference, synthetic_voice, ...), figures as read."""

    entry_type = Record
