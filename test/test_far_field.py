"""The far-field bag: the sample bag's speech through simulated rooms, timing kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from predgen_ros.eval.bag_replay.bags import question_markers, read_bag
from predgen_ros.eval.hearing.far_field import RoomSettings, audio_pieces, draw_room, reverberate

pytestmark = pytest.mark.e2e

SAMPLE = Path(__file__).resolve().parent.parent / "predgen_ros" / "data" / "bags" / "sample"


def test_the_room_reverberates_and_adds_noise_but_keeps_every_stamp(tmp_path):
    rooms = reverberate(SAMPLE, tmp_path / "far", RoomSettings(seed=3))
    dry, far = read_bag(SAMPLE), read_bag(tmp_path / "far")
    assert [(m.topic, m.t_ns) for m in dry] == [(m.topic, m.t_ns) for m in far]
    assert question_markers(dry) == question_markers(far)
    _, dry_pcm = audio_pieces(dry)
    _, far_pcm = audio_pieces(far)
    assert [len(p) for p in dry_pcm] == [len(p) for p in far_pcm]
    dry_all, far_all = np.concatenate(dry_pcm).astype(float), np.concatenate(far_pcm).astype(float)
    silent = np.abs(dry_all) == 0
    assert np.std(far_all[silent]) > 1.0  # noise where the dry bag is silent
    assert np.corrcoef(dry_all, far_all)[0, 1] < 0.9  # reverberation changed the speech
    assert len(rooms) == 3 and all(1.0 <= r["distance_m"] <= 2.0 and 0.3 <= r["rt60_s"] <= 0.6 for r in rooms)
    again = reverberate(SAMPLE, tmp_path / "again", RoomSettings(seed=3))
    assert again == rooms
    assert np.array_equal(np.concatenate(audio_pieces(read_bag(tmp_path / "again"))[1]), np.concatenate(far_pcm))


def test_a_room_of_longer_reverberation_has_a_longer_tail():
    rng = np.random.default_rng(0)
    short = draw_room(rng, RoomSettings(rt60_s=(0.3, 0.3)))
    long = draw_room(rng, RoomSettings(rt60_s=(0.6, 0.6)))

    def tail_s(rir):  # time for the energy decay to fall 30 dB
        energy = np.cumsum(rir[::-1] ** 2)[::-1]
        return np.argmax(energy < energy[0] * 1e-3) / 16000

    assert tail_s(long.impulse_response(np.random.default_rng(1))) > tail_s(short.impulse_response(np.random.default_rng(1)))
