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
from typing import Any, Literal, Mapping

from engine import config_tree
from engine.backends import ASR_BACKENDS, asr_capabilities
from engine.backends.availability import Availability, model_availability
from engine.backends.device import DTYPE_CHOICES
from engine.backends.hosted.scrub import register_secret_env
from engine.config import check_keys, load_yaml
from engine.data import ModelSpec
from engine.errors import ConfigError, RegistryError
from engine.options import Options, option
from engine.registry import did_you_mean

MEASURABLE = ("memory_mb", "rtfx")
RESOURCE_KEYS = ("num_gpus", "num_cpus", "memory_mb", "rtfx")


def _device(value: str, where: str) -> str:
    if value.split(":")[0] not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"{where}: cpu, cuda, cuda:N or mps, got {value!r}")
    return value


def _nonblank(value: str, where: str) -> str:
    if not value.strip():
        raise ConfigError(f"{where}: the command or script that measured it, got {value!r}")
    return value


@dataclass(frozen=True)
class MeasuredOptions(Options):
    """An entry's ``measured:`` mapping: which of memory_mb / rtfx were measured (not estimated), and how."""

    fields: tuple[Literal["memory_mb", "rtfx"], ...] = option(doc="which figures were measured: memory_mb and/or rtfx")
    device: str = option(doc="cpu, cuda, cuda:N or mps", parse=_device)
    dtype: str = option(doc="the weights' dtype", choices=DTYPE_CHOICES)
    batch: int = option(doc="the batch size measured at", ge=1)
    threads: int | None = option(None, "CPU threads", ge=1)
    by: str = option(doc="the command or script that measured it", parse=_nonblank)
    note: str | None = option(None, "anything a reader needs to weigh the figure")
    date: str | None = option(None, "when it was measured")

    def validate(self, where: str) -> None:
        if not self.fields:
            raise ConfigError(f"{where}.fields: a non-empty list of {' and '.join(MEASURABLE)}, got []")


def _requires(value: tuple[str, ...], where: str) -> tuple[str, ...]:
    if not all(r.strip() for r in value):
        raise ConfigError(f"{where}: must be a list of package names ('peft' or 'dist>=version'), got {list(value)!r}")
    return tuple(r.strip() for r in value)


def _study_row(value: str, where: str) -> str:
    if value.count("/") != 1 or "" in value.split("/"):
        raise ConfigError(f"{where}: must be 'vendor/model' (a row of models/rweq-table.tsv), got {value!r}")
    return value


def _card(value: str, where: str) -> str:
    if not value.startswith("https://"):
        raise ConfigError(f"{where}: must be an https:// address (the model card or API reference), got {value!r}")
    return value


def _backend(value: str, where: str) -> str:
    try:
        ASR_BACKENDS.check(value)
    except RegistryError as exc:
        raise ConfigError(f"{where.removesuffix('.backend')}: {exc}") from None
    return value


@dataclass(frozen=True)
class EntryOptions(Options):
    """One entry of a model registry file (``models/*.yaml``), as written; ``ModelEntry`` is what the engine runs."""

    backend: str = option(doc="an ASR_BACKENDS name", parse=_backend)
    options: dict[str, Any] = option({}, "passed to the backend (checked by its options record)", null_default=True)
    batch_size: int = option(8, "clips per batch", ge=1)
    params_m: float | None = option(None, "parameters in millions (for queries and plots)", ge=0)
    tags: tuple[str, ...] = option((), "tags to select models by (--models TAG)", null_default=True)
    description: str = option("", "one line about the model", doc_default='""')
    extra: str | None = option(None, "the pip extra the model needs (default: its family's)")
    license: str | None = option(None, "the checkpoint's license")
    num_gpus: float | None = option(None, "GPUs per Ray actor (a fraction shares a GPU)", ge=0)
    num_cpus: float | None = option(None, "CPUs per Ray actor", ge=0)
    memory_mb: float | None = option(None, "resident memory of one loaded copy", ge=0)
    rtfx: float | None = option(None, "expected speed; the Ray runner starts slow models first", ge=0)
    family: str | None = option(None, "the model family (engine/backends/asr/families); required for the study line-up")
    trust_remote_code: bool = option(False, "let a checkpoint run its own Python code (transformers)")
    gated: bool = option(False, "the hub repository asks users to accept its conditions first")
    requires: tuple[str, ...] = option((), "packages the checkpoint needs beyond its backend's", parse=_requires, null_default=True)
    study_row: str | None = option(None, "the row of the study's table (models/rweq-table.tsv): vendor/model", parse=_study_row)
    card: str | None = option(None, "where the hub id (or the hosted API's request) comes from: an https:// address", parse=_card)
    measured: MeasuredOptions | None = option(None, "how memory_mb / rtfx were measured; absent: they are estimates")

    def validate(self, where: str) -> None:
        if self.num_gpus is not None and self.num_gpus > 1 and self.num_gpus != int(self.num_gpus):
            raise ConfigError(f"{where}.num_gpus: a fraction must be below 1 (Ray cannot split GPUs above one), got {self.num_gpus!r}")
        if "trust_remote_code" in self.options:
            raise ConfigError(
                f"{where}: options.trust_remote_code is not accepted; running a checkpoint's own code is an entry-level "
                "opt-in: write 'trust_remote_code: true' beside 'backend' (after reviewing that code)"
            )
        if self.family is not None:
            _check_family(self.family, self.backend, where)
        for name in self.measured.fields if self.measured is not None else ():
            if getattr(self, name) is None:
                raise ConfigError(f"{where}.measured.fields names {name}, but the entry sets no {name}")

    def resources(self) -> dict[str, float]:
        """``num_gpus`` / ``num_cpus`` / ``memory_mb`` / ``rtfx``, only those the entry sets."""
        return {k: v for k in RESOURCE_KEYS if (v := getattr(self, k)) is not None}


ENTRY_KEYS = set(EntryOptions.declared())


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
            if name in entries:
                raise ConfigError(f"{where}: duplicate model name (also in {entries[name].source})")
            e = EntryOptions.parse(raw, where)
            entries[name] = ModelEntry(
                name=str(name),
                backend=e.backend,
                options=dict(e.options),
                batch_size=e.batch_size,
                params_m=e.params_m,
                tags=e.tags,
                description=e.description,
                extra=e.extra,
                license=e.license,
                source=str(path),
                resources=e.resources(),
                family=e.family,
                trust_remote_code=e.trust_remote_code,
                gated=e.gated,
                requires=e.requires,
                study_row=e.study_row,
                card=e.card,
                measured=None if e.measured is None else dict(raw["measured"]),
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


def _check_family(name: str, backend: str, where: str) -> None:
    """The entry's family is known, and runnable by the entry's backend."""
    from engine.backends.asr.families import FAMILIES

    if name not in FAMILIES:
        raise ConfigError(f"{where}.family: unknown family '{name}' (known: {', '.join(sorted(FAMILIES))})")
    if name not in asr_capabilities(backend).families:  # the backend's declaration (imports its module only)
        raise ConfigError(f"{where}: family '{name}' runs on backend {' or '.join(FAMILIES[name].backends)}, not '{backend}'")


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
