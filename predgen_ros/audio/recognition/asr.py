"""Streaming speech recognition: audio chunks in, partial and final transcripts out.

`StreamingAsr` cuts the audio into utterances with a voice activity detector
(WebRTC's, from pocketsphinx, or Silero) and an endpoint policy (a fixed
trailing silence, or a short pause when the turn looks complete: endpoint.py),
and asks a recognizer (recognizers.py) for the current hypothesis.  A recognizer
decodes in the audio loop (pocketsphinx, vosk) or on a thread of its own
(Whisper), in which case the audio loop only hands it audio and reads what is
ready, and a final comes once transcribed.  Audio is 16 kHz mono int16 throughout.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ...cpu_meter import METER
from ...events import Heard
from ...transcripts import same_words, words_after
from ..pcm import SAMPLE_RATE
from .asr_events import AsrEvent, BackgroundRecognizer, Recognizer
from .endpoint import ENDPOINT_SILENCE_S, EndpointConfig, Endpointer
from .vad import make_vad

SMART_TURN_WINDOW_S = 8.0  # the utterance audio kept for Smart Turn (it reads the last 8 s)
VOICE_GAP_S = 0.1  # silence inside an utterance that asr/voice reports as the voice's end
# Audio handed to the recognizer at once.  Chunks may be shorter (a microphone's 20 ms):
# the voice detector and the endpoint policy see each chunk as it comes, so an
# utterance ends within one chunk of the policy's silence, but asking the recognizer
# after every 20 ms would make more partials (each an LLM pass in predgen_node) and
# cost more CPU for no sooner end.
RECOGNIZER_STEP_S = 0.1
# Audio from before the first voiced frame that the recognizer also reads: the voice
# detector fires on the word's loud part, and the recognizer needs its onset.
PRE_ROLL_S = 0.2
# Over the robot's echo a voice is counted up to ~0.4 s after it began (the guarded detector's
# onset window, and AEC3's suppressor holding a user who starts mid-sentence): the recognizer
# reads back at least this far, and as far as the detector first heard the voice.
PRE_ROLL_OVER_ECHO_S = 0.6
MAX_PRE_ROLL_S = 1.0  # the most it reads back
# A continuation of an early final is heard after this much of the early utterance's audio:
# alone, Whisper tiny.en makes "A friend?" of "of France?"; the whole early utterance (10-20 s
# of an MT-Bench question) made each of its calls several times slower, and the first new
# word came after the turn owner's resume_s, so the robot talked on over the user.
CONTINUATION_CONTEXT_S = 2.0


class StreamingAsr:
    """Utterance segmentation by voice activity, and transcripts on change."""

    def __init__(
        self,
        recognizer: Recognizer,
        endpoint_silence: float = ENDPOINT_SILENCE_S,
        vad_mode: int = 2,
        redecode_final: bool = True,
        endpointer: Endpointer | None = None,
        vad=None,
        on_utterance: Callable[[bytes, str, float], None] | None = None,
    ):
        """`redecode_final` False: the final is the last hypothesis, published at the
        endpoint; the recognizer's closing pass runs when the next utterance starts.
        `endpointer` None: a fixed `endpoint_silence`; `vad` None: WebRTC's at `vad_mode`
        (a detector as audio/recognition/vad.py describes it).
        `on_utterance(audio, final, speech end)`: each utterance's audio as the recognizer
        read it (its pre-roll too), once its final is known ("" when it made no word)."""
        self.recognizer = recognizer
        self.on_utterance = on_utterance
        self._utterance_pcm = bytearray()  # the open utterance's audio as the recognizer reads it
        self.redecode_final = redecode_final
        self._closing = False
        self.endpointer = endpointer or Endpointer(EndpointConfig(silence_s=endpoint_silence))
        self.vad = vad or make_vad("webrtc", vad_mode)
        self._frame = self.vad.frame_bytes
        self._buffer = b""
        self._t = 0.0  # stream time at the end of the audio seen so far
        self._in_utterance = False
        self._last_voiced = 0.0
        self._hypothesis = ""
        self._audio = bytearray()  # the utterance's latest audio, for Smart Turn
        self._unheard = b""  # the utterance's audio not yet handed to the recognizer
        self._pre_roll = b""  # the latest audio outside an utterance (MAX_PRE_ROLL_S of it)
        self._text_estimate: tuple[str, float] | None = None  # (hypothesis, P(the user is done)) from the LLM
        # (text, speech end, audio) of the last final a pause decided: speech soon after it continues it
        self._early: tuple[str, float, bytes] | None = None
        # the end-of-turn contract: every final is followed by "confirmed" or "resumed" on asr/voice
        self._unconfirmed: float | None = None  # the last final's confirmation time (its window's end), until said
        self._confirmed: list[tuple[str, float]] = []  # confirmations decided in feed(), for voice_changes()
        self._prefix = ""  # that final's text, while the user goes on after it
        self._opened = 0  # utterances opened so far
        self._voice_told = (0, False)  # (utterance, voicing) as voice_changes last told it
        self._background = isinstance(recognizer, BackgroundRecognizer)
        # closed, not yet transcribed: (prefix, speech end, by a pause, audio)
        self._pending: deque[tuple[str, float, bool, bytes]] = deque()
        self._paused = False  # a background recognizer was told that the voice paused

    @property
    def stream_time(self) -> float:
        """Seconds of audio seen so far."""
        return self._t

    @property
    def in_utterance(self) -> bool:
        return self._in_utterance

    @property
    def hypothesis(self) -> str:
        return self._hypothesis

    @property
    def utterance_audio(self) -> bytes:
        """The current utterance's audio so far (at most its last 8 s)."""
        return bytes(self._audio)

    def text_estimate(self, heard: str, probability: float) -> None:
        """The LLM's probability that the user is done after `heard` (the endpoint
        policies `llm` and `fused` use it while `heard` is the hypothesis)."""
        self._text_estimate = (heard, probability)

    def _current_text_estimate(self) -> float | None:
        if self._text_estimate is None or not same_words(self._text_estimate[0], self._hypothesis):
            return None
        return self._text_estimate[1]

    def feed(self, pcm: bytes, over_echo: bool = False) -> list[AsrEvent]:
        """One chunk of 16 kHz int16 audio; events it produced.  `over_echo`: the robot's
        voice may be in it (the echo front-end's EchoedChunk.echo_present): a voice that
        opens an utterance in it is read back to where the detector first heard it."""
        # as the detector stood before this chunk: the voice it holds uncounted so far
        pre_roll_s = max(PRE_ROLL_OVER_ECHO_S, self.vad.voice_run_s + PRE_ROLL_S) if over_echo else PRE_ROLL_S
        self._t += len(pcm) / (2 * SAMPLE_RATE)
        voiced = self._voiced_end(pcm)
        events: list[AsrEvent] = self._ready_finals()
        if voiced is not None:
            self._last_voiced = voiced
            self.endpointer.speech()
            if not self._in_utterance:
                self._in_utterance = True
                self._opened += 1
                self._hypothesis = ""
                # whether this voice continues an early final needs that final's words
                began = self._voice_began(voiced)
                events += self._ready_finals(timeout=None if self._owes_early_final(began) else 0.0)
                early = self._continued(began)
                self._settle_final(resumed=early is not None)
                context = int(CONTINUATION_CONTEXT_S * SAMPLE_RATE) * 2
                self._prefix, heard_before = (early[0], early[2][-context:]) if early else ("", b"")
                if not self._prefix:
                    self._audio.clear()
                self._close_recognizer()
                self.recognizer.start()
                keep = int(min(pre_roll_s, MAX_PRE_ROLL_S) * SAMPLE_RATE) * 2
                # a continuation is heard after the end of the early final's audio; the words after
                # the recognizer's reading of it are the new ones
                self._unheard = heard_before + self._pre_roll[max(0, len(self._pre_roll) - keep) :]
                self._utterance_pcm = bytearray(self._unheard)
            elif self._paused:
                self.recognizer.voice_resumed()
            self._paused = False
        if not self._in_utterance:
            self._pre_roll = (self._pre_roll + pcm)[-int(MAX_PRE_ROLL_S * SAMPLE_RATE) * 2 :]
            return events
        self._keep_audio(pcm)
        self._unheard += pcm
        self._utterance_pcm += pcm
        # a background recognizer takes every chunk (it only queues it) and may have new words
        step = 0 if self._background else int(RECOGNIZER_STEP_S * SAMPLE_RATE) * 2
        if len(self._unheard) >= step:
            text = self._with_prefix(self._hand_over(), self._prefix)
            if text and text != self._hypothesis:
                self._hypothesis = text
                events.append(AsrEvent(Heard.PARTIAL, text, self._t))
        if self._background and not self._paused and self._t - self._last_voiced >= VOICE_GAP_S:
            self._paused = True  # transcribe it all now: the final is ready when the endpoint fires
            self.recognizer.voice_ended()
        if self.endpointer.ends(self._t - self._last_voiced, self._current_text_estimate()):
            events += self._end(by_pause=True)
        return events

    def voice_changes(self) -> list[tuple[str, float]]:
        """What the voice did since the last call, as (asr/voice kind, stream time):
        "start" when an utterance opened ("resumed" when it continues an early final:
        its words will extend that final's), "end" once its voice has been silent for
        VOICE_GAP_S (timed at the last voiced audio), "more" when voice came back.
        This is the one place that decides the user went on after an early final.

        The end-of-turn contract: every final is followed by "confirmed" (its words are
        the turn's: the user stayed silent through the window in which they could have
        gone on, stamped at its end; at once for a final no pause decided) or "resumed"
        (the voice came back: hold the reply), and a "resumed" by a final that extends
        the words or, when that voice made no word, by "confirmed".  A final at a short
        pause is thus an eager end of turn that a listener may act on and withdraw."""
        changes, self._confirmed = self._confirmed, []
        if self._unconfirmed is not None and self._t >= self._unconfirmed and not self._onset_within(self._unconfirmed):
            changes.append(("confirmed", self._unconfirmed))
            self._unconfirmed = None
        told, voicing = self._voice_told
        if not self._in_utterance:
            return changes
        silent = self._t - self._last_voiced >= VOICE_GAP_S
        if told != self._opened:
            self._voice_told = (self._opened, True)
            return changes + [("resumed" if self._prefix else "start", self._t)]
        if voicing == silent:
            self._voice_told = (told, not silent)
            return changes + [("end", self._last_voiced) if silent else ("more", self._last_voiced)]
        return changes

    @staticmethod
    def _with_prefix(hypothesis: str, prefix: str) -> str:
        """An utterance's words; a continuation's are the early final's, then what the
        recognizer heard after its reading of the end of that final's audio ("" while
        nothing new)."""
        new = words_after(hypothesis, prefix) if prefix else hypothesis.split()
        return " ".join([*prefix.split(), *new]) if new else ""

    def _owes_early_final(self, t_voice: float) -> bool:
        """A pause closed the last utterance soon enough before `t_voice` that this voice may
        continue it, and its final is still being transcribed."""
        if not self._pending:
            return False
        _, t_speech_end, by_pause, _ = self._pending[-1]
        return by_pause and t_voice - t_speech_end <= self.endpointer.config.continuation_s

    def _final_out(self, text: str, t_speech_end: float, by_pause: bool, pcm: bytes) -> None:
        """A final goes out: it may be continued until its window ends, then it is confirmed."""
        self._settle_final(resumed=False)  # a newer final confirms an older one
        if by_pause:
            self._early = (text, t_speech_end, pcm)
        self._unconfirmed = t_speech_end + (self.endpointer.config.continuation_s if by_pause else 0.0)

    def _may_continue(self, by_pause: bool) -> bool:
        """A final the voice may still continue: a pause ended it and the rule leaves a window."""
        return by_pause and self.endpointer.config.continuation_s > 0

    def _no_words(self, prefix: str) -> None:
        """An utterance closed without a word (noise).  If it continued an early final, that
        final stands after all: "confirmed" (after its "resumed"), so the reply it began may go on."""
        if prefix:
            self._confirmed.append(("confirmed", self._t))

    def _voice_began(self, t_counted: float) -> float:
        """When the voice counted at `t_counted` began: a detector that counts a voice late
        (over the robot's echo, audio/echo/double_talk.py) says how long it has heard it."""
        return min(t_counted, self._t - self.vad.voice_run_s)

    def _onset_within(self, t_window_end: float) -> bool:
        """The detector hears a voice it has not counted yet, begun by `t_window_end`: it
        may yet continue the last final (an eager reply's echo delays the count)."""
        run_s = self.vad.voice_run_s
        return not self._in_utterance and run_s > 0.0 and self._t - run_s <= t_window_end

    def _settle_final(self, resumed: bool) -> None:
        """An utterance opens (or a newer final goes out): the last final is resumed (the
        voice came back in its window: voice_changes says so) or confirmed, stamped at its
        window's end, which lies before this voice."""
        if self._unconfirmed is not None and not resumed:
            self._confirmed.append(("confirmed", self._unconfirmed))
        self._unconfirmed = None

    def _continued(self, t_voice: float) -> tuple[str, float, bytes] | None:
        """The early final this speech continues (None when it starts a new utterance)."""
        early, self._early = self._early, None
        if early is None or t_voice - early[1] > self.endpointer.config.continuation_s:
            return None
        return early

    @property
    def settled(self) -> bool:
        """Nothing heard is still on its way: no utterance open, no final owed or awaiting its
        confirmation, no voice the detector hears but has not counted yet."""
        voice_held = self.vad.voice_run_s > 0.0
        return not (self._in_utterance or self._pending or self._unconfirmed is not None or voice_held)

    def listening_for_more(self) -> bool:
        """Whether the user may still go on after an early final (a caller that mutes
        the microphone while the robot speaks must not mute it yet)."""
        return self._early is not None and self._t - self._early[1] <= self.endpointer.config.continuation_s

    def _hand_over(self) -> str:
        """The recognizer's hypothesis once it has read the audio not handed over yet."""
        pcm, self._unheard = self._unheard, b""
        return self.recognizer.accept(pcm)

    def _keep_audio(self, pcm: bytes) -> None:
        self._audio += pcm
        excess = len(self._audio) - int(SMART_TURN_WINDOW_S * SAMPLE_RATE) * 2
        if excess > 0:
            del self._audio[:excess]

    def skip(self, pcm: bytes) -> list[AsrEvent]:
        """Audio that is not listened to (the robot is speaking): the stream clock
        still advances by its length.  An utterance half heard when the skipping
        starts ends there: its final is what was heard so far, and its speech end
        the last voiced audio before it."""
        events = self._ready_finals() + self.flush()
        self._t += len(pcm) / (2 * SAMPLE_RATE)
        self._buffer = self._pre_roll = b""  # unheard audio does not join later audio
        return events

    def flush(self) -> list[AsrEvent]:
        """End the current utterance now (the mute switch).  A background recognizer's
        final comes from a later feed() once transcribed."""
        return self._end(by_pause=False)

    def close(self) -> None:
        """Stop a background recognizer's thread (the node's cleanup)."""
        if self._background:
            self.recognizer.stop()

    def finish_stream(self, timeout: float | None = None) -> list[AsrEvent]:
        """The input ended: close the utterance and wait for every final still owed.  No
        voice can continue them now: the last is confirmed at once (voice_changes)."""
        events = self.flush() + self._ready_finals(timeout)
        if self._unconfirmed is not None:
            self._unconfirmed = min(self._unconfirmed, self._t)
        return events

    def _end(self, by_pause: bool) -> list[AsrEvent]:
        """Close the utterance; `by_pause`: the endpoint ended it (the user may go on)."""
        if not self._in_utterance:
            return []
        self._in_utterance = False
        if self._background:
            if self._unheard:
                self._hand_over()
            self.recognizer.close(self._t - self._last_voiced)
            self._pending.append((self._prefix, self._last_voiced, by_pause, bytes(self._utterance_pcm)))
            return self._ready_finals()
        self._closing = True
        if self.redecode_final and self._unheard:
            self._hand_over()
        text = self._with_prefix(self._close_recognizer(), self._prefix) if self.redecode_final else ""
        text = text or self._hypothesis
        pcm = bytes(self._utterance_pcm)
        self._heard(pcm, text, self._last_voiced)
        if not text:
            self._no_words(self._prefix)
            return []
        self._final_out(text, self._last_voiced, by_pause, pcm)
        return [AsrEvent(Heard.FINAL, text, self._t, self._last_voiced, self._may_continue(by_pause))]

    def _ready_finals(self, timeout: float | None = 0.0) -> list[AsrEvent]:
        """The background recognizer's finals that are ready, in order (waiting up to
        `timeout` s for each; None: as long as it takes)."""
        events = []
        while self._pending:
            text = self.recognizer.final(timeout)
            if text is None:
                break
            prefix, t_speech_end, by_pause, pcm = self._pending.popleft()
            text = self._with_prefix(text, prefix)
            self._heard(pcm, text, t_speech_end)
            if not text:
                self._no_words(prefix)
                continue
            self._final_out(text, t_speech_end, by_pause, pcm)
            events.append(AsrEvent(Heard.FINAL, text, self._t, t_speech_end, self._may_continue(by_pause)))
        return events

    def _heard(self, pcm: bytes, text: str, t_speech_end: float) -> None:
        if self.on_utterance:
            self.on_utterance(pcm, text, t_speech_end)

    def _close_recognizer(self) -> str:
        """The recognizer's final hypothesis of the utterance it still has open, if any."""
        if not self._closing:
            return ""
        self._closing = False
        return " ".join(self.recognizer.finish().split())

    def _voiced_end(self, pcm: bytes) -> float | None:
        """Stream time of the end of the last voiced VAD frame in `pcm`, if any."""
        self._buffer += pcm
        usable = len(self._buffer) - len(self._buffer) % self._frame
        frames, self._buffer = self._buffer[:usable], self._buffer[usable:]
        t_frames_end = self._t - len(self._buffer) / (2 * SAMPLE_RATE)
        last = None
        count = len(frames) // self._frame
        for i in range(count):
            with METER.stage("voice detector"):
                voiced = self.vad.is_speech(frames[i * self._frame : (i + 1) * self._frame])
            if voiced:
                last = t_frames_end - (count - 1 - i) * self._frame / (2 * SAMPLE_RATE)
        return last
