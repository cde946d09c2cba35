"""Speaker diarization backends."""
