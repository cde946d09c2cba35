"""Conversational audio: speaker-attributed references and hypotheses (RTTM, STM, SegLST, NeMo
manifests with offsets), cpWER / tcpWER (meeteval) and DER / JER (pyannote.metrics), and the
conversation audit that runs long recordings through segmentation, ASR and diarization."""
