"""End-of-turn audio models on real (Piper) speech: Silero VAD and Smart Turn v3,
and the endpoint policies driving StreamingAsr on that speech."""

from __future__ import annotations

from pathlib import Path

import pytest

from predgen_ros.audio.echo.canceller import EchoedChunk
from predgen_ros.audio.echo.double_talk import EchoGuardedVad
from predgen_ros.audio.pcm import chunks, read_wav
from predgen_ros.audio.recognition.asr import StreamingAsr
from predgen_ros.audio.recognition.asr_events import AsrEvent, in_order
from predgen_ros.audio.recognition.endpoint import EndpointConfig, Endpointer
from predgen_ros.audio.recognition.recognizers import make_recognizer
from predgen_ros.audio.recognition.turn_models import SileroVad, SmartTurn
from predgen_ros.audio.recognition.vad import make_vad
from predgen_ros.eval.bag_replay.make_bag import insert_pause

pytestmark = pytest.mark.e2e

QUESTIONS = ["What is the capital of France?", "How many legs does a spider have?", "Tell me a fun fact about octopuses."]
SILENCE = b"\0" * 32000  # 1 s
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def speech():
    """Piper's speech of the questions, synthesized once and kept (test/data/README.md):
    Piper's output varies slightly with ONNX Runtime's threading, and Smart Turn's score
    of a cut question varies a lot with it."""
    return {q: read_wav(DATA / f"piper_question_{i}.wav") for i, q in enumerate(QUESTIONS, 1)}


@pytest.fixture(scope="module")
def smart_turn():
    return SmartTurn()


def test_silero_hears_speech_and_not_silence(speech):
    vad = SileroVad()
    frames = [
        pcm[i : i + vad.frame_bytes] for pcm in speech.values() for i in range(0, len(pcm) - vad.frame_bytes, vad.frame_bytes)
    ]
    voiced = sum(vad.is_speech(frame) for frame in frames) / len(frames)
    vad.reset()
    assert voiced > 0.8
    assert not any(vad.is_speech(SILENCE[: vad.frame_bytes]) for _ in range(20))


