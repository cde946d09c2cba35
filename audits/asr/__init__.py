"""ASR scoring: normalized alignment, corpus WER/CER, intervals, gaps, cohort scores."""
