"""When the user is done: endpoint policies, one decision per audio chunk.

A fixed trailing silence is slow when it is long and cuts people off at a pause
when it is short.  The other policies wait only a short pause when the turn
looks complete and a long one when it does not.  Two estimates say whether it
looks complete, each a probability:

- audio: Smart Turn v3 over the utterance's last 8 s (`turn_models.SmartTurn`),
  asked once per pause;
- text: the LLM's probability that the user's message ends after the words
  heard (predgen_node's `turn/end_probability`, free where predgen runs anyway).

Policies (parameter `asr.endpoint.policy`):

- `fixed`: end after `silence_s` of silence (what asr_node always did).
- `smart_turn`: at a pause of `pause_s`, end if Smart Turn says complete;
  otherwise end after `max_silence_s`.
- `llm`: at a pause of `pause_s`, end if the text estimate says complete;
  otherwise after `max_silence_s`.
- `fused`: both complete: end at `pause_s`; one of them: at `silence_s`;
  neither: at `max_silence_s`.  A missing estimate (no model, no message yet)
  counts as "not complete", so `fused` without an estimate falls back to the
  other, and with neither to `max_silence_s`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

POLICIES = ("fixed", "smart_turn", "llm", "fused")
# what `predgen-ros endpoints` compares by default (fixed_<seconds>: a fixed silence)
DEFAULT_ENDPOINT_POLICIES = ("fixed_0.35", "fixed_0.8", "smart_turn", "llm", "fused")


class EndpointError(ValueError):
    """An invalid endpoint setting; the message names it and the allowed values."""


# The trailing silence that ends an utterance by default: the ASR node's, make-bag's
# and the endpoint tools' (asr.endpoint_silence_s).
ENDPOINT_SILENCE_S = 0.5


@dataclass(frozen=True)
class EndpointConfig:
    policy: str = "fixed"
    silence_s: float = ENDPOINT_SILENCE_S  # fixed: the trailing silence that ends an utterance; fused: one estimate says complete
    pause_s: float = 0.15  # the other policies: a pause this long asks the estimates
    max_silence_s: float = 1.0  # the other policies: end after this much silence whatever the estimates say
    audio_threshold: float = 0.5  # Smart Turn's probability at or above which the turn is complete
    text_threshold: float = 1e-3  # the LLM's end-of-message probability at or above which the turn is complete

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise EndpointError(f"asr.endpoint.policy: unknown policy {self.policy!r} (choose one of {', '.join(POLICIES)})")
        for name in ("silence_s", "pause_s", "max_silence_s"):
            if not getattr(self, name) > 0:
                raise EndpointError(f"asr.endpoint.{name} must be > 0 s, got {getattr(self, name)}")
        if self.policy != "fixed" and not self.pause_s <= self.max_silence_s:
            raise EndpointError(f"asr.endpoint.pause_s ({self.pause_s}) must not exceed max_silence_s ({self.max_silence_s})")
        for name in ("audio_threshold", "text_threshold"):
            if not 0 < getattr(self, name) <= 1:
                raise EndpointError(f"asr.endpoint.{name} must lie in (0, 1], got {getattr(self, name)}")

    @property
    def continuation_s(self) -> float:
        """Speech resuming this soon after the speech end of an early final continues
        its utterance: had the policy waited its longest silence, it would have."""
        return 0.0 if self.policy == "fixed" else self.max_silence_s

    @property
    def uses_audio(self) -> bool:
        return self.policy in ("smart_turn", "fused")

    @property
    def uses_text(self) -> bool:
        return self.policy in ("llm", "fused")


class Endpointer:
    """Decides, chunk by chunk, whether the current pause ends the utterance.

    `audio_estimate` is called at most once per pause (Smart Turn costs about
    0.2 s on a busy 2-core CPU); the text estimate is whatever the caller last
    received for the words heard so far (None: none yet).
    """

    def __init__(self, config: EndpointConfig, audio_estimate: Callable[[], float] | None = None):
        if config.uses_audio and audio_estimate is None:
            raise EndpointError(f"asr.endpoint.policy {config.policy!r} needs the Smart Turn model")
        self.config = config
        self.audio_estimate = audio_estimate
        self._pause_audio: float | None = None  # this pause's Smart Turn estimate, once asked

    def speech(self) -> None:
        """Voiced audio: a pause that comes later is a new one."""
        self._pause_audio = None

    def ends(self, silence_s: float, text_estimate: float | None = None) -> bool:
        """Whether `silence_s` of silence since the last voiced audio ends the utterance."""
        c = self.config
        if c.policy == "fixed":
            return silence_s >= c.silence_s
        if silence_s >= c.max_silence_s:
            return True
        if silence_s < c.pause_s:
            return False
        audio = self._audio_says_complete()
        text = text_estimate is not None and text_estimate >= c.text_threshold
        if c.policy == "smart_turn":
            return audio
        if c.policy == "llm":
            return text
        return (audio and text) or ((audio or text) and silence_s >= c.silence_s)

    def _audio_says_complete(self) -> bool:
        if not self.config.uses_audio:
            return False
        if self._pause_audio is None:
            self._pause_audio = self.audio_estimate()
        return self._pause_audio >= self.config.audio_threshold
