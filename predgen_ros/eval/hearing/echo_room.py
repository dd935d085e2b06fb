"""A room where the microphone hears the robot's loudspeaker and the user at once.

The robot's loudspeaker sits `SPEAKER_DISTANCE_M` from its microphone, the user 1–2 m
away (far_field.draw_room: size, RT60 and distance from the seed); one
pyroomacoustics room gives both impulse responses, so the robot's voice and the
user's share the same walls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...audio.pcm import SAMPLE_RATE
from .far_field import Room, RoomSettings, draw_room

SPEAKER_DISTANCE_M = 0.3  # loudspeaker to microphone on a small robot


@dataclass(frozen=True)
class EchoPaths:
    room: Room
    robot: np.ndarray  # loudspeaker -> microphone
    user: np.ndarray  # user's mouth -> microphone


def echo_paths(rng: np.random.Generator, settings: RoomSettings | None = None) -> EchoPaths:
    import pyroomacoustics as pra

    room = draw_room(rng, settings or RoomSettings())
    absorption, max_order = pra.inverse_sabine(room.rt60_s, list(room.dims))
    sim = pra.ShoeBox(list(room.dims), fs=SAMPLE_RATE, materials=pra.Material(absorption), max_order=max_order)
    mic = np.array([room.dims[0] / 2, room.dims[1] / 2, 1.0])
    angle = rng.uniform(0, 2 * np.pi)
    inside = np.array(room.dims) - 0.3
    sim.add_source(np.clip(mic + [SPEAKER_DISTANCE_M * np.cos(angle), SPEAKER_DISTANCE_M * np.sin(angle), -0.1], 0.3, inside))
    angle = rng.uniform(0, 2 * np.pi)
    sim.add_source(np.clip(mic + [room.distance_m * np.cos(angle), room.distance_m * np.sin(angle), 0.6], 0.3, inside))
    sim.add_microphone(mic)
    sim.compute_rir()
    return EchoPaths(room, np.asarray(sim.rir[0][0]), np.asarray(sim.rir[0][1]))
