"""Speaker-verification audit: trials, EER/minDCF metrics, and the run over SV backends."""
