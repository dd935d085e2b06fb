"""`predgen-ros make-bag`: questions spoken by Piper, heard by a real streaming ASR, saved as a bag.

The user's speech is one continuous 16 kHz stream: `gap_s` of silence, a
question, `gap_s` of silence, the next question, ...  The ASR backend hears it
in 100 ms chunks; each partial or final is stamped when the chunk that caused
it ended plus the time the recognizer took for it, as a live ASR would publish
it; what the voice did (`asr/voice`) comes before the words of the same chunk.  Per question an `eval/turn` marker records the reference text and the true
start and end of speech (first and last sample above the noise floor).

With `hesitations` > 0, that share of the questions (seeded) gets a pause of
0.3-1.0 s at a word boundary inside it, as people hesitate: an endpoint that
comes at such a pause cuts the question off (the marker lists the pauses).
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...audio.pcm import SAMPLE_RATE, chunks, to_pcm16k
from ...audio.recognition.asr import StreamingAsr
from ...audio.recognition.asr_events import AsrEvent, in_order
from ...audio.recognition.endpoint import ENDPOINT_SILENCE_S
from ...audio.recognition.recognizers import DEFAULT_RECOGNIZER, make_recognizer
from ...audio.recognition.text_asr import Question
from ...audio.speech.tts import PiperSynthesizer
from ...events import Heard
from .bags import USER_TOPICS, BagMessage, write_bag

VOICED = 300  # int16 amplitude above which a sample counts as speech
WORD_GAP_S = 0.02  # a quiet run this long inside the speech lies between two words
HESITATION_S = (0.3, 1.0)  # the length of an inserted pause, drawn uniformly
HESITATION_AT = (0.25, 0.75)  # where in the question it goes (share of its length)


@dataclass(frozen=True)
class BagSettings:
    backend: str = DEFAULT_RECOGNIZER
    vosk_model: str = ""
    endpoint_silence_s: float = ENDPOINT_SILENCE_S
    gap_s: float = 3.0  # silence before each question (and after the last)
    chunk_s: float = 0.1
    redecode_final: bool = True  # False: the final is the last partial, sent at the endpoint
    hesitations: float = 0.0  # percent of the questions with a pause inside
    seed: int = 0  # which questions hesitate, where and how long


@dataclass(frozen=True)
class SpokenTurn:
    qid: str
    text: str
    t_start: float  # first voiced sample (s from the start of the stream)
    t_end: float  # last voiced sample
    pauses: tuple[tuple[float, float], ...] = ()  # inserted hesitations: (start, length), s from the stream start


def word_gaps(pcm: np.ndarray) -> list[int]:
    """Sample indices in the middle of the quiet runs between words."""
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > VOICED)
    if len(loud) < 2:
        return []
    gaps = np.flatnonzero(np.diff(loud) >= WORD_GAP_S * SAMPLE_RATE)
    return [int((loud[i] + loud[i + 1]) // 2) for i in gaps]


def insert_pause(pcm: bytes, fraction: float, pause_s: float) -> tuple[bytes, float]:
    """The speech with `pause_s` of silence at the word gap nearest `fraction` of it
    (a hesitation), and where the pause starts (s).  No gap: unchanged, -1."""
    samples = np.frombuffer(pcm, dtype=np.int16)
    gaps = word_gaps(samples)
    if not gaps:
        return pcm, -1.0
    at = min(gaps, key=lambda g: abs(g - fraction * len(samples)))
    pause = np.zeros(int(pause_s * SAMPLE_RATE), dtype=np.int16)
    return np.concatenate([samples[:at], pause, samples[at:]]).tobytes(), at / SAMPLE_RATE


def speak_questions(
    questions: list[Question], synth: PiperSynthesizer, gap_s: float, hesitations: float = 0.0, seed: int = 0
) -> tuple[np.ndarray, list[SpokenTurn]]:
    """The user's whole speech stream (16 kHz int16) and where each question is in it."""
    gap = np.zeros(int(gap_s * SAMPLE_RATE), dtype=np.int16)
    rng = random.Random(seed)
    parts, turns, length = [], [], 0
    for question in questions:
        speech = synth.synthesize(question.text)
        pcm, pause = to_pcm16k(speech.samples, speech.sample_rate), None
        if rng.random() < hesitations / 100:
            pause_s = rng.uniform(*HESITATION_S)
            pcm, at = insert_pause(pcm, rng.uniform(*HESITATION_AT), pause_s)
            pause = (at, pause_s) if at >= 0 else None
        pcm = np.frombuffer(pcm, dtype=np.int16)
        voiced = np.flatnonzero(np.abs(pcm.astype(np.int32)) > VOICED)
        start = length + len(gap)
        pauses = ((start / SAMPLE_RATE + pause[0], pause[1]),) if pause else ()
        turns.append(
            SpokenTurn(
                question.qid, question.text, (start + voiced[0]) / SAMPLE_RATE, (start + voiced[-1] + 1) / SAMPLE_RATE, pauses
            )
        )
        parts += [gap, pcm]
        length = start + len(pcm)
    parts.append(gap)
    return np.concatenate(parts), turns


