#!/usr/bin/env python3
"""Whisper's window against its word error rate and cost (docs/results/asr-whisper.md).

Piper speaks the 20 robot requests and the 40-turn robot conversation; each whole
utterance is transcribed once per window length (the audio padded with silence to
it; 30 s is what faster-whisper always does), tiny.en, int8, beam 1, one thread.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from predgen_ros.audio.pcm import to_pcm16k  # noqa: E402
from predgen_ros.audio.recognition import whisper  # noqa: E402
from predgen_ros.audio.speech.tts import PiperSynthesizer  # noqa: E402
from predgen_ros.eval.hearing.asr_quality import reference_words, word_errors  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "predgen_ros" / "data"


def main() -> int:
    texts = [line.strip() for name in ("robot_questions/questions.txt", "robot_conversation/conversation.txt")
             for line in (DATA / name).read_text().splitlines() if line.strip()]  # fmt: skip
    synth = PiperSynthesizer(reproducible=True)
    speech = [to_pcm16k(s.samples, s.sample_rate) for s in map(synth.synthesize, texts)]
    transcriber = whisper.WhisperTranscriber(whisper.WhisperSettings(threads=1))
    words = sum(len(reference_words(t)) for t in texts)
    print(f"{len(texts)} utterances, {words} words, median {statistics.median(len(p) / 32000 for p in speech):.1f} s")
    print("| window | WER | errors | call p50 / p90 (s) |\n|---|---:|---:|---:|")
    for window in (5.0, 10.0, 15.0, 20.0, 30.0):
        whisper.MIN_WINDOW_S, whisper.TAIL_S = window, 0.0  # every utterance here is shorter than 5 s
        errors, calls = 0, []
        for text, pcm in zip(texts, speech):
            start = time.perf_counter()
            heard = transcriber.transcribe(pcm).text
            calls.append(time.perf_counter() - start)
            errors += word_errors(reference_words(text), reference_words(heard))
        p90 = statistics.quantiles(calls, n=10)[-1]
        print(f"| {window:.0f} s | {100 * errors / words:.1f} % | {errors} | {statistics.median(calls):.3f} / {p90:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
