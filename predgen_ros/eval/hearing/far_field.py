"""`predgen-ros far-field`: a bag's user audio heard from across a room.

Each question is played from a talker 1–2 m from the microphone in a shoebox room
simulated by pyroomacoustics (image source method; walls absorbing for an RT60
drawn from 0.3–0.6 s, Sabine's formula), and noise is added to the whole stream
at a signal-to-noise ratio around 25 dB.  Room, distance, RT60 and noise come from
the seed: the same bag every time.  Timing is kept (the direct path arrives a few
milliseconds late; the markers still give the true end of speech), so the new bag
replays like the dry one.  Only `audio/user` changes: the transcripts the bag
recorded are the dry audio's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ...audio.pcm import SAMPLE_RATE
from ..bag_replay.bags import BagError, BagMessage, question_markers, read_bag, write_bag


@dataclass(frozen=True)
class RoomSettings:
    seed: int = 0
    rt60_s: tuple[float, float] = (0.3, 0.6)
    distance_m: tuple[float, float] = (1.0, 2.0)
    snr_db: tuple[float, float] = (23.0, 27.0)


@dataclass(frozen=True)
class Room:
    dims: tuple[float, float, float]
    rt60_s: float
    distance_m: float

    def impulse_response(self, rng: np.random.Generator) -> np.ndarray:
        import pyroomacoustics as pra

        absorption, max_order = pra.inverse_sabine(self.rt60_s, list(self.dims))
        room = pra.ShoeBox(list(self.dims), fs=SAMPLE_RATE, materials=pra.Material(absorption), max_order=max_order)
        mic = np.array([self.dims[0] / 2, self.dims[1] / 2, 1.0])  # on the robot, 1 m up
        angle = rng.uniform(0, 2 * np.pi)
        talker = mic + [self.distance_m * np.cos(angle), self.distance_m * np.sin(angle), 0.6]  # a standing mouth
        room.add_source(np.clip(talker, 0.3, np.array(self.dims) - 0.3))
        room.add_microphone(mic)
        room.compute_rir()
        return np.asarray(room.rir[0][0])


def draw_room(rng: np.random.Generator, settings: RoomSettings) -> Room:
    dims = (rng.uniform(4.0, 7.0), rng.uniform(4.0, 8.0), rng.uniform(2.5, 3.2))
    return Room(tuple(round(d, 2) for d in dims), float(rng.uniform(*settings.rt60_s)), float(rng.uniform(*settings.distance_m)))


def audio_pieces(messages: list[BagMessage]) -> tuple[list[BagMessage], list[np.ndarray]]:
    """The user's audio messages in order, and their samples."""
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Int16MultiArray

    audio = [m for m in messages if m.topic == "audio/user"]
    if not audio:
        raise BagError("the bag has no audio/user messages: make it with `predgen-ros make-bag`")
    return audio, [np.asarray(deserialize_message(m.raw, Int16MultiArray).data, dtype=np.int16) for m in audio]


def reverberate(bag: Path, out: Path, settings: RoomSettings, progress=None) -> list[dict]:
    """Write the far-field bag; returns each question's room."""
    from rclpy.serialization import serialize_message

    from ...nodes.messages import audio_chunk

    messages = read_bag(bag)
    markers = question_markers(messages)
    audio, pieces = audio_pieces(messages)
    stream = np.concatenate(pieces)
    t0_ns = audio[0].t_ns - int(len(pieces[0]) / SAMPLE_RATE * 1e9)  # a bag stamps a chunk at its end
    rng = np.random.default_rng(settings.seed)
    wet = np.zeros(len(stream), dtype=np.float64)
    bounds = [0] + [int((m.t_start_ns - t0_ns) / 1e9 * SAMPLE_RATE) - SAMPLE_RATE // 2 for m in markers[1:]] + [len(stream)]
    rooms = []
    for marker, start, end in zip(markers, bounds, bounds[1:]):
        room = draw_room(rng, settings)
        rir = room.impulse_response(rng)
        piece = np.convolve(stream[start:end].astype(np.float64), rir)[: len(stream) - start]
        wet[start : start + len(piece)] += piece
        rooms.append(
            {"qid": marker.qid, "dims_m": room.dims, "rt60_s": round(room.rt60_s, 3), "distance_m": round(room.distance_m, 2)}
        )
        if progress:
            progress()
    voiced = np.abs(stream) > 300
    speech_power = float(np.mean(wet[voiced] ** 2)) if voiced.any() else 1.0
    snr_db = float(rng.uniform(*settings.snr_db))
    wet += rng.standard_normal(len(wet)) * np.sqrt(speech_power / 10 ** (snr_db / 10))
    peak = np.max(np.abs(wet))
    if peak > 32000:
        wet *= 32000 / peak
    far = np.round(wet).astype(np.int16)
    replaced, at = {}, 0
    for m, piece in zip(audio, pieces):
        replaced[id(m)] = replace(m, raw=serialize_message(audio_chunk(far[at : at + len(piece)], SAMPLE_RATE)))
        at += len(piece)
    write_bag(out, [replaced.get(id(m), m) for m in messages])
    for room in rooms:
        room["snr_db"] = round(snr_db, 1)
    return rooms
