"""``python -m audits.cli`` runs the ``audit`` command."""

from audits.cli.main import entrypoint

entrypoint()
