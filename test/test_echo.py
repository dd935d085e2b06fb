"""The echo canceller's reference time line (no audio device, no ROS)."""

from __future__ import annotations

import numpy as np

from predgen_ros.audio.echo import ReferenceTimeline
from predgen_ros.audio.pcm import SAMPLE_RATE


def tone(n: int, value: int) -> bytes:
    return np.full(n, value, dtype=np.int16).tobytes()


def test_the_reference_is_read_by_play_time_and_silence_where_nothing_played():
    line = ReferenceTimeline()
    line.played(10.0, tone(160, 7))  # 10 ms from t = 10 s
    line.played(10.02, tone(160, 9))  # a 10 ms gap, then more
    got = line.read(9.99, 640)
    assert (got[:160] == 0).all()  # before anything played
    assert (got[160:320] == 7).all()
    assert (got[320:480] == 0).all()  # the gap (a lost chunk reads as silence)
    assert (got[480:640] == 9).all()


def test_a_chunk_older_than_what_the_microphone_has_read_is_late_and_dropped():
    line = ReferenceTimeline()
    line.played(1.0, tone(160, 1))
    line.read(1.0, 3200)  # the microphone is at 1.2 s
    line.played(1.05, tone(160, 5))
    assert line.late_chunks == 1
    line.played(1.19, tone(320, 3))  # reaches past 1.2 s: kept
    assert line.late_chunks == 1


def test_a_resent_chunk_overwrites_and_old_history_is_forgotten():
    line = ReferenceTimeline()
    line.played(0.0, tone(160, 2))
    line.played(0.0, tone(160, 2))
    assert (line.read(0.0, 160) == 2).all()  # not doubled
    line.played(20.0, tone(160, 4))
    assert (line.read(20.0, 160) == 4).all()
    assert line.start_s >= 20.0 - 5.0 - 1 / SAMPLE_RATE  # only HISTORY_S kept before the microphone