@pytest.mark.parametrize("question", QUESTIONS)
def test_smart_turn_scores_a_complete_question_above_the_same_question_cut(speech, smart_turn, question):
    pcm = speech[question]
    complete = smart_turn.probability(pcm + SILENCE[:6400])
    assert complete > 0.5
    # cut mid-sentence ("What is the ca-"); cut at 80 % ("What is the capital of") Piper's
    # voice scores nearly as complete (0.95-0.97 against 0.98), see docs/results/endpoints-80.md
    cut = pcm[: int(len(pcm) // 2 * 0.6) * 2]
    assert smart_turn.probability(cut + SILENCE[:6400]) < complete


def finals_of(asr, pcm):
    events = [event for chunk in chunks(pcm) for event in asr.feed(chunk)] + asr.flush()
    return [event for event in events if event.kind == "final"]


def test_smart_turn_ends_a_complete_question_after_a_short_pause(speech, smart_turn):
    config = EndpointConfig(policy="smart_turn", pause_s=0.15, max_silence_s=1.0)
    asr = StreamingAsr(
        make_recognizer("pocketsphinx"),
        endpointer=Endpointer(config, lambda: smart_turn.probability(asr.utterance_audio)),
        vad=make_vad("silero"),
    )
    finals = finals_of(asr, SILENCE[:16000] + speech[QUESTIONS[0]] + SILENCE * 2)
    assert len(finals) == 1 and "capital" in finals[0].text
    # the short pause (plus one chunk), not the fixed 0.35 s
    assert finals[0].t - finals[0].t_speech_end < 0.35


def test_smart_turn_waits_through_a_hesitation_that_a_fixed_silence_cuts(speech, smart_turn):
    """'Tell me a fun fact ... about octopuses': a 0.6 s pause mid-sentence splits the
    question under a fixed 0.35 s silence; Smart Turn hears it is not finished."""
    hesitant, _ = insert_pause(speech[QUESTIONS[2]], 0.6, 0.6)
    audio = SILENCE[:16000] + hesitant + SILENCE * 2
    fixed = finals_of(StreamingAsr(make_recognizer("pocketsphinx"), endpoint_silence=0.35, vad=make_vad("silero")), audio)
    config = EndpointConfig(policy="smart_turn", pause_s=0.15, max_silence_s=1.0)
    asr = StreamingAsr(
        make_recognizer("pocketsphinx"),
        endpointer=Endpointer(config, lambda: smart_turn.probability(asr.utterance_audio)),
        vad=make_vad("silero"),
    )
    assert len(fixed) == 2
    finals = finals_of(asr, audio)
    assert len(finals) == 1 and "fun fact about" in finals[0].text


def published(asr, pcm):
    """What asr_node publishes of `pcm`, in order: events and (asr/voice kind, stamp)."""
    out = []
    for chunk in chunks(pcm):
        out += in_order(asr.feed(chunk), asr.voice_changes())
    return out + in_order(asr.finish_stream(), asr.voice_changes())


def contract(out):
    """Each final's text with the contract's word on it ("confirmed" or "resumed"), in order."""
    said = [item for item in out if (item.kind == "final" if isinstance(item, AsrEvent) else item[0] in ("confirmed", "resumed"))]
    return [(a.text, b[0]) for a, b in zip(said[::2], said[1::2])], said


def test_speech_resuming_after_an_early_final_continues_its_utterance(speech):
    """A pause judged complete (here: always) ends the utterance early: an eager end of turn.
    The voice comes back, so asr/voice says "resumed" (not "confirmed") after that final and
    before any of the continuation's words, which come as partials and a final of the whole
    question, not a new one; that final is confirmed once the window has passed in silence."""
    hesitant, _ = insert_pause(speech[QUESTIONS[2]], 0.6, 0.6)
    config = EndpointConfig(policy="smart_turn", pause_s=0.15, max_silence_s=1.0)
    asr = StreamingAsr(make_recognizer("pocketsphinx"), endpointer=Endpointer(config, lambda: 1.0), vad=make_vad("silero"))
    out = published(asr, SILENCE[:16000] + hesitant + SILENCE * 2)
    pairs, said = contract(out)
    assert [kind for _, kind in pairs] == ["resumed", "confirmed"], out  # early, then the whole question
    first, whole = pairs[0][0], pairs[1][0]
    assert whole.startswith(first + " ") and "fun fact about" in whole
    after = out[out.index(said[0]) + 1 :]
    assert after[0][0] == "resumed" and "start" not in [item[0] for item in after if not isinstance(item, AsrEvent)]
    partials = [e.text for e in after[1:] if isinstance(e, AsrEvent) and e.kind == "partial"]
    assert partials and all(text.startswith(first + " ") for text in partials)
    assert said[3][1] == pytest.approx(said[2].t_speech_end + 1.0)  # confirmed where the window ended


def test_a_continuation_counted_late_over_the_robots_echo_still_continues(speech):
    """The eager reply's echo makes the guarded voice detector count the user's voice only
    once its onset window is mostly voiced (audio/echo/double_talk.py): a voice that came back
    inside the window but is counted after its end still continues the early final ("resumed",
    not "confirmed" and a new utterance, which lost the words of a question through the graph)."""
    hesitant, _ = insert_pause(speech[QUESTIONS[2]], 0.6, 0.8)
    config = EndpointConfig(policy="smart_turn", pause_s=0.15, max_silence_s=1.0)
    guarded = EchoGuardedVad(make_vad("silero"), window_s=0.4)
    asr = StreamingAsr(make_recognizer("pocketsphinx"), endpointer=Endpointer(config, lambda: 1.0), vad=guarded)
    out = []
    for chunk in chunks(SILENCE[:16000] + hesitant + SILENCE * 2, 0.02):
        robot_answers = any(isinstance(item, AsrEvent) and item.kind == "final" for item in out)
        guarded.take(EchoedChunk(chunk, b"", echo_present=robot_answers), utterance_open=asr.in_utterance)
        out += in_order(asr.feed(chunk), asr.voice_changes())
    out += in_order(asr.finish_stream(), asr.voice_changes())
    pairs, said = contract(out)
    assert guarded.held_frames > 0  # the continuation's voice was counted late
    assert [kind for _, kind in pairs] == ["resumed", "confirmed"], out
    assert pairs[1][0].startswith(pairs[0][0] + " ") and "fun fact about" in pairs[1][0]
    assert "start" not in [item[0] for item in out[out.index(said[0]) :] if not isinstance(item, AsrEvent)]


def test_a_new_utterance_after_the_continuation_window_stands_alone(speech):
    """Each eager final is confirmed, at its end of speech plus the window, before the next
    utterance's voice starts."""
    config = EndpointConfig(policy="smart_turn", pause_s=0.15, max_silence_s=1.0)
    asr = StreamingAsr(make_recognizer("pocketsphinx"), endpointer=Endpointer(config, lambda: 1.0), vad=make_vad("silero"))
    out = published(asr, speech[QUESTIONS[0]] + SILENCE * 2 + speech[QUESTIONS[1]] + SILENCE * 2)
    pairs, said = contract(out)
    assert [kind for _, kind in pairs] == ["confirmed", "confirmed"] and "capital" not in pairs[1][0], out
    assert not asr.listening_for_more()
    voice = [item[0] for item in out if not isinstance(item, AsrEvent) and item[0] in ("start", "confirmed")]
    assert voice == ["start", "confirmed", "start", "confirmed"]
    assert said[1][1] == pytest.approx(said[0].t_speech_end + 1.0)
