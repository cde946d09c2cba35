"""Speaker-verification embedding backends."""
