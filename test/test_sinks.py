"""Audio sinks: WAV files per reply, callbacks, and clear errors."""

import wave

import numpy as np
import pytest

from predgen_ros.audio.speech.sinks import SinkError, make_sink


def test_wav_sink_writes_one_file_per_reply(tmp_path):
    sink = make_sink("wav", str(tmp_path / "out"))
    for name, n in (("reply_001", 2205), ("reply_002", 4410)):
        sink.begin(name, 22050)
        for start in range(0, n, 1000):
            sink.play(np.full(min(1000, n - start), 1000, dtype=np.int16))
        sink.end()
    with wave.open(str(tmp_path / "out" / "reply_002.wav")) as f:
        assert (f.getframerate(), f.getnframes()) == (22050, 4410)


def test_callback_sink_hands_over_chunks_with_their_rate():
    got = []
    sink = make_sink("topic", send=lambda chunk, rate: got.append((len(chunk), rate)))
    sink.begin("reply_001", 16000)
    sink.play(np.zeros(160, dtype=np.int16))
    assert got == [(160, 16000)]


def test_bad_sink_settings(tmp_path):
    with pytest.raises(SinkError, match="unknown tts.sink 'hdmi'"):
        make_sink("hdmi")
    with pytest.raises(SinkError, match="tts.wav_dir is empty"):
        make_sink("wav", "")
    (tmp_path / "file").write_text("")
    with pytest.raises(SinkError, match="tts.wav_dir: cannot create"):
        make_sink("wav", str(tmp_path / "file" / "sub"))
