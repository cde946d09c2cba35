"""Text normalization applied at scoring time; stored text is always raw.

This package holds the normalizer classes only and imports nothing of the project; the names
recipes use are registered as entry points (group ``audit_engine.normalizers``) and looked up
through ``audits.normalizing``.
"""

from normalizers.english import BasicNormalizer, EnglishNormalizer, IdentityNormalizer, Normalizer, fast_normalizer
from normalizers.open_asr_leaderboard import OpenAsrLeaderboardNormalizer

__all__ = ["BasicNormalizer", "EnglishNormalizer", "IdentityNormalizer", "Normalizer", "OpenAsrLeaderboardNormalizer", "fast_normalizer"]
