"""When does asr_node hear a voice over the robot's own? Offline, in the evaluation's rooms.

The microphone of `eval-interruptions --robot-in-mic` (eval/hearing/echo_mic.py: the robot's
Piper voice from a loudspeaker 0.3 m away, seeded rooms, noise) and asr_node's hearing
of it (audio/echo/canceller.py's canceller and leak gate, audio/echo/double_talk.py's guarded voice
detector), without ROS and in faster than real time.  Per room: replies said sentence by
sentence with the gaps of a player waiting for Piper, with nothing said over them (a
voiced frame counted over one is a self-pause through the graph), and replies with a
barge-in 1.5-3.5 s in (the time from the user's first voiced sample to the first frame
counted as voice).  The rooms are those of `--robot-in-mic SEED` (seed * 1000 + room).

    .venv/bin/python scripts/echo_onsets.py --seed 1 --rooms 8 --out onsets.json
"""

from __future__ import annotations

import argparse
import json
import re

import numpy as np

from predgen_ros.audio.echo.canceller import EchoCanceller
from predgen_ros.audio.echo.double_talk import ONSET_SHARE, ONSET_WINDOW_S, VOICE_OVER_NOISE_DB, EchoGuardedVad
from predgen_ros.audio.pcm import AUDIO_CHUNK_MS, SAMPLE_RATE, to_pcm16k
from predgen_ros.audio.recognition.vad import make_vad
from predgen_ros.audio.speech.tts import PiperSynthesizer
from predgen_ros.eval.hearing.echo_mic import RoomMicrophone, probe_speech

REPLIES = (
    "Weather is what the sky does today: rain, sun, wind. Climate is the pattern of weather over many years.",
    "Sure. I set a timer for ten minutes, and I will tell you when it is done. In the meantime, preheat the oven.",
    "The capital of France is Paris. It is known for the Eiffel Tower, its museums, and its cafes.",
    "Cats purr when they are content, but also when they are hurt or scared. It seems to help them heal.",
)
BARGE_INS = (
    "Wait, what time does the store close?",
    "Actually, how long should the pasta cook?",
    "Stop, turn on the kitchen light please.",
    "Hold on, where did I leave my phone?",
)
MIC_CHUNK_S = AUDIO_CHUNK_MS / 1000  # as eval-interruptions feeds asr_node
TTS_CHUNK_S = 0.02  # tts.chunk_ms
GAP_S = (0.05, 0.8)  # between sentences: the player waiting for the next one's synthesis
BEFORE_S = 1.0  # silence before the robot speaks (the room's noise is learned there)


class Voice:
    def __init__(self):
        self._synth = PiperSynthesizer(reproducible=True)

    def say(self, text: str) -> np.ndarray:
        speech = self._synth.synthesize(text)
        return np.frombuffer(to_pcm16k(speech.samples, speech.sample_rate), dtype=np.int16)

    def reply(self, text: str, rng: np.random.Generator) -> np.ndarray:
        parts = [self.say(p) for p in re.split(r"(?<=[.,?!])\s+", text) if p]
        gaps = [np.zeros(int(rng.uniform(*GAP_S) * SAMPLE_RATE), dtype=np.int16) for _ in parts]
        return np.concatenate([x for pair in zip(parts, gaps, strict=True) for x in pair][:-1])


