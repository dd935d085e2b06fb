"""The eager end of turn over the robot's own voice, through the live graph: what it hears.

test_eager_end_echo_graph checks the eager path on the default canceller with the user alone
at the microphone.  Here the robot's voice comes back too, as on a robot: tts_node's
loudspeaker (tts/reference) through a seeded simulated room into a microphone that never
pauses (eval/hearing/echo_mic.py, eval-interruptions' AudioFeed), the canceller on (the
default), every pause of 0.2 s an eager end (Smart Turn always saying complete) with 3 s in
which the user may go on.  The robot first answers `--warm-up` requests (its canceller learns
the room from its voice), then the user says "What is the capital", and "of France?" as soon
as the eager reply starts.  Printed: each final heard, the turn stream's kinds, what the robot
played, and asr_node's echo figures; `--record DIR` keeps what the recognizer read
(asr.record_dir) for the offline replays (eval/hearing/hearing_replay.py).

    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_LOCALHOST_ONLY=1 ROS_DOMAIN_ID=35 \\
        .venv/bin/python scripts/eager_over_echo.py --room 1 --warm-up 2 --record heard
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from predgen_ros.audio.echo.canceller import FRAME, EchoCanceller
from predgen_ros.audio.heard_audio import CANCELLER_INPUTS
from predgen_ros.audio.pcm import SAMPLE_RATE, to_pcm16k
from predgen_ros.audio.recognition.text_asr import robot_conversation_file
from predgen_ros.audio.speech.tts import PiperSynthesizer
from predgen_ros.eval.barge_in.interruptions import (
    GRAPH_OVERRIDES,
    HEARING,
    NODES,
    REPLY_TIMEOUT_S,
    ROBOT_IN_MIC,
    AudioFeed,
    Recorder,
)
from predgen_ros.eval.hearing.echo_mic import RoomMicrophone, probe_speech
from predgen_ros.eval.hearing.hearing_replay import CHUNK, read_inputs
from predgen_ros.nodes.bringup import Graph, default_params_file

EAGER = {  # as test/eager_user.py's
    "asr.endpoint.policy": "smart_turn",
    "asr.endpoint.pause_s": 0.2,
    "asr.endpoint.audio_threshold": 1e-6,
    "asr.endpoint.max_silence_s": 3.0,
}
ROBOT_VOICE_DB = 50.0  # a half-second of reference louder than this (mean square, int16) is the robot speaking
WARM_UP = robot_conversation_file().read_text().splitlines()  # the demo's requests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--room", type=int, default=1, help="the simulated room's seed")
    parser.add_argument("--warm-up", type=int, default=2, choices=range(len(WARM_UP) + 1), help="requests answered first")
    parser.add_argument("--record", default="", help="asr.record_dir: what the recognizer read, kept here")
    args = parser.parse_args()

    import rclpy
    from std_msgs.msg import String

    from predgen_ros.nodes.common import TEXT_QOS
    from predgen_ros.nodes.messages import turn_event_of

    synth = PiperSynthesizer(reproducible=True)

    def voice(text: str) -> np.ndarray:
        speech = synth.synthesize(text)
        return np.frombuffer(to_pcm16k(speech.samples, speech.sample_rate), dtype=np.int16)

    overrides = {**GRAPH_OVERRIDES, **ROBOT_IN_MIC, **HEARING["echo"], **EAGER, "asr.record_dir": args.record}
    rclpy.init()
    with Graph(default_params_file(), overrides, nodes=NODES, log=sys.stderr) as graph:
        room = RoomMicrophone(probe_speech())
        room.enter_room(args.room)
        rec = Recorder(room)
        rec.graph = graph
        rec.wait_active(NODES)
        finals, turns = [], []
        rec.node.create_subscription(String, "asr/final", lambda m: finals.append(m.data), TEXT_QOS)
        rec.node.create_subscription(String, "turn/events", lambda m: turns.append(turn_event_of(m)), TEXT_QOS)
        rec.spin_until(lambda: rec.reset.service_is_ready(), 120, "predgen_node's reset service")
        rec.wait_connected(NODES)
        feed = AudioFeed(rec.node, room)
        for request in WARM_UP[: args.warm_up]:
            answered = len(rec.reports)
            feed.play(voice(request))
            rec.wait_for(lambda n=answered: len(rec.reports) > n and not rec.is_speaking, REPLY_TIMEOUT_S)
            rec.wait_quiet()
        learning = rec.value("asr_node", "echo_learning")
        heard, turned, played = len(finals), len(turns), len(rec.played)
        feed.play(voice("What is the capital"))
        began = rec.wait_for(lambda: len(finals) > heard and rec.is_speaking, REPLY_TIMEOUT_S)
        if began:
            feed.play(voice("of France?"))
        rec.wait_quiet()
        print(f"room {args.room}, {args.warm_up} requests answered first, the canceller learning: {learning}")
        print("the eager reply began" if began else "no eager reply within the wait")
        print("finals:", finals[heard:])
        print("turn stream:", [(e.kind.value, e.utterance) for e in turns[turned:] if e.kind != "text"])
        print("played:", rec.played[played:])
        echo = {k: v for k, v in rec.fresh_values("asr_node", 30).items() if k.startswith(("echo_", "voice_"))}
        print("asr_node's echo figures:", echo)
        feed.close()
        rec.close()
    rclpy.try_shutdown()
    if args.record:
        print_echo_taken_off(Path(args.record) / CANCELLER_INPUTS)
    return 0


def print_echo_taken_off(inputs: Path) -> None:
    """Per half-second of the robot's voice, the echo each copy took off: the recognizer's
    (Speex's linear filter) and the voice detector's (AEC3), replayed from the recorded inputs."""
    mic, reference = read_inputs(inputs)
    canceller, heard, for_voice = EchoCanceller(), bytearray(), bytearray()
    for at in range(0, len(mic) - CHUNK + 1, CHUNK):
        t = at / SAMPLE_RATE
        for k in range(0, CHUNK, FRAME):
            canceller.played(t + k / SAMPLE_RATE, reference[at + k : at + k + FRAME].astype(np.int16).tobytes())
        chunk = canceller.process(mic[at : at + CHUNK].astype(np.int16).tobytes(), t)
        heard += chunk.audio
        for_voice += chunk.for_voice
    copies = [np.frombuffer(bytes(b), dtype=np.int16).astype(np.float64) for b in (heard, for_voice)]
    level = lambda x: 10 * np.log10(np.mean(x**2) + 1e-9)  # noqa: E731
    half = SAMPLE_RATE // 2
    print("the robot's voice taken off (dB), per half-second of it: stream time, the recognizer's copy, the detector's")
    for at in range(0, len(copies[0]) - half, half):
        if level(reference[at : at + half]) > ROBOT_VOICE_DB:
            cut = [level(mic[at : at + half]) - level(copy[at : at + half]) for copy in copies]
            print(f"  {at / SAMPLE_RATE:6.1f} s  {cut[0]:5.1f}  {cut[1]:5.1f}")


if __name__ == "__main__":
    sys.exit(main())
