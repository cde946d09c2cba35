"""Example audit-engine plug-in: an ASR backend and an audit section, registered by entry points."""
