"""Speech-emotion audit: UA/WA/F1/CCC metrics, prosody contrast, and the run over SER backends."""
