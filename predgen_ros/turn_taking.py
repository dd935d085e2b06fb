"""Turn-taking while the robot talks: which user speech is a new turn, and what the voice does meanwhile.

People do not yield the floor to a cough or an "mm-hmm".  Speech that begins
while the robot speaks is sorted by its words, in the ASR's spelling:

  backchannel  only acknowledgements from `backchannels` ("mm hmm", "okay", ...):
               no new turn, the reply goes on;
  short        fewer than `min_words` other words, or less than `min_speech_s` of
               voice (a hum the ASR made words of, or a turn's first word): not a
               turn yet;
  turn         anything else: a real barge-in.

The voice's length comes from asr_node's `asr/voice` stamps (`VoicedSpan`):
pocketsphinx may spell a half-second "mm-hmm" as three words, but no one says
three words in half a second.

Two parties apply the same rules.  tts_node's `VoiceControl` decides what the
robot's voice does: with `stop` it stops for good at a turn (and ignores the
rest); with `pause` it pauses at the user's voice or a short partial and resumes
where it paused when the utterance ends without becoming a turn, or after
`resume_s` without a word.  predgen_node's `TurnGate` passes such an utterance
to the engine only once it is a turn, so an acknowledgement makes no turn and
the history keeps the reply.  Once the robot has finished, the floor is the
user's: whatever they say next is a turn ("yes" may answer the robot's question),
but an utterance that began over the robot is still judged as one.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

# In pocketsphinx's spelling: it hears Piper's "uh-huh" as "ah", "mhm" as "an h m".
BACKCHANNELS = "mm hmm, mhm, mm, hmm, uh huh, ah, uh, um, yeah, yes, yep, okay, ok, right, i see, sure, alright, got it"
INTERRUPTIONS = ("stop", "pause")
VOICE_KINDS = ("start", "more", "end")  # asr/voice frame_id: an utterance opens / voice again in it / voice fell silent
TAKE_OVER_S = 0.5  # an utterance heard this soon before robot_speaking went false is a turn (TurnGate)
CUT_OFF_MARK = "—"  # ends a reply the user cut off, as the history keeps it
_WORD = re.compile(r"[a-z0-9']+")


class Speech(StrEnum):
    EMPTY = "empty"
    BACKCHANNEL = "backchannel"
    SHORT = "short"
    TURN = "turn"


class Voice(StrEnum):
    """What tts_node does with the robot's voice."""

    KEEP = "keep"
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"


def words(text: str) -> list[str]:
    """The words of `text`, lower case.  A single letter other than "i" is no word: it
    is how pocketsphinx spells a hum ("mhm" -> "an h m", "m h a")."""
    return [w for w in _WORD.findall(text.lower().replace("-", " ")) if len(w) > 1 or w == "i"]


@dataclass(frozen=True)
class TurnRules:
    min_words: int = 3  # words (beside acknowledgements) that make speech over the robot a turn
    backchannels: str = BACKCHANNELS  # comma-separated phrases
    # and seconds of voice: WebRTC's VAD hears Piper's "mm-hmm" for 0.62 s, "why do cats purr?" for 1.08 s
    min_speech_s: float = 0.8

    def __post_init__(self):
        if self.min_words < 1:
            raise ValueError(f"turn.min_words: {self.min_words} is below 1 (1 = every word is a turn)")
        if self.min_speech_s < 0:
            raise ValueError(f"turn.min_speech_s: {self.min_speech_s} is negative (0 = words alone decide)")

    @property
    def phrases(self) -> list[list[str]]:
        """The acknowledgement phrases as word lists, longest first (matched greedily)."""
        phrases = [words(p) for p in self.backchannels.split(",")]
        return sorted((p for p in phrases if p), key=len, reverse=True)

    def kind(self, text: str, spoken_s: float | None = None) -> Speech:
        """`spoken_s`: how long the user's voice has lasted (None: unknown, words decide)."""
        heard = words(text)
        if not heard:
            return Speech.EMPTY
        rest = _strip_acknowledgements(heard, self.phrases)
        if not rest:
            return Speech.BACKCHANNEL
        long_enough = spoken_s is None or spoken_s >= self.min_speech_s
        return Speech.TURN if len(rest) >= self.min_words and long_enough else Speech.SHORT


