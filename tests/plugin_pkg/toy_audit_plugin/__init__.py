"""Example audit-engine plug-in: an ASR backend, an audit section and a runner, registered by entry points."""
