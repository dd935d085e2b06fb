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

One party applies them: the `TurnOwner`, in asr_node.  It tells the robot's
voice what to do on `turn/decision` (tts_node obeys: pause, resume, stop) and
hands on only the words that are the user's turn (asr_node numbers them into
`turn/events`, turn_events.py; predgen_node answers what it gets), so an
acknowledgement makes no turn and the history keeps the reply.  Once the robot has finished, the floor is the user's:
whatever they say next is a turn ("yes" may answer the robot's question), but an
utterance that began over the robot is still judged as one.  When the user goes
on after an early final (asr/voice "resumed"), the words are that turn's: they
are handed on whatever their number, and the first of them stops the reply to
the cut-off question (the voice pauses at once; it resumes when asr_node confirms the
early final after all: that voice made no word).
Change the rules here; set them in asr_node's `turn:` parameters.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

# In pocketsphinx's spelling: it hears Piper's "uh-huh" as "ah", "mhm" as "an h m".
BACKCHANNELS = "mm hmm, mhm, mm, hmm, uh huh, ah, uh, um, yeah, yes, yep, okay, ok, right, i see, sure, alright, got it"
INTERRUPTIONS = ("stop", "pause")
# asr/voice frame_id: an utterance opens / one opens that continues an early final / voice again in it / voice fell
# silent / the last final stands (no voice came back to continue it)
VOICE_KINDS = ("start", "resumed", "more", "end", "confirmed")
TAKE_OVER_S = 0.5  # an utterance heard this soon before robot_speaking went false is a turn (TurnOwner)
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
    # and seconds of voice: WebRTC's VAD hears Piper's "mm-hmm" for 0.62 s, "why do cats purr?" for 1.08 s.
    # Over the echo the voice is read back and its end trails on the canceller's tail: in a graph
    # run's rooms (scripts/voice_spans.py, seed 7) acknowledgements lasted up to 0.86 s, questions
    # from 1.07 s; at 0.8 s an "mm-hmm" with the robot's residue in its words stopped the reply.
    min_speech_s: float = 0.95

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
    """How long the user has spoken in the open utterance, from asr/voice: `start` or
    `resumed` (an utterance opens), `more` (voice again after a gap), `end` (voice fell silent,
    stamped at the last voiced audio).  Pauses inside the utterance count as speech."""

    def __init__(self):
        self._onset: float | None = None
        self._until: float | None = None  # None while the voice goes on
        self._heard = False  # asr/voice came at least once: the ASR has a voice detector

    def voice(self, what: str, t: float) -> None:
        self._heard = True
        if what in ("start", "resumed") or self._onset is None:
            self._onset, self._until = t, None
        elif what == "more":
            self._until = None
        else:
            self._until = t

    @property
    def voicing(self) -> bool:
        """The user's voice goes on now."""
        return self._onset is not None and self._until is None

    def seconds(self, now: float) -> float | None:
        """None when no asr/voice ever came (an ASR without a voice detector: words decide);
        0 when words come before their utterance's asr/voice (topics race on the wire)."""
        if self._onset is None:
            return 0.0 if self._heard else None
        return max(0.0, (self._until if self._until is not None else now) - self._onset)

    def close(self) -> None:
        """The utterance is final."""
        self._onset = self._until = None


@dataclass(frozen=True)
class Ruling:
    """The owner's decision at one event: what the robot's voice does (turn/decision), and
    whether the engine hears these words (asr_node hands them on: turn/events, asr/partial, asr/final)."""

    voice: Voice = Voice.KEEP
    hand_on: bool = False


class TurnOwner:
    """The one judge of turns, hosted by asr_node (it hears the user first-hand).

    For the voice: with `stop` a turn over the robot stops it for good; with `pause`
    the user's voice or a short partial pauses it, and it resumes where it paused when
    the utterance ends without a turn, at an acknowledgement, or once the voice has
    been silent `resume_s` without a word.  For the engine: an utterance that began over the robot is handed
    on only once it is a turn (its later partials and its final too); one begun while
    the robot was silent is a turn whatever its words, and so is one that continues
    an early final (asr/voice "resumed"): its first words stop the robot, and a reply that
    only begins while it goes on (the answer to the question cut short) is stopped as it
    begins, or paused until those words come.  The user's first words and
    robot_speaking's false can cross on the wire: an utterance heard less than
    TAKE_OVER_S before the robot fell silent is judged as one begun after it.

    Thread-safe: asr_node's source thread brings the user's events, its executor
    robot_speaking and the clock's ticks."""

    def __init__(
        self,
        rules: TurnRules,
        interruption: str = "pause",
        resume_s: float = 1.0,
        barge_in: bool = True,
        clock: Callable[[], float] = time.time,
    ):
        if interruption not in INTERRUPTIONS:
            raise ValueError(f"turn.interruption: unknown {interruption!r} (choose one of {', '.join(INTERRUPTIONS)})")
        if resume_s <= 0:
            raise ValueError(f"turn.resume_s: {resume_s} is not positive (seconds a pause waits for a turn)")
        self.rules = rules
        self.pausing = interruption == "pause"
        self.resume_s = resume_s
        self.barge_in = barge_in
        self.clock = clock
        self.ignored = 0  # utterances over the robot that never became a turn
        self.robot_talks = False  # robot_speaking, tts_node's word: a committed reply may never play
        self.resume_at: float | None = None  # the voice is paused until then
        self.span = VoicedSpan()
        self._over_robot: bool | None = None  # the open utterance began over the robot; None between utterances
        self._continues = False  # the open utterance continues an early final (asr/voice "resumed")
        self._continued_words = False  # ... and has made words
        self._opened_at = 0.0
        self._passing = False
        self._lock = threading.Lock()

    @property
    def paused(self) -> bool:
        return self.resume_at is not None

    def robot_speaking(self, talking: bool) -> Voice:
        """robot_speaking from tts_node.  A reply that begins while the user goes on after an
        early final answers the question cut short: it stops if the user's further words are
        in, and pauses (as the voice would) until they come if not."""
        with self._lock:
            began = talking and not self.robot_talks
            if talking != self.robot_talks:
                self.resume_at = None  # a pause does not outlive its reply
            self.robot_talks = talking
            if not talking and self._over_robot and self.clock() - self._opened_at < TAKE_OVER_S:
                self._over_robot, self._passing = False, True
            if not (began and self._continues):
                return Voice.KEEP
            if self._continued_words:
                return self._stop()
            return self._pause() if self.pausing else Voice.KEEP

    def voice(self, what: str, t: float) -> Ruling:
        """asr/voice (`what` in VOICE_KINDS, `t` its stamp): voice (again) pauses; a pause
        waits `resume_s` from where the voice fell silent."""
        with self._lock:
            if what == "confirmed":  # about the last final: the reply it began stands
                if not self._continues:
                    return Ruling()
                # the voice that went on after it made no word: the reply to it goes on
                self._continues, self._over_robot, self._passing = False, None, False
                self.span.close()
                return Ruling(self._resume() if self.paused else Voice.KEEP)
            self.span.voice(what, t)
            if what == "resumed":  # the words to come are the turn the early final began
                self._continues, self._over_robot, self._passing, self._opened_at = True, False, True, self.clock()
                self._continued_words = False
            elif what == "start" and self._continues:  # that continuation made no word: judge this one afresh
                self._continues, self._over_robot, self._passing = False, None, False
            if what != "end":
                return Ruling(self._pause() if self.pausing else Voice.KEEP)
            if self.paused:
                self.resume_at = max(self.resume_at, t + self.resume_s)
            return Ruling()

    def partial(self, text: str) -> Ruling:
        with self._lock:
            kind = self._kind(text)
            hand_on = self._judge(kind) and kind is not Speech.EMPTY
            self._continued_words = self._continued_words or (self._continues and kind is not Speech.EMPTY)
            if kind is Speech.TURN or (self._continues and kind is not Speech.EMPTY):
                return Ruling(self._stop(), hand_on)
            if kind is Speech.SHORT and self.pausing:
                return Ruling(self._pause(), hand_on)
            if kind is Speech.BACKCHANNEL and self.paused:
                return Ruling(self._resume(), hand_on)
            return Ruling(Voice.KEEP, hand_on)

    def final(self, text: str) -> Ruling:
        """The utterance's end.  A final without a partial before it is a whole turn (an
        ASR without partials: nothing says when it began); one without a word ("." is
        what Whisper makes of noise or the robot's echo) is none."""
        with self._lock:
            kind = self._kind(text)
            hand_on = kind is not Speech.EMPTY and (True if self._over_robot is None else self._judge(kind))
            self.ignored += bool(self._over_robot) and not hand_on
            continued, self._over_robot, self._continues = self._continues, None, False
            self.span.close()
            if kind is Speech.TURN or (continued and kind is not Speech.EMPTY):
                return Ruling(self._stop(), hand_on)
            return Ruling(self._resume() if self.paused else Voice.KEEP, hand_on)

    def due(self) -> Voice:
        """RESUME once a pause has lasted `resume_s` without a turn, the user silent (a
        question's words may come later than that: the recognizer lags its audio).  Not
        while the user goes on after an early final: its words, or its "confirmed" when
        it made none, decide (Whisper's first word may come after `resume_s`)."""
        with self._lock:
            if self.paused and not self._continues and not self.span.voicing and self.clock() >= self.resume_at:
                return self._resume()
            return Voice.KEEP

    def _kind(self, text: str) -> Speech:
        return self.rules.kind(text, self.span.seconds(self.clock()))

    def _judge(self, kind: Speech) -> bool:
        """Whether the engine hears the open utterance from here on."""
        if self._over_robot is None:
            self._over_robot, self._passing = self.robot_talks, not self.robot_talks
            self._opened_at = self.clock()
        self._passing = self._passing or kind is Speech.TURN
        return self._passing

    def _voice_may_change(self) -> bool:
        return self.robot_talks and self.barge_in

    def _pause(self) -> Voice:
        if not self._voice_may_change():
            return Voice.KEEP
        first = not self.paused
        self.resume_at = self.clock() + self.resume_s  # each new sound extends the pause
        return Voice.PAUSE if first else Voice.KEEP

    def _resume(self) -> Voice:
        self.resume_at = None
        return Voice.RESUME if self._voice_may_change() else Voice.KEEP

    def _stop(self) -> Voice:
        self.resume_at = None
        return Voice.STOP if self._voice_may_change() else Voice.KEEP


def heard_text(pieces: list[tuple[str, float]]) -> str:
    """What the user heard of a reply cut off: each (piece of text, share of its audio
    played), the last piece cut at the word its audio reached, then CUT_OFF_MARK."""
    kept = []
    for text, share in pieces:
        tokens = text.split()
        kept += tokens[: math.floor(len(tokens) * share + 1e-9)]
    return " ".join(kept).rstrip(",;:") + CUT_OFF_MARK


_RULES = TurnRules()
# asr_node's, where the TurnOwner runs: the one place the turn rules are set.
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
    "turn.barge_in": (True, "the user may interrupt the robot (false: it always speaks its reply to the end)"),
    "turn.interruption": (
        "pause",
        f"{' | '.join(INTERRUPTIONS)}: a real turn over the robot stops it; with pause, the user's voice or a short "
        "partial pauses it and it resumes where it paused unless a turn follows",
    ),
    "turn.resume_s": (1.0, "pause: resume once the user's voice has been silent this long without a turn (s)"),
}


def turn_owner(params: dict) -> TurnOwner:
    """The owner from asr_node's parameter values; ValueError names the parameter at fault."""
    rules = TurnRules(params["turn.min_words"], params["turn.backchannels"], params["turn.min_speech_s"])
    return TurnOwner(rules, params["turn.interruption"], params["turn.resume_s"], params["turn.barge_in"])
