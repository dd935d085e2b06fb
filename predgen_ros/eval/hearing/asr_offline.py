"""`predgen-ros asr-wer`: what each recognizer hears of the same speech, offline.

Piper speaks the questions once (pauses inserted inside some of them as make-bag
does: the same seed gives the same audio), and each recognizer hears that audio
through StreamingAsr in 20 ms chunks with the same voice detector and a fixed
endpoint.  Per recognizer: the word error rate of the finals against the texts,
the finals per question (more than one: a pause split it), and the recognizer's
CPU seconds per second of audio (the process's CPU time, all threads, the voice
detector included).  A background recognizer is let finish what it started after
each chunk, as on a CPU that keeps up; its cadence is the one it would choose.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...audio.pcm import AUDIO_CHUNK_MS, SAMPLE_RATE, chunks
from ...audio.recognition.asr import StreamingAsr
from ...audio.recognition.asr_events import BackgroundRecognizer
from ...audio.recognition.recognizers import make_recognizer
from ...audio.recognition.vad import make_vad
from ...audio.recognition.whisper import WhisperSettings
from ...events import Heard
from .asr_quality import reference_words, revisions, word_errors


@dataclass(frozen=True)
class HeardQuestion:
    qid: str
    text: str
    finals: tuple[str, ...]

    @property
    def errors(self) -> int:
        return word_errors(reference_words(self.text), reference_words(" ".join(self.finals)))

    @property
    def words(self) -> int:
        return len(reference_words(self.text))


def recognizer_for(backend: str, whisper: WhisperSettings | None = None):
    """A registered recognizer, or `whisper-raw`: Whisper publishing every transcription
    whole, without LocalAgreement-2 (what the agreement buys)."""
    if backend != "whisper-raw":
        return make_recognizer(backend, whisper=whisper)
    from ...audio.recognition.whisper import WhisperTranscriber
    from ...audio.recognition.whisper_stream import WhisperStreamingRecognizer

    return WhisperStreamingRecognizer(WhisperTranscriber(whisper), agreement=False)


def hear(
    backend: str,
    audio: np.ndarray,
    turns,
    vad: str,
    endpoint_silence_s: float,
    progress=None,
    whisper: WhisperSettings | None = None,
) -> dict:
    """One recognizer over the whole stream: per-question finals, WER, partials' revisions,
    CPU cost; `whisper`: the Whisper backends' settings (model, beam)."""
    recognizer = recognizer_for(backend, whisper)
    asr = StreamingAsr(recognizer, endpoint_silence=endpoint_silence_s, vad=make_vad(vad))
    finals: list[tuple[float, str]] = []  # (speech end, text)
    partials: list[list[str]] = [[]]  # per utterance
    background = isinstance(recognizer, BackgroundRecognizer)
    cpu = time.process_time()
    ends = [turn.t_end for turn in turns]
    for chunk in chunks(audio.tobytes(), AUDIO_CHUNK_MS / 1000):
        for e in asr.feed(chunk):
            if e.kind is Heard.FINAL:
                finals.append((e.t_speech_end, e.text))
                partials.append([])
            else:
                partials[-1].append(e.text)
        if background:
            recognizer.idle()
        while ends and asr.stream_time >= ends[0]:
            ends.pop(0)
            if progress:
                progress()
    finals += [(e.t_speech_end, e.text) for e in asr.finish_stream() if e.kind is Heard.FINAL]
    cpu = time.process_time() - cpu
    asr.close()
    starts = [turn.t_start for turn in turns[1:]] + [float("inf")]
    heard = [
        HeardQuestion(turn.qid, turn.text, tuple(text for t, text in finals if turn.t_start <= t < next_start))
        for turn, next_start in zip(turns, starts)
    ]
    errors, words = sum(q.errors for q in heard), sum(q.words for q in heard)
    counts = [revisions(p) for p in partials if p]
    updates, revised = sum(c for c, _ in counts), sum(r for _, r in counts)
    return {
        "backend": backend,
        "wer": errors / words,
        "errors": errors,
        "words": words,
        "split_questions": sum(len(q.finals) > 1 for q in heard),
        "unheard_questions": sum(not q.finals for q in heard),
        "cpu_s_per_audio_s": cpu / (len(audio) / SAMPLE_RATE),
        "partials_per_utterance": sum(map(len, partials)) / max(1, len(finals)),
        "revision_rate": revised / updates if updates else 0.0,
        "questions": [{"qid": q.qid, "text": q.text, "heard": " / ".join(q.finals), "errors": q.errors} for q in heard],
    }


def bag_speech(bag, limit: int | None = None):
    """A bag's user audio as one array and its questions as SpokenTurns (times from the audio's start)."""
    from ..bag_replay.bags import question_markers, read_bag
    from ..bag_replay.make_bag import SpokenTurn
    from .far_field import audio_pieces

    messages = read_bag(bag, ["audio/user", "eval/turn"])
    markers = question_markers(messages)[:limit]
    audio, pieces = audio_pieces(messages)
    t0_ns = audio[0].t_ns - int(len(pieces[0]) / SAMPLE_RATE * 1e9)  # a bag stamps a chunk at its end
    turns = [SpokenTurn(m.qid, m.text, (m.t_start_ns - t0_ns) / 1e9, (m.t_end_ns - t0_ns) / 1e9) for m in markers]
    stream = np.concatenate(pieces)
    if limit and limit < len(question_markers(messages)):
        stream = stream[: int((turns[-1].t_end + 2.0) * SAMPLE_RATE)]
    return stream, turns


def table(results: list[dict], audio_s: float) -> str:
    lines = [
        f"| recognizer | WER | errors / words | questions split | unheard | partials per utterance | revised | CPU s per audio s ({audio_s:.0f} s of audio) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['backend']} | {100 * r['wer']:.1f} % | {r['errors']} / {r['words']} | {r['split_questions']} "
            f"| {r['unheard_questions']} | {r['partials_per_utterance']:.1f} | {100 * r['revision_rate']:.0f} % "
            f"| {r['cpu_s_per_audio_s']:.3f} |"
        )
    return "\n".join(lines)
