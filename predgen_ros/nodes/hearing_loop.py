"""asr_node's audio loop: each chunk of its source through the ear at the chunk's real
timing, and what the ear hears handed back to the node in order (words and voice
changes, on the wall clock).

Stream time maps to wall time at each chunk's arrival, so a source that pauses (a replay
waiting for the robot's reply) keeps its stamps right.
"""

from __future__ import annotations

import time

from ..audio.ear import Ear
from ..audio.pcm import SAMPLE_RATE
from ..audio.recognition.asr_events import AsrEvent, in_order
from ..events import Heard
from .asr_state import AsrState
from .audio_input import AudioInput


class HearingLoop:
    """The source thread's body.  `node` hosts it: its state, waits, `robot_speaking`,
    `mutes()` and the `publish_partial`, `publish_final` and `publish_voice` it hands on to."""

    def __init__(self, node, ear: Ear, audio: AudioInput, chunk_s: float):
        self.node, self.ear, self.audio, self.chunk_s = node, ear, audio, chunk_s
        self.stream_t0 = 0.0  # wall time at the stream's time 0 (a paused source moves it)

    def __call__(self) -> None:
        node, ear, asr = self.node, self.ear, self.ear.asr
        # every source waits: what it hears before predgen_node's readers match is lost to it
        # (a demo beside a busy CPU once lost its first question so); live audio meanwhile is dropped
        node.wait_for_listeners(need_tts=False)
        node.state = AsrState.LISTENING
        start = time.time()
        heard_s = 0.0
        for i, pcm in enumerate(self.audio.chunks):
            if node.waits.stopping.is_set():
                return
            if not self.audio.live:  # a file: play it at real time, like a microphone
                node.waits.sleep_until(start + (i + 1) * self.chunk_s)
            heard_s += len(pcm) / (2 * SAMPLE_RATE)
            self.stream_t0 = time.time() - heard_s
            echo = ear.echo
            captured_s = echo.clock.captured(time.time(), len(pcm) // 2) if echo is not None else 0.0
            # after an early final the user may go on: hear it (tts_node stops on the partial)
            muted = node.robot_speaking and node.mutes() and not asr.listening_for_more()
            node.state = AsrState.MUTED if muted else AsrState.LISTENING
            self._hand_on(ear.skip(pcm, captured_s) if muted else ear.feed(pcm, captured_s))
        self._hand_on(asr.finish_stream())
        node.state = AsrState.INPUT_FINISHED

    def _hand_on(self, events) -> None:
        """One chunk's words and voice changes, in order (asr_events.in_order)."""
        t0 = self.stream_t0
        for item in in_order(events, self.ear.asr.voice_changes()):
            if not isinstance(item, AsrEvent):
                what, t = item
                t = self.ear.voice_began(t) if what in ("start", "resumed") else t  # counted late over the echo
                self.node.publish_voice(what, t0 + t)
            elif item.kind is Heard.PARTIAL:
                self.node.publish_partial(item.text)
            else:
                self.node.publish_final(item.text, t0 + item.t_speech_end, item.may_continue)
