"""tts_node: speaks `tts/say` sentences with Piper through the configured audio sink.

An empty `tts/say` message ends a reply.  The opening words of each
`predgen/candidate` sentence are synthesized ahead into a bounded cache while the
player is idle, so a committed first sentence that was foreseen starts playing at
once.  Only the opening: a commit that comes during this work waits for it, and
the rest is synthesized while the opening plays anyway.  A first
sentence that was not starts after its opening words are synthesized; the rest
is synthesized on a second thread while they play (audio/pieces.py).  The time
the first chunk of each reply reaches the sink goes out on `tts/first_audio`
(stamp; frame_id = the sentence) for predgen_node's latency report.

While a reply plays, the user's voice and words decide what the voice does
(turn_taking.py): an acknowledgement lets it go on; with `tts.interruption:
pause` a cough or a first word pauses it, and it resumes where it paused
unless a real turn follows; a real turn stops it and drops the rest.  After a
stop, `tts/played` says what the user heard of the reply (the history keeps
that), and `tts/interruption` says when the voice paused, resumed or stopped.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from std_msgs.msg import Bool, Header, Int16MultiArray, String

from ..audio.pieces import FIRST_WORDS
from ..audio.sinks import SINKS, SinkError, make_sink
from ..audio.tts import CACHE_SIZE, PiperSynthesizer, Speech, VoiceError
from ..turn_taking import INTERRUPTIONS, TURN_PARAMS, Voice, VoiceControl, heard_text, turn_rules
from .common import (
    AUDIO_QOS,
    ERROR,
    OK,
    STATE_QOS,
    TEXT_QOS,
    ManagedNode,
    StartupError,
    release_free_memory,
    run_node,
    seconds,
    stamp,
)
from .messages import audio_chunk, first_audio, reference_chunk, voice_event, voice_kind
from .peer_watch import PeerWatch

TTS_PARAMS = {
    "tts.voice_path": ("", "Piper voice .onnx (its .onnx.json beside it); empty = embedded en_US joe medium"),
    "tts.sink": ("speaker", f"{' | '.join(SINKS)}"),
    "tts.wav_dir": ("predgen_speech", "folder for the WAV files of the wav sink (one file per reply)"),
    "tts.device": ("", "output device name or index for the speaker sink; empty = system default"),
    "tts.chunk_ms": (50, "audio chunk handed to the sink (ms); a pause or a barge-in silences the voice within two chunks"),
    "tts.realtime": (True, "pace the wav/topic/none sinks at real time (robot_speaking lasts as long as the speech)"),
    "tts.publish_reference": (
        True,
        "publish what the loudspeaker plays on tts/reference, stamped with its play time, for asr_node's echo canceller",
    ),
    "tts.barge_in": (True, "let the user interrupt the robot (false: it always speaks its reply to the end)"),
    "tts.interruption": (
        "pause",
        f"{' | '.join(INTERRUPTIONS)}: a real turn over the robot stops it; with pause, the user's voice or a short partial "
        "pauses it and it resumes where it paused unless a turn follows",
    ),
    "tts.resume_s": (1.0, "pause: resume when this long passes after the last sound without a turn"),
    **TURN_PARAMS,
    "tts.cache_size": (CACHE_SIZE, "sentences kept synthesized (candidates and recent sentences)"),
    "tts.presynthesize": (True, "synthesize the opening words of predgen/candidate sentences ahead while idle"),
    "tts.first_words": (
        FIRST_WORDS,
        "a reply's first sentence starts playing once its first clause, or at most this many words, is synthesized; "
        "0 = synthesize whole sentences",
    ),
}
MAX_QUEUED = 256  # sentences; a sane bound, never reached by a real reply


class TtsNode(ManagedNode):
    def __init__(self):
        super().__init__("tts_node", TTS_PARAMS)
        self.audio_pub = self.create_publisher(Int16MultiArray, "tts/audio", AUDIO_QOS) if self.p["tts.sink"] == "topic" else None
        self.speaking_pub = self.create_publisher(Bool, "robot_speaking", STATE_QOS)
        self.first_audio_pub = self.create_publisher(Header, "tts/first_audio", TEXT_QOS)
        self.played_pub = self.create_publisher(String, "tts/played", TEXT_QOS)
        self.interruption_pub = self.create_publisher(Header, "tts/interruption", TEXT_QOS)
        self.reference_pub = (
            self.create_publisher(Int16MultiArray, "tts/reference", AUDIO_QOS) if self.p["tts.publish_reference"] else None
        )
        self.synth: PiperSynthesizer | None = None
        self.sink = None
        self.player: threading.Thread | None = None
        self._ahead: ThreadPoolExecutor | None = None  # synthesizes a first sentence's rest while its opening plays
        self.say_sub = None
        self._listening = []

        self.replies = 0
        self.sentences = 0
        self.barge_ins = 0
        self.pauses = 0
        self.resumes = 0
        self.voice_control: VoiceControl | None = None
        self._played: list[tuple[str, float]] = []  # this reply's pieces so far: (text, share of its audio played)
        self._turn_heard = ""
        self.sink_errors = 0
        self.error_reply = 0  # the reply whose audio failed, for diagnostics
        self.last_error = ""
        self.speaking = False
        self._queue: deque[str] = deque()
        self._candidate: str | None = None
        self._ready = threading.Condition()
        self._barge = threading.Event()
        self._stopping = threading.Event()
        self._in_reply = False
        self._discarding = False  # after a barge-in or a sink error: drop the rest of the reply
        self._stale = False  # predgen_node went away mid-reply: drop what it said until the user speaks again
        self.stale_dropped = 0
        self.predgen = PeerWatch(self)
        self._play_until = 0.0  # when the audio handed to a self-paced schedule ends

    # ------------------------------------------------------------- lifecycle
    def configure(self) -> None:
        """Load the voice and open the sink."""
        try:
            self.synth = PiperSynthesizer(
                self.p["tts.voice_path"] or None, self.p["tts.cache_size"], first_words=self.p["tts.first_words"]
            )
        except VoiceError as err:
            raise StartupError(f"tts.voice_path: {err}") from None
        try:
            self.sink = make_sink(self.p["tts.sink"], self.p["tts.wav_dir"], self._publish_audio, self.p["tts.device"])
        except SinkError as err:
            raise StartupError(str(err)) from None
        self.chunk = max(1, int(self.synth.sample_rate * self.p["tts.chunk_ms"] / 1000))
        try:
            self.voice_control = VoiceControl(turn_rules(self.p), self.p["tts.interruption"], self.p["tts.resume_s"])
        except ValueError as err:
            raise StartupError(str(err)) from None
        self._ahead = ThreadPoolExecutor(1, thread_name_prefix="tts-ahead")

    def activate(self) -> None:
        self._stopping.clear()
        self._barge.clear()
        self.player = threading.Thread(target=self._play_forever, name="tts-player", daemon=True)
        self.player.start()
        self._publish_speaking(False)
        self.say_sub = self.create_subscription(String, "tts/say", self._on_say, TEXT_QOS)
        self._listening = [
            self.say_sub,
            self.create_subscription(String, "predgen/candidate", self._on_candidate, TEXT_QOS),
            self.create_subscription(Header, "asr/voice", self._on_user_voice, TEXT_QOS),  # before the words it times
            self.create_subscription(String, "asr/partial", self._on_user_partial, TEXT_QOS),
            self.create_subscription(String, "asr/final", self._on_user_final, TEXT_QOS),
        ]

    def deactivate(self) -> None:
        """Stop listening and playing (a reply cut short is closed); the voice stays loaded."""
        for subscription in self._listening:
            self.destroy_subscription(subscription)
        self._listening, self.say_sub = [], None
        self._stopping.set()
        self._barge.set()
        self.player.join(2.0)
        with self._ready:
            self._queue.clear()
            self._candidate = None
        self._discarding = False
        if self._in_reply:
            self._close_reply()  # a WAV file cut short still gets a valid header

    def cleanup(self) -> None:
        if self._ahead is not None:
            self._ahead.shutdown(wait=True)
        self.synth = self.sink = self._ahead = None

    # ------------------------------------------------------------ callbacks
    def _on_say(self, msg: String) -> None:
        with self._ready:
            if self._stale:  # the rest of a reply the robot already ended (a link that came back)
                self.stale_dropped += 1
                return
            if len(self._queue) >= MAX_QUEUED:
                self.get_logger().warning(f"more than {MAX_QUEUED} sentences queued; dropping the oldest")
                self._queue.popleft()
            self._queue.append(msg.data.strip())
            self._ready.notify()

    def _on_candidate(self, msg: String) -> None:
        if msg.data.strip() and self.p["tts.presynthesize"]:
            with self._ready:
                self._candidate = msg.data.strip()  # latest wins
                self._ready.notify()

    def _on_user_partial(self, msg: String) -> None:
        self._react(lambda control: control.partial(msg.data), msg.data)

    def _on_user_final(self, msg: String) -> None:
        self._react(lambda control: control.final(msg.data), msg.data)

    def _on_user_voice(self, msg: Header) -> None:
        self._react(lambda control: control.voice(voice_kind(msg), seconds(msg.stamp)))

    def _react(self, decide, heard: str = "") -> None:
        """VoiceControl hears everything (how long the user spoke counts); its decision
        applies while a reply plays, and the player acts on it within one chunk."""
        with self._ready:
            self._stale = False  # the user speaks: what predgen_node says next answers them
            decision = decide(self.voice_control)
            if not (self.speaking and self.p["tts.barge_in"]):
                return
            if decision is Voice.STOP:
                self._turn_heard = heard  # for the log line: which words made the turn
                self._barge.set()
            self._ready.notify_all()

    # --------------------------------------------------------------- player
    def _play_forever(self) -> None:
        while not self._stopping.is_set():
            item, candidate = self._next()
            try:
                if item is None and candidate:
                    self.synth.synthesize(self.synth.pieces(candidate)[0])
                elif item is None and self._in_reply and self.predgen.lost():
                    self._abandon_reply()
                elif item == "":
                    self._end_reply()
                elif item is not None:
                    self._speak(item)
            except Exception as err:  # a failed synthesis or sink: this reply is lost, the node serves on
                if not self.context.ok():
                    return  # shutting down: publishers are gone
                self._fail_reply(err)

    def _next(self) -> tuple[str | None, str | None]:
        """The next queued sentence (or "" = end of reply), else a candidate to prepare."""
        with self._ready:
            if not self._queue and self._candidate is None:
                self._ready.wait(0.2)
            if self._queue:
                return self._queue.popleft(), None
            candidate, self._candidate = self._candidate, None
            return None, candidate

    def _speak(self, sentence: str) -> None:
        if self._discarding or not sentence:
            return
        pieces = [sentence] if self._in_reply else self.synth.pieces(sentence)
        cached = self.synth.cached(pieces[0])
        opening = self.synth.synthesize(pieces[0])
        rest = self._ahead.submit(self.synth.synthesize, pieces[1]) if len(pieces) > 1 else None
        if not self._play(opening, pieces[0], sentence, cached):
            return
        if rest is not None and not self._play(rest.result(), pieces[1], sentence):
            return
        self.sentences += 1

    def _play(self, speech: Speech, piece: str, sentence: str, cached: bool = False) -> bool:
        """Hand `speech` (the audio of `piece`, part of `sentence`; `cached`: it came from the
        cache) to the sink chunk by chunk, holding while paused; False when the user barged in."""
        first = not self._in_reply
        if first:
            self._begin_reply()
        total = len(speech.samples)
        for start in range(0, total, self.chunk):
            self._hold_while_paused()
            if self._barge.is_set():
                if not self._stopping.is_set():
                    self._interrupt((piece, start / max(1, total)))
                return False
            if first:
                self.first_audio_pub.publish(first_audio(stamp(time.time()), sentence, cached))
                first = False
            chunk = speech.samples[start : start + self.chunk]
            if self.reference_pub is not None:  # before the sink: the canceller should have it before the echo
                played_at = time.time() if self.sink.paced else max(time.time(), self._play_until)
                self.reference_pub.publish(reference_chunk(chunk, speech.sample_rate, played_at))
            self.sink.play(chunk)
            self._pace(min(self.chunk, total - start) / speech.sample_rate)
        self._played.append((piece, 1.0))
        return True

    def _hold_while_paused(self) -> None:
        """Wait out a pause (tts.interruption: pause) until it resumes or turns into a stop."""
        with self._ready:
            if not self.voice_control.paused:
                return
            self.pauses += 1
            self._announce("pause")
            while self.voice_control.paused and not self._barge.is_set() and not self._stopping.is_set():
                if self.voice_control.due() is Voice.RESUME:
                    break
                self._ready.wait(max(0.01, self.voice_control.resume_at - time.time()))
            if self._barge.is_set():
                return  # the stop is announced by _interrupt
            self.resumes += 1
        self._announce("resume")
        self._play_until = time.time()  # pacing starts again from now

    def _announce(self, what: str) -> None:
        """tts/interruption: when the audio handed to the sink falls silent (pause, stop) or goes on (resume)."""
        at = time.time() if what == "resume" else max(time.time(), self._play_until)
        self.interruption_pub.publish(voice_event(stamp(at), what))

    def _begin_reply(self) -> None:
        self.replies += 1
        self._in_reply = True
        self._barge.clear()
        self._played = []
        with self._ready:
            self.voice_control.new_reply()
        self._play_until = time.time()
        self._publish_speaking(True)
        self.sink.begin(f"reply_{self.replies:03d}", self.synth.sample_rate)

    def _pace(self, seconds: float) -> None:
        """Real-time pacing for sinks that do not block while playing."""
        if self.sink.paced or not self.p["tts.realtime"]:
            return
        self._play_until += seconds
        ahead = self._play_until - time.time() - seconds  # keep one chunk buffered
        if ahead > 0:
            self._barge.wait(ahead)

    def _end_reply(self) -> None:
        if self._discarding:
            self._discarding = False
            return
        if not self._in_reply:
            return
        if not self.sink.paced and self.p["tts.realtime"]:
            self._barge.wait(max(0.0, self._play_until - time.time()))  # the last chunk plays out
        self._close_reply()

    def _close_reply(self) -> None:
        self._in_reply = False
        try:
            self.sink.end()
        finally:
            self._publish_speaking(False)
            release_free_memory()

    def _interrupt(self, cut: tuple[str, float]) -> None:
        """Barge-in: stop within one chunk, drop the rest of this reply, and say what
        the user heard of it (`cut`: the piece playing and the share of it played)."""
        self.barge_ins += 1
        self._announce("stop")
        heard = heard_text([*self._played, cut])
        self.get_logger().info(f"barge-in: the user said {self._turn_heard!r}, speech stopped after {heard!r}")
        self.played_pub.publish(String(data=heard))
        self._discarding = True
        self._close_reply()

    def _abandon_reply(self) -> None:
        """predgen_node went away mid-reply (its host, or the link): the robot falls silent
        instead of waiting for an end that may never come; what arrives of it later is stale."""
        self.get_logger().warning(f"{self.predgen.describe()} in the middle of reply {self.replies}: ending it")
        with self._ready:
            self._stale = True
            self._queue.clear()
        self._discarding = False
        self._close_reply()

    def _fail_reply(self, err: Exception) -> None:
        self.sink_errors += 1
        self.error_reply = self.replies
        self.last_error = f"{type(err).__name__}: {err}"
        self.get_logger().error(f"reply {self.replies}: audio failed ({self.last_error}); skipping the rest of this reply")
        self._discarding = self._in_reply
        if self._in_reply:
            try:
                self._close_reply()
            except Exception:
                pass  # the sink is already broken; robot_speaking went false in _close_reply

    # --------------------------------------------------------------- output
    def _publish_speaking(self, speaking: bool) -> None:
        self.speaking = speaking
        if self.context.ok():  # a stop signal may have shut the context before close() ends a reply
            self.speaking_pub.publish(Bool(data=speaking))

    def _publish_audio(self, chunk: np.ndarray, sample_rate: int) -> None:
        self.audio_pub.publish(audio_chunk(chunk, sample_rate))

    def health(self):
        values = {
            "sink": self.p["tts.sink"],
            "speaking": self.speaking,
            "replies": self.replies,
            "sentences": self.sentences,
            "cached_sentences": len(self.synth),
            "cache_hits": self.synth.hits,
            "barge_ins": self.barge_ins,
            "pauses": self.pauses,
            "resumes": self.resumes,
            "audio_errors": self.sink_errors,
            "say_publishers": self.say_sub.get_publisher_count() if self.say_sub else 0,  # 0: no predgen_node found yet
            "predgen_reachable": self.predgen.reachable(),
            "stale_dropped": self.stale_dropped,
            "dropping_stale": self._stale,
        }
        if self.sink_errors and self.error_reply == self.replies:
            return ERROR, f"reply {self.error_reply}: {self.last_error}", values
        return OK, "speaking" if self.speaking else "idle", values


def main(args: list[str] | None = None) -> int:
    return run_node("tts_node", TtsNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
