"""Exception classes for the engine; messages tell the user how to fix the input."""

from __future__ import annotations


class AuditError(Exception):
    """Base class for every error this project raises on purpose."""


class ConfigError(AuditError):
    """A recipe, model registry entry or manifest is malformed (raised before models load)."""


class RegistryError(AuditError, KeyError):
    """An unknown or duplicate registry name."""

    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0]) if self.args else ""


class ManifestError(ConfigError):
    """A dataset manifest cannot be read; names the file, line and field."""

    def __init__(self, path: object, problem: str, line: int | None = None, field: str | None = None) -> None:
        where = f"{path}"
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem


class AudioError(AuditError):
    """One utterance's audio cannot be used; recorded in the result row, never fatal to the run."""


class SegmentError(AudioError):
    """A segment (``offset``/``duration``) does not lie inside its audio; ``field`` names the manifest key at fault."""

    def __init__(self, problem: str, field: str) -> None:
        super().__init__(problem)
        self.field = field


class BackendUnavailable(AuditError):
    """A backend cannot load here (missing extra, weights not reachable); says what to install."""


class WeightsIntegrityError(BackendUnavailable):
    """A package's weight files are missing or differ from the SHA-256 digests recorded for its pinned
    release (engine/backends/weight_digests.py); names the package, the file and the reinstall command."""


class HostedRequestError(AuditError):
    """A hosted API refused a request, answered nonsense, or kept failing after the allowed retries."""


class UnsafeRedirectError(HostedRequestError):
    """A hosted API redirected to (or named) another origin; credentials are never sent there."""


class HostedAuthError(BackendUnavailable):
    """The vendor refused the credentials (HTTP 401/403): fatal for the model, not per clip."""


class HostedQuotaError(BackendUnavailable):
    """The account is out of credit or quota (HTTP 402, or rate limited past every retry)."""


class ResultIntegrityError(AuditError):
    """The stored rows are not exactly one per (model, utterance) of the run's plan; nothing is scored.

    Raised instead of writing a summary from missing, doubled or foreign rows (a stale marker, a
    reordered or re-sharded dataset, two names sharing one file): a wrong table must never be
    scored silently. The message counts what is missing, doubled or unexpected, with examples.
    """


class StoreWriteError(AuditError, OSError):
    """A run-directory file could not be written (disk full, permissions): names the file and the
    fix. Still an ``OSError``, so callers that stop cleanly on write errors keep doing so."""