def _strip_acknowledgements(heard: list[str], phrases: list[list[str]]) -> list[str]:
    """`heard` without the acknowledgement phrases at its start ("okay so what" -> "so what")."""
    i = 0
    while i < len(heard):
        match = next((p for p in phrases if heard[i : i + len(p)] == p), None)
        if match is None:
            break
        i += len(match)
    return heard[i:]


class VoicedSpan:
    """How long the user has spoken in the open utterance, from asr/voice: `start`
    (an utterance opens), `more` (voice again after a gap), `end` (voice fell silent,
    stamped at the last voiced audio).  Pauses inside the utterance count as speech."""

    def __init__(self):
        self._onset: float | None = None
        self._until: float | None = None  # None while the voice goes on
        self._heard = False  # asr/voice came at least once: the ASR has a voice detector

    def voice(self, what: str, t: float) -> None:
        self._heard = True
        if what == "start" or self._onset is None:
            self._onset, self._until = t, None
        elif what == "more":
            self._until = None
        else:
            self._until = t

    def seconds(self, now: float) -> float | None:
        """None when no asr/voice ever came (an ASR without a voice detector: words decide);
        0 when words come before their utterance's asr/voice (topics race on the wire)."""
        if self._onset is None:
            return 0.0 if self._heard else None
        return max(0.0, (self._until if self._until is not None else now) - self._onset)

    def close(self) -> None:
        """The utterance is final."""
        self._onset = self._until = None


class VoiceControl:
    """tts_node's reaction to the user while a reply plays (not thread-safe: the node locks)."""

    def __init__(self, rules: TurnRules, interruption: str, resume_s: float, clock: Callable[[], float] = time.time):
        if interruption not in INTERRUPTIONS:
            raise ValueError(f"tts.interruption: unknown {interruption!r} (choose one of {', '.join(INTERRUPTIONS)})")
        self.rules = rules
        self.pausing = interruption == "pause"
        self.resume_s = resume_s
        self.clock = clock
        self.resume_at: float | None = None  # paused until then
        self.span = VoicedSpan()

    @property
    def paused(self) -> bool:
        return self.resume_at is not None

    def new_reply(self) -> None:
        """A pause does not outlive its reply."""
        self.resume_at = None

    def voice(self, what: str, t: float) -> Voice:
        """asr/voice (`what` in VOICE_KINDS, `t` its stamp): voice (again) pauses."""
        self.span.voice(what, t)
        return self._pause() if self.pausing and what != "end" else Voice.KEEP

    def partial(self, text: str) -> Voice:
        kind = self.rules.kind(text, self.span.seconds(self.clock()))
        if kind is Speech.TURN:
            return self._stop()
        if kind is Speech.SHORT and self.pausing:
            return self._pause()
        if kind is Speech.BACKCHANNEL and self.paused:
            return self._resume()
        return Voice.KEEP

    def final(self, text: str) -> Voice:
        kind = self.rules.kind(text, self.span.seconds(self.clock()))
        self.span.close()
        if kind is Speech.TURN:
            return self._stop()
        return self._resume() if self.paused else Voice.KEEP

    def due(self) -> Voice:
        """RESUME once a pause has lasted `resume_s` without a turn."""
        if self.paused and self.clock() >= self.resume_at:
            return self._resume()
        return Voice.KEEP

    def _pause(self) -> Voice:
        first = not self.paused
        self.resume_at = self.clock() + self.resume_s  # each new sound extends the pause
        return Voice.PAUSE if first else Voice.KEEP

    def _resume(self) -> Voice:
        self.resume_at = None
        return Voice.RESUME

    def _stop(self) -> Voice:
        self.resume_at = None
        return Voice.STOP


