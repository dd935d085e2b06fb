"""Recognition: voice detection, endpointing and streaming speech recognition (Whisper, pocketsphinx, vosk)."""
