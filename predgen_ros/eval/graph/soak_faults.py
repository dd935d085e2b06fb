"""The faults a robot's audio path meets, as the spoken soak injects them.

Each takes the running soak (eval/graph/spoken_soak.py) and returns "ok" or what went
wrong; the soak then checks that the next turn is answered.  The microphone's faults
must each be said by asr_node in a line of its log (nodes/microphone_check.py); a node
restarted comes back and hears or speaks again.

  microphone_gap   the stream stops for GAP_S and comes back
  odd_chunks       chunks at 48 kHz, an empty one, odd lengths, a 0.6 s one, one labelled 0 Hz
  clipped_burst    a second of full-scale noise, clipped by the microphone
  tts_restart      tts_node killed mid-reply (its reference and robot_speaking stop) and respawned
  asr_restart      asr_node killed between turns and respawned
"""

from __future__ import annotations

import numpy as np

from ...audio.pcm import SAMPLE_RATE

GAP_S = 5.0
LINE_WAIT_S = 10.0  # a node's line reaches the graph's log this soon


def microphone_gap(soak) -> str:
    mark = soak.log_mark()
    soak.feed.stop_for(GAP_S)
    soak.rec.spin_for(GAP_S + 0.2)
    return soak.said_since(mark, "asr_node", ("no audio on audio/user for", "audio/user back after"), LINE_WAIT_S)


def odd_chunks(soak) -> str:
    mark, rng = soak.log_mark(), np.random.default_rng(soak.settings.seed)
    hum = lambda n: rng.standard_normal(n) * 30  # noqa: E731  the room's quiet, as a microphone hears it
    for _ in range(25):  # half a second from a driver that switched to 48 kHz
        soak.feed.send(hum(960), 48000)
    soak.feed.send(np.zeros(0), SAMPLE_RATE)
    for n in (7, 333, 1):
        soak.feed.send(hum(n), SAMPLE_RATE)
    soak.feed.send(hum(int(0.6 * SAMPLE_RATE)), SAMPLE_RATE)
    soak.feed.send(hum(320), 0)
    return soak.said_since(mark, "asr_node", ("at 48000 Hz: resampled", "dropped an empty chunk", "chunk of 0.60 s"), LINE_WAIT_S)


def clipped_burst(soak) -> str:
    mark, rng = soak.log_mark(), np.random.default_rng(soak.settings.seed)
    noise = np.clip(rng.standard_normal(SAMPLE_RATE) * 40000, -32768, 32767)
    for start in range(0, len(noise), 320):
        soak.feed.send(noise[start : start + 320], SAMPLE_RATE)
    said = soak.said_since(mark, "asr_node", ("audio/user is clipping",), LINE_WAIT_S)
    soak.settle()  # whatever the noise made of itself (a turn, a reply) is over before the next turn
    return said


def tts_restart(soak) -> str:
    """Called once the turn's reply is playing."""
    if not soak.rec.is_speaking:
        return "the robot was not speaking when tts_node was to be killed"
    return soak.restart("tts_node")


def asr_restart(soak) -> str:
    return soak.restart("asr_node")


# before the turn they are planned for; tts_restart during its reply
FAULTS = {
    "microphone_gap": microphone_gap,
    "odd_chunks": odd_chunks,
    "clipped_burst": clipped_burst,
    "tts_restart": tts_restart,
    "asr_restart": asr_restart,
}
DURING_REPLY = ("tts_restart",)