def stamp_of(t_ns: int):
    from builtin_interfaces.msg import Time

    return Time(sec=t_ns // 1_000_000_000, nanosec=t_ns % 1_000_000_000)


def make_bag(out: Path, questions: list[Question], settings: BagSettings, progress=None) -> dict:
    """Write the bag; returns counts for the summary line."""
    messages, audio_s = bag_messages(questions, settings, progress)
    write_bag(out, messages)
    count = lambda topic: sum(m.topic == topic for m in messages)  # noqa: E731
    return {"questions": count("eval/turn"), "finals": count("asr/final"), "audio_s": audio_s, "partials": count("asr/partial")}


def bag_messages(questions: list[Question], settings: BagSettings, progress=None) -> tuple[list[BagMessage], float]:
    """Every message of the bag, and the length of the user's audio (s)."""
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    from ...nodes.messages import audio_chunk, speech_end, voice_event

    synth = PiperSynthesizer(reproducible=True)  # the same bag from the same questions and seed, on any load
    audio, turns = speak_questions(questions, synth, settings.gap_s, settings.hesitations, settings.seed)
    recognizer = make_recognizer(settings.backend, settings.vosk_model)
    asr = StreamingAsr(
        recognizer,
        settings.endpoint_silence_s,
        redecode_final=settings.redecode_final,
    )
    t0 = time.time_ns()
    ns = lambda t: t0 + int(round(t * 1e9))  # noqa: E731  stream seconds -> bag time
    messages: list[BagMessage] = []

    def add(topic: str, t: float, msg) -> None:
        messages.append(BagMessage(topic, USER_TOPICS[topic], ns(t), serialize_message(msg)))

    for turn in turns:
        marker = {
            "qid": turn.qid,
            "text": turn.text,
            "t_start_ns": ns(turn.t_start),
            "t_end_ns": ns(turn.t_end),
            "pauses": [[ns(start), length] for start, length in turn.pauses],
        }
        add("eval/turn", turn.t_start, String(data=json.dumps(marker, ensure_ascii=False)))
    finals = 0

    def heard(event, t: float) -> None:
        nonlocal finals
        if event.kind is Heard.PARTIAL:
            add("asr/partial", t, String(data=event.text))
            return
        finals += 1
        add("asr/speech_end", t, speech_end(stamp_of(ns(event.t_speech_end)), finals))
        add("asr/final", t + 1e-6, String(data=event.text))

    def publish(events, t_audio: float, t_heard: float) -> None:
        """As asr_node publishes them (asr_events.in_order): a voice change after a final goes out with it."""
        t_voice = t_audio
        for item in in_order(events, asr.voice_changes()):
            if isinstance(item, AsrEvent):
                heard(item, t_heard)
                t_voice = t_heard + 2e-6 if item.kind is Heard.FINAL else t_voice
            else:
                add("asr/voice", t_voice, voice_event(stamp_of(ns(item[1])), item[0]))

    t_audio = 0.0
    ends = [turn.t_end for turn in turns]
    for chunk in chunks(audio.tobytes(), settings.chunk_s):
        t_audio += len(chunk) / (2 * SAMPLE_RATE)
        while ends and t_audio >= ends[0]:  # a question heard to its end: one step of the progress bar
            ends.pop(0)
            if progress:
                progress()
        add("audio/user", t_audio, audio_chunk(np.frombuffer(chunk, dtype=np.int16), SAMPLE_RATE))
        started = time.perf_counter()
        events = asr.feed(chunk)
        if hasattr(recognizer, "idle"):  # a background recognizer, on a CPU that keeps up
            recognizer.idle()
        t_heard = t_audio + (time.perf_counter() - started)  # published once the recognizer is done
        publish(events, t_audio, t_heard)
    publish(asr.finish_stream(), t_audio, t_audio)  # the audio ended inside an utterance
    return messages, len(audio) / SAMPLE_RATE
