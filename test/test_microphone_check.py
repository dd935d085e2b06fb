"""asr_node's checks of the stream on audio/user (nodes/microphone_check.py): what is heard,
what is said, and how often."""

import numpy as np

from predgen_ros.nodes.microphone_check import GAP_S, REPEAT_S, MicrophoneCheck


def speech(seconds: float, rate: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (3000 * np.sin(2 * np.pi * 220 * t)).astype(np.int16)


def test_a_good_chunk_is_heard_as_it_is_and_nothing_is_said():
    check, chunk = MicrophoneCheck(), speech(0.02)
    pcm, lines = check.chunk(chunk, 16000, 0.0)
    assert pcm == chunk.tobytes() and lines == []
    assert set(check.figures().values()) == {0}


def test_another_rate_is_resampled_and_said_once_per_repeat():
    check = MicrophoneCheck()
    pcm, lines = check.chunk(speech(0.02, 48000), 48000, 0.0)
    assert len(pcm) == 2 * 320  # 20 ms at 16 kHz
    assert len(lines) == 1 and "48000 Hz" in lines[0] and "mono_16000hz" in lines[0]
    assert check.chunk(speech(0.02, 48000), 48000, 0.02)[1] == []  # not again at once
    assert check.chunk(speech(0.02, 48000), 48000, REPEAT_S + 0.1)[1] != []
    assert check.figures()["audio_resampled"] == 3


def test_an_empty_chunk_or_an_impossible_rate_is_dropped_with_one_line():
    check = MicrophoneCheck()
    pcm, lines = check.chunk(np.zeros(0, dtype=np.int16), 16000, 0.0)
    assert pcm is None and len(lines) == 1 and "empty chunk" in lines[0]
    pcm, lines = check.chunk(speech(0.02), 0, 0.02)
    assert pcm is None and lines == []  # said once a REPEAT_S for both
    assert check.figures()["audio_dropped"] == 2
    pcm, lines = MicrophoneCheck().chunk(speech(0.02), 0, 0.0)
    assert pcm is None and len(lines) == 1 and "0 Hz" in lines[0]


def test_a_long_chunk_is_heard_and_said():
    pcm, lines = MicrophoneCheck().chunk(speech(2.0), 16000, 0.0)
    assert len(pcm) == 2 * 32000 and len(lines) == 1 and "2.00 s" in lines[0]


def test_odd_lengths_are_heard_whole():
    for n in (1, 7, 333, 4801):
        pcm, lines = MicrophoneCheck().chunk(speech(2.0)[:n], 16000, 0.0)
        assert len(pcm) == 2 * n and lines == []


def test_clipping_is_said_and_the_chunk_still_heard():
    rng = np.random.default_rng(0)
    noise = np.clip(rng.standard_normal(320) * 40000, -32768, 32767).astype(np.int16)
    pcm, lines = MicrophoneCheck().chunk(noise, 16000, 0.0)
    assert pcm == noise.tobytes() and len(lines) == 1 and "clipping" in lines[0]
    quiet = (speech(0.02) // 2).astype(np.int16)
    assert MicrophoneCheck().chunk(quiet, 16000, 0.0)[1] == []


def test_a_gap_is_said_while_it_lasts_and_when_the_audio_comes_back():
    check = MicrophoneCheck()
    assert check.silence(0.0) is None  # listening begins
    assert check.silence(GAP_S + 0.5).startswith("no audio yet on audio/user")  # never heard
    check.chunk(speech(0.02), 16000, 2.0)
    assert check.silence(2.0 + GAP_S / 2) is None
    line = check.silence(2.0 + GAP_S + 0.1)
    assert line.startswith("no audio on audio/user") and "is the microphone publishing" in line
    assert check.silence(6.0) is None  # said once a gap
    _, lines = check.chunk(speech(0.02), 16000, 7.0)
    assert lines == ["audio/user back after 5.0 s without audio"] and check.figures()["audio_gaps"] == 1
    check.stop()  # deactivated: nothing missed from here is a gap
    assert check.chunk(speech(0.02), 16000, 100.0)[1] == []
