"""Speech-emotion backends."""