def hear(
    probe: np.ndarray, room_seed: int, replies: list[np.ndarray], user: np.ndarray | None, user_at_s: float, args
) -> tuple[list[float], float | None]:
    """Play `replies` one after the other (1 s apart) into a fresh microphone in the room,
    the user's clip `user_at_s` into the last; the stream times (s) of the frames counted
    as voice during the last while the robot's echo may be present, and the time of the
    user's first voiced sample."""
    room = RoomMicrophone(probe)
    room.enter_room(room_seed)
    room.start(0.0)
    canceller = EchoCanceller()
    guarded = EchoGuardedVad(make_vad("webrtc", 2), args.onset_window_s, args.onset_share, args.voice_over_noise_db)
    schedule, t = [], BEFORE_S
    step = int(TTS_CHUNK_S * SAMPLE_RATE)
    for reply in replies:
        schedule += [(t + i / SAMPLE_RATE, reply[i : i + step]) for i in range(0, len(reply), step)]
        last_start, t = t, t + len(reply) / SAMPLE_RATE + 1.0
    clip = room.user_clip(user) if user is not None else np.zeros(0)
    clip_at = last_start + user_at_s
    n = int(MIC_CHUNK_S * SAMPLE_RATE)
    voiced, pending, frame_t, stream_t, k = [], b"", 0.0, 0.0, 0
    while stream_t < t:
        while k < len(schedule) and schedule[k][0] <= stream_t + MIC_CHUNK_S:
            played_at, chunk = schedule[k]
            room.robot_played(chunk, SAMPLE_RATE, played_at)
            canceller.played(played_at, chunk.tobytes())
            k += 1
        user_part = np.zeros(n)
        at = int(round((stream_t - clip_at) * SAMPLE_RATE))
        lo, hi = max(at, 0), min(at + n, len(clip))
        if hi > lo:
            user_part[lo - at : hi - at] = clip[lo:hi]
        cleaned = canceller.process(room.next_chunk(user_part).tobytes(), stream_t)
        guarded.take(cleaned, utterance_open=False)
        pending += cleaned.audio
        while len(pending) >= guarded.frame_bytes:
            frame, pending = pending[: guarded.frame_bytes], pending[guarded.frame_bytes :]
            if guarded.is_speech(frame) and cleaned.echo_present:
                voiced.append(frame_t)
            frame_t += guarded.frame_bytes / 2 / SAMPLE_RATE
        stream_t += MIC_CHUNK_S
    onset = clip_at + float(np.argmax(np.abs(clip) > 0.05 * np.max(np.abs(clip)))) / SAMPLE_RATE if len(clip) else None
    return [v for v in voiced if v >= last_start], onset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1, help="the rooms of eval-interruptions --robot-in-mic SEED")
    ap.add_argument("--rooms", type=int, default=8)
    ap.add_argument("--onset-window-s", type=float, default=ONSET_WINDOW_S, help="asr.echo.onset_window_s")
    ap.add_argument("--onset-share", type=float, default=ONSET_SHARE, help="asr.echo.onset_share")
    ap.add_argument("--voice-over-noise-db", type=float, default=VOICE_OVER_NOISE_DB, help="asr.echo.voice_over_noise_db")
    ap.add_argument("--out", default=None, help="write the trials and the summary as JSON here")
    args = ap.parse_args()
    voice, probe = Voice(), probe_speech()
    rng = np.random.default_rng(args.seed)
    replies = [voice.reply(text, rng) for text in REPLIES]
    users = [voice.say(text) for text in BARGE_INS]
    trials = []
    for r in range(args.rooms):
        room_seed = args.seed * 1000 + r
        for j, reply in enumerate(replies):  # the reply before warms the canceller up, as in a conversation
            warm_up = replies[(j + 1) % len(replies)]
            heard, _ = hear(probe, room_seed, [warm_up, reply], None, 0.0, args)
            trials.append({"room": r, "reply": j, "kind": "silent", "self_pause": bool(heard)})
            heard, onset = hear(probe, room_seed, [warm_up, reply], users[j], 1.5 + (r + j) % 3, args)
            after = [v - onset for v in heard if v >= onset - 0.05]
            trials.append({"room": r, "reply": j, "kind": "barge_in", "heard_after_s": round(after[0], 3) if after else None})
            print(json.dumps(trials[-2]), json.dumps(trials[-1]), flush=True)
    latency = [t["heard_after_s"] for t in trials if t["kind"] == "barge_in"]
    heard = [x for x in latency if x is not None]
    summary = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("out",)},
        "rooms": args.rooms,
        "self_pauses": sum(t.get("self_pause", False) for t in trials),
        "silent_replies": sum(t["kind"] == "silent" for t in trials),
        "barge_ins": len(latency),
        "missed": latency.count(None),
        "heard_after_s_p50": round(float(np.percentile(heard, 50)), 3) if heard else None,
        "heard_after_s_p90": round(float(np.percentile(heard, 90)), 3) if heard else None,
    }
    print(json.dumps(summary))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"summary": summary, "trials": trials}, f, indent=1)


if __name__ == "__main__":
    main()
