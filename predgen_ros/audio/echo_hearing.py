"""asr_node's hearing while it cancels the robot's voice, one microphone chunk at a time.

The canceller (echo.py) gives the recognizer the microphone less the robot's voice and
the voice detector its own copy; the guarded detector (double_talk.py) must know whether
the echo may be present, whether the canceller is still learning and whether an
utterance is open; and the recognizer must read back to where the voice began, since a
voice over the echo is counted late.  asr_node and scripts/echo_turns.py both hear
through this, so the offline measurement is the node's hearing.
"""

from __future__ import annotations

from .asr import PRE_ROLL_S, StreamingAsr
from .double_talk import ECHO_TAIL_S, PRE_ROLL_OVER_ECHO_S, EchoGuardedVad
from .echo import EchoCanceller


class EchoHearing:
    def __init__(self, canceller: EchoCanceller, guarded: EchoGuardedVad):
        self.canceller = canceller
        self.guarded = guarded

    def chunk(self, asr: StreamingAsr, pcm: bytes, captured_s: float) -> bytes:
        """The chunk captured at `captured_s` (the reference's clock) less the robot's
        voice, for `asr.feed`; the detector and `asr` are set for it."""
        pcm, for_voice = self.canceller.process(pcm, captured_s)
        guarded = self.guarded
        guarded.hear(for_voice)
        guarded.echo_present = self.canceller.reference.sounding(captured_s, ECHO_TAIL_S)
        guarded.canceller_learning = self.canceller.learning
        guarded.utterance_open = asr.in_utterance
        # read back to where the detector first heard the voice (at least PRE_ROLL_OVER_ECHO_S)
        asr.pre_roll_s = max(PRE_ROLL_OVER_ECHO_S, guarded.voice_run_s + PRE_ROLL_S) if guarded.echo_present else PRE_ROLL_S
        return pcm

    def voice_began(self, asr: StreamingAsr, t: float) -> float:
        """When an utterance `asr` opened at stream time `t` began: over the echo, where the
        detector first heard its voice."""
        return min(t, asr.stream_time - self.guarded.voice_run_s) if self.guarded.echo_present else t
