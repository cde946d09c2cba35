"""Text normalization applied at scoring time; stored text is always raw."""

from normalizers.english import (
    BasicNormalizer,
    EnglishNormalizer,
    IdentityNormalizer,
    Normalizer,
    get_normalizer,
)

__all__ = ["BasicNormalizer", "EnglishNormalizer", "IdentityNormalizer", "Normalizer", "get_normalizer"]