class TurnGate:
    """predgen_node's filter: an utterance that began over the robot reaches the engine
    only once it is a turn; until then its partials and its end of speech are held.

    The user's first words and robot_speaking's false can cross on the wire: an
    utterance heard less than TAKE_OVER_S before the robot fell silent is judged as
    one begun after it (a turn, whatever its words)."""

    def __init__(self, rules: TurnRules, clock: Callable[[], float] = time.time):
        self.rules = rules
        self.clock = clock
        self.ignored = 0  # utterances over the robot that never became a turn
        self._robot_talks = False
        self._over_robot: bool | None = None  # the open utterance began over the robot; None between utterances
        self._opened_at = 0.0
        self._passing = False
        self._held_end = None
        self.span = VoicedSpan()

    def robot_talks(self) -> None:
        """robot_speaking went true (only tts_node's word counts: a committed reply may never play)."""
        self._robot_talks = True

    def robot_silent(self) -> None:
        self._robot_talks = False
        if self._over_robot and self.clock() - self._opened_at < TAKE_OVER_S:
            self._over_robot = False
            self._passing = True

    def _sees(self, text: str) -> bool:
        if self._over_robot is None:
            self._over_robot, self._passing = self._robot_talks, not self._robot_talks
            self._opened_at = self.clock()
        self._passing = self._passing or self.rules.kind(text, self.span.seconds(self.clock())) is Speech.TURN
        return self._passing

    def voice(self, what: str, t: float) -> None:
        """asr/voice: how long the user has spoken counts (TurnRules.min_speech_s)."""
        self.span.voice(what, t)

    def partial(self, text: str) -> bool:
        """Whether the engine should hear this partial."""
        return self._sees(text)

    def speech_end(self, event) -> list:
        """The events to hand on now (the end of speech is held with its utterance)."""
        if self._passing or (self._over_robot is None and not self._robot_talks):
            return [event]
        self._held_end = event
        return []

    def final(self, text: str, event) -> list:
        """The events to hand on: the held end of speech and the final, or nothing.  A final
        without a partial before it is a whole turn (an ASR without partials; and when it
        races robot_speaking on the wire, nothing says when it began)."""
        if self._over_robot is None:
            held, self._held_end = self._held_end, None
            self.span.close()
            return [e for e in (held, event) if e is not None]
        passing = self._sees(text)
        held, self._held_end, self._over_robot = self._held_end, None, None
        self.span.close()
        if passing:
            return [e for e in (held, event) if e is not None]
        self.ignored += 1
        return []


def heard_text(pieces: list[tuple[str, float]]) -> str:
    """What the user heard of a reply cut off: each (piece of text, share of its audio
    played), the last piece cut at the word its audio reached, then CUT_OFF_MARK."""
    kept = []
    for text, share in pieces:
        tokens = text.split()
        kept += tokens[: math.floor(len(tokens) * share + 1e-9)]
    return " ".join(kept).rstrip(",;:") + CUT_OFF_MARK


_RULES = TurnRules()
# Both tts_node and predgen_node read these (set them alike for both, as config/*.yaml does).
TURN_PARAMS = {
    "turn.min_words": (
        _RULES.min_words,
        "speech over the robot is a turn from this many words (acknowledgements aside); 1 = any word",
    ),
    "turn.backchannels": (
        _RULES.backchannels,
        "comma-separated acknowledgements, in the ASR's spelling, that make no turn over the robot",
    ),
    "turn.min_speech_s": (
        _RULES.min_speech_s,
        "and it is a turn only after this many seconds of the user's voice (asr/voice); 0 = words alone decide",
    ),
}


def turn_rules(params: dict) -> TurnRules:
    """The rules from a node's parameter values; ValueError names the parameter at fault."""
    return TurnRules(params["turn.min_words"], params["turn.backchannels"], params["turn.min_speech_s"])
