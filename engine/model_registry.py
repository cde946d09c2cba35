"""The model registry (``models/*.yaml`` of the configuration tree, engine/config_tree.py): registry name -> backend, options, facts.

Each entry::

    whisper-tiny.en:
      backend: faster-whisper        # an ASR_BACKENDS name
      options: {model: tiny.en}      # passed to the backend
      batch_size: 8
      params_m: 39                   # parameters in millions (for queries/plots)
      num_gpus: 0.5                  # optional: GPUs per Ray actor (fractional shares a GPU)
      num_cpus: 1                    # optional: CPUs per Ray actor
      memory_mb: 2000                # optional: resident memory of one loaded copy
      rtfx: 146                      # optional: expected speed; the Ray runner starts slow models first
      measured:                      # optional: memory_mb and/or rtfx were measured, not estimated; how
        {fields: [memory_mb, rtfx], device: cpu, dtype: float32, batch: 4, threads: 2, by: scripts/bench_fullsize.py, note: ...}
      family: whisper-ct2            # optional (required for the study line-up, tag rweq): engine/backends/asr/families
      trust_remote_code: false       # optional: true lets a checkpoint run its own Python code (transformers)
      gated: false                   # optional: the hub repository asks users to accept its conditions first
      requires: [peft]               # optional: packages the checkpoint needs beyond its backend's ('dist' or 'dist>=version')
      study_row: vendor/model        # optional: the row of the study's table (models/rweq-table.tsv) this entry is
      card: https://...              # optional: where the hub id (or the hosted API's request) comes from
      tags: [local, whisper]
      description: ...

``family`` is checked against the backend (each family names the backends that may run it) and
passed to backends that take it as the option ``family``. Remote code is an entry-level opt-in
only: ``options.trust_remote_code`` is refused, so the permission is visible in the registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from engine import config_tree
from engine.backends import ASR_BACKENDS, asr_capabilities
from engine.backends.availability import Availability, model_availability
from engine.backends.hosted.scrub import register_secret_env
from engine.config import check_keys, expect_type, load_yaml
from engine.data import ModelSpec
from engine.errors import ConfigError, RegistryError
from engine.registry import did_you_mean

ENTRY_KEYS = {
    "backend",
    "options",
    "batch_size",
    "params_m",
    "tags",
    "description",
    "extra",
    "license",
    "num_gpus",
    "num_cpus",
    "memory_mb",
    "rtfx",
    "family",
    "trust_remote_code",
    "gated",
    "requires",
    "study_row",
    "card",
    "measured",
}
MEASURED_KEYS = {"fields", "device", "dtype", "batch", "threads", "by", "note", "date"}
MEASURED_REQUIRED = {"fields", "device", "dtype", "batch", "by"}
MEASURABLE = ("memory_mb", "rtfx")


@dataclass(frozen=True)
class ModelEntry:
    name: str
    backend: str
    options: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 8
    params_m: float | None = None
    tags: tuple[str, ...] = ()
    description: str = ""
    extra: str | None = None
    license: str | None = None
    source: str = ""
    #: Placement facts: only those the entry sets travel in the spec's meta (the Ray runner reads them).
    resources: Mapping[str, float] = field(default_factory=dict)
    #: Model family (engine/backends/asr/families) and the entry-level remote-code opt-in.
    family: str | None = None
    trust_remote_code: bool = False
    #: Facts about the checkpoint the availability check names: a gated hub repository, and
    #: packages it needs beyond its backend's (``peft``: the release transformers needs for adapters).
    gated: bool = False
    requires: tuple[str, ...] = ()
    #: The row of the robustness study's table (``vendor/model``) and where the hub id or the API comes from.
    study_row: str | None = None
    card: str | None = None
    #: How ``memory_mb`` / ``rtfx`` were measured (fields, device, dtype, batch, by); None: they are estimates.
    measured: Mapping[str, Any] | None = None
    #: A ``--models hf:ORG/NAME[@REVISION]`` entry's provenance (engine/hub_models.py): hub id, revision, commit, detected family.
    hub: Mapping[str, Any] | None = None

    def spec(self, batch_size: int | None = None, registry: Mapping[str, ModelEntry] | None = None) -> ModelSpec:
        """The runnable spec; options that name other registry models (e.g. the memorizer's
        ``fallback``) are resolved through ``registry`` (default: the configured one)."""
        meta: dict[str, Any] = {"params_m": self.params_m, "tags": list(self.tags), "registry_backend": self.backend}
        if self.family:
            meta["family"] = self.family
        if self.hub:
            meta["hub"] = dict(self.hub)
        meta.update(self.resources)
        if isinstance(self.options.get("api_key_env"), str):  # the driver scrubs this key too (Ray: the model runs elsewhere)
            register_secret_env(self.options["api_key_env"])
        return ModelSpec(self.name, self.backend, self._resolved_options(registry), batch_size or self.batch_size, meta)

    def _own_options(self) -> dict[str, Any]:
        """The options with the entry-level facts the backend takes (family, remote-code opt-in)."""
        options = dict(self.options)
        cls = ASR_BACKENDS.get(self.backend)
        if self.family and getattr(cls, "takes_family", False):
            options.setdefault("family", self.family)
        if self.trust_remote_code:
            options["trust_remote_code"] = True
        return options

    def _resolved_options(self, registry: Mapping[str, ModelEntry] | None) -> dict[str, Any]:
        options = self._own_options()
        cls = ASR_BACKENDS.get(self.backend)
        names = getattr(cls, "model_options", ())
        for key in names:
            value = options.get(key)
            if isinstance(value, str) and value:
                reg = registry if registry is not None else load_model_registry()
                other = resolve_models([value], reg)[0]
                if other.name == self.name:
                    raise ConfigError(f"{self.source}: model '{self.name}': option '{key}' names the model itself")
                options[key] = {"name": other.name, "backend": other.backend, "options": other._resolved_options(reg)}
        return options

    @property
    def needed_extra(self) -> str | None:
        """The pip extra this model needs: the entry's own, else its family's."""
        if self.extra:
            return str(self.extra)
        if self.family:
            from engine.backends.asr.families import FAMILIES

            return FAMILIES[self.family].extra
        return None

    def availability(self) -> Availability:
        """Can this model run here, and every reason why not: the backend's own check (engine/backends/availability.py,
        with the checkpoint checks of the load), the packages the entry requires and a gated repository."""
        return model_availability(self.backend, self._own_options(), self.needed_extra, self.requires, self.gated)


def load_model_registry(config_dir: Path | None = None) -> dict[str, ModelEntry]:
    """Read every ``models/*.yaml`` of the configuration tree (``config_dir`` or the one in use); duplicates
    across files are errors."""
    cdir = config_dir / "models" if config_dir else config_tree.config_folder("models")
    entries: dict[str, ModelEntry] = {}
    for path in sorted(cdir.glob("*.yaml")):
        data = load_yaml(path) or {}
        check_keys(data, {"models"}, str(path), required={"models"})
        models = data["models"]
        if not isinstance(models, Mapping):
            raise ConfigError(f"{path}: 'models' must be a mapping of name -> entry")
        for name, raw in models.items():
            where = f"{path}: model '{name}'"
            check_keys(raw, ENTRY_KEYS, where, required={"backend"})
            if name in entries:
                raise ConfigError(f"{where}: duplicate model name (also in {entries[name].source})")
            backend = expect_type(raw["backend"], str, f"{where}.backend")
            try:
                ASR_BACKENDS.check(backend)
            except RegistryError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            family = _family(raw, backend, where)
            trust = raw.get("trust_remote_code", False)
            if not isinstance(trust, bool):
                raise ConfigError(f"{where}.trust_remote_code: must be true or false, got {trust!r}")
            if "trust_remote_code" in (raw.get("options") or {}):
                raise ConfigError(
                    f"{where}: options.trust_remote_code is not accepted; running a checkpoint's own code is an entry-level "
                    "opt-in: write 'trust_remote_code: true' beside 'backend' (after reviewing that code)"
                )
            gated = raw.get("gated", False)
            if not isinstance(gated, bool):
                raise ConfigError(f"{where}.gated: must be true or false, got {gated!r}")
            requires = expect_type(raw.get("requires", []) or [], list, f"{where}.requires")
            if not all(isinstance(r, str) and r.strip() for r in requires):
                raise ConfigError(f"{where}.requires: must be a list of package names ('peft' or 'dist>=version'), got {requires!r}")
            study_row, card = raw.get("study_row"), raw.get("card")
            if study_row is not None and (not isinstance(study_row, str) or study_row.count("/") != 1 or "" in study_row.split("/")):
                raise ConfigError(f"{where}.study_row: must be 'vendor/model' (a row of models/rweq-table.tsv), got {study_row!r}")
            if card is not None and (not isinstance(card, str) or not card.startswith("https://")):
                raise ConfigError(f"{where}.card: must be an https:// address (the model card or API reference), got {card!r}")
            entries[name] = ModelEntry(
                name=str(name),
                backend=backend,
                options=dict(expect_type(raw.get("options", {}) or {}, dict, f"{where}.options")),
                batch_size=int(expect_type(raw.get("batch_size", 8), int, f"{where}.batch_size")),
                params_m=float(raw["params_m"]) if raw.get("params_m") is not None else None,
                tags=tuple(str(t) for t in expect_type(raw.get("tags", []) or [], list, f"{where}.tags")),
                description=str(raw.get("description", "")),
                extra=raw.get("extra"),
                license=raw.get("license"),
                source=str(path),
                resources=_resources(raw, where),
                family=family,
                trust_remote_code=trust,
                gated=gated,
                requires=tuple(str(r).strip() for r in requires),
                study_row=study_row,
                card=card,
                measured=_measured(raw, where),
            )
    return entries


@dataclass(frozen=True)
class StudyRow:
    """One row of the robustness study's table of ASR systems (models/rweq-table.tsv of the configuration tree)."""

    vendor: str
    model: str
    open: bool
    release_date: str

    @property
    def key(self) -> str:
        """``vendor/model`` as the table spells them: what a registry entry's ``study_row`` names."""
        return f"{self.vendor}/{self.model}"


STUDY_TABLE_COLUMNS = ("vendor", "model", "open_or_proprietary", "release_date")


def read_study_table(config_dir: Path | None = None) -> list[StudyRow]:
    """The study's table of ASR systems, in its order; lines starting with ``#`` are its provenance."""
    path = (config_dir / "models" if config_dir else config_tree.config_folder("models")) / "rweq-table.tsv"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the study's table ({exc})") from exc
    rows: list[StudyRow] = []
    header_seen = False
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if not header_seen:
            if tuple(cells) != STUDY_TABLE_COLUMNS:
                raise ConfigError(f"{path}, line {number}: the header must be {' / '.join(STUDY_TABLE_COLUMNS)} (tab-separated)")
            header_seen = True
            continue
        if len(cells) != len(STUDY_TABLE_COLUMNS) or cells[2] not in ("open", "proprietary") or not all(cells):
            raise ConfigError(f"{path}, line {number}: expected vendor, model, open|proprietary, release date; got {cells!r}")
        row = StudyRow(cells[0], cells[1], cells[2] == "open", cells[3])
        if any(r.key == row.key for r in rows):
            raise ConfigError(f"{path}, line {number}: row {row.key} is listed twice")
        rows.append(row)
    if not header_seen:
        raise ConfigError(f"{path}: no header line")
    return rows


def _family(raw: Mapping[str, Any], backend: str, where: str) -> str | None:
    """The entry's family, checked: known, and runnable by the entry's backend."""
    from engine.backends.asr.families import FAMILIES

    value = raw.get("family")
    if value is None:
        return None
    name = expect_type(value, str, f"{where}.family")
    if name not in FAMILIES:
        raise ConfigError(f"{where}.family: unknown family '{name}' (known: {', '.join(sorted(FAMILIES))})")
    if name not in asr_capabilities(backend).families:  # the backend's declaration (imports its module only)
        raise ConfigError(f"{where}: family '{name}' runs on backend {' or '.join(FAMILIES[name].backends)}, not '{backend}'")
    return name


def _resources(raw: Mapping[str, Any], where: str) -> dict[str, float]:
    """``num_gpus`` / ``num_cpus`` / ``memory_mb`` / ``rtfx`` of an entry: non-negative numbers, kept only when set."""
    out: dict[str, float] = {}
    for key in ("num_gpus", "num_cpus", "memory_mb", "rtfx"):
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"{where}.{key}: must be a number >= 0, got {value!r}")
        if key == "num_gpus" and value > 1 and value != int(value):
            raise ConfigError(f"{where}.num_gpus: a fraction must be below 1 (Ray cannot split GPUs above one), got {value!r}")
        out[key] = float(value)
    return out


def _measured(raw: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """An entry's ``measured`` mapping, checked: which of memory_mb / rtfx it covers (each set in the
    entry), on which device, in which dtype, at which batch size, and by what; None when absent."""
    from engine.backends.device import DTYPE_CHOICES

    value = raw.get("measured")
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}.measured: must be a mapping (fields, device, dtype, batch, by), got {value!r}")
    check_keys(value, MEASURED_KEYS, f"{where}.measured", required=MEASURED_REQUIRED)
    fields = value["fields"]
    if not isinstance(fields, list) or not fields or any(f not in MEASURABLE for f in fields):
        raise ConfigError(f"{where}.measured.fields: a non-empty list of {' and '.join(MEASURABLE)}, got {fields!r}")
    for name in fields:
        if raw.get(name) is None:
            raise ConfigError(f"{where}.measured.fields names {name}, but the entry sets no {name}")
    if not isinstance(value["device"], str) or value["device"].split(":")[0] not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"{where}.measured.device: cpu, cuda, cuda:N or mps, got {value['device']!r}")
    if value["dtype"] not in DTYPE_CHOICES:
        raise ConfigError(f"{where}.measured.dtype: one of {', '.join(DTYPE_CHOICES)}, got {value['dtype']!r}")
    for key in ("batch", "threads"):
        n = value.get(key)
        if key in value and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ConfigError(f"{where}.measured.{key}: a whole number >= 1, got {n!r}")
    if not isinstance(value["by"], str) or not value["by"].strip():
        raise ConfigError(f"{where}.measured.by: the command or script that measured it, got {value['by']!r}")
    return dict(value)


def resolve_models(names: list[str], registry: Mapping[str, ModelEntry]) -> list[ModelEntry]:
    """Registry entries for names (``hf:ORG/NAME[@REVISION]``: a hub checkpoint, engine/hub_models.py); unknown ones: did you mean."""
    out = []
    for n in names:
        if n.startswith("hf:") and n not in registry:
            out.append(hub_entry(n))
            continue
        if n not in registry:
            raise ConfigError(f"{did_you_mean('model', n, sorted(registry))}; see `audit list models`")
        out.append(registry[n])
    return out


def hub_entry(spec: str) -> ModelEntry:
    """The registry entry of a ``--models hf:ORG/NAME[@REVISION]`` name (engine/hub_models.py): the ``transformers``
    backend, the family read from the checkpoint's config.json, the revision pinned to the commit read."""
    from engine.hub_models import BACKEND, resolve_hub

    hub = resolve_hub(spec)
    return ModelEntry(
        name=spec,
        backend=BACKEND,
        options={"model": hub.repo_id, **({"revision": hub.pinned} if hub.pinned else {})},
        params_m=hub.params_m,
        tags=("hub",),
        description=f"{hub.repo_id} from the Hugging Face hub ({hub.family} family, detected from its config.json)",
        source=spec,
        family=hub.family,
        card=f"https://huggingface.co/{hub.repo_id}",
        hub=hub.facts(),
    )
