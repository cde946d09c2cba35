"""Text normalization applied at scoring time; stored text is always raw."""

from normalizers.english import (
    BasicNormalizer,
    EnglishNormalizer,
    IdentityNormalizer,
    Normalizer,
    fast_normalizer,
    get_normalizer,
    known_normalizers,
)

__all__ = ["BasicNormalizer", "EnglishNormalizer", "IdentityNormalizer", "Normalizer", "fast_normalizer", "get_normalizer", "known_normalizers"]
