"""tts_node: speaks `tts/say` sentences with Piper through the configured audio sink.

An empty `tts/say` message ends a reply.  The opening words of each
`predgen/candidate` sentence are synthesized ahead into a bounded cache while the
player is idle, so a committed first sentence that was foreseen starts playing at
once; of a candidate still being decoded (its beginning, marked "…") the opening
is synthesized as soon as the words after it make it certain, while the LLM
decodes the rest.  Only the opening: a commit that comes during this work waits for it, and
the rest is synthesized while the opening plays anyway.  A first
sentence that was not starts after its opening words are synthesized; the rest
is synthesized on a second thread while they play (audio/speech/pieces.py).  The time
the first chunk of each reply reaches the sink goes out on `tts/first_audio`
(stamp; frame_id = the sentence) for predgen_node's latency report.

While a reply plays, tts_node does what asr_node's turn owner decides
(`turn/decision`, turn_taking.py): pause where it is, resume where it paused, or
stop and drop the rest.  After a stop, `tts/played` says what the user heard of
the reply (the history keeps that), and `tts/interruption` says when the voice
paused, resumed or stopped.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
from std_msgs.msg import Bool, Header, Int16MultiArray, String

from ..audio.speech.pieces import FIRST_WORDS
from ..audio.speech.player import PlayerEvents, PlayerState, ReplyPlayer
from ..audio.speech.sinks import SINKS, SinkError, make_sink
from ..audio.speech.tts import CACHE_SIZE, THREADS, PiperSynthesizer, VoiceError
from ..turn_taking import Voice
from .common import AUDIO_QOS, ERROR, OK, STATE_QOS, TEXT_QOS, ManagedNode, StartupError, release_free_memory, run_node, stamp
from .messages import audio_chunk, candidate_of, decision_of, first_audio, reference_chunk, voice_event
from .peer_watch import PeerWatch

RETELL_S = 0.5  # a new reader of robot_speaking is told the robot is silent when it matches and this long after
TTS_PARAMS = {
    "tts.voice_path": ("", "Piper voice .onnx (its .onnx.json beside it); empty = embedded en_US joe medium"),
    "tts.sink": ("speaker", f"{' | '.join(SINKS)}"),
    "tts.wav_dir": ("predgen_speech", "folder for the WAV files of the wav sink (one file per reply)"),
    "tts.device": ("", "output device name or index for the speaker sink; empty = system default"),
    "tts.chunk_ms": (
        20,
        "audio chunk handed to the sink (ms); a pause or a barge-in silences the voice within two chunks "
        "(the one playing and one buffered); /diagnostics counts underruns",
    ),
    "tts.realtime": (True, "pace the wav/topic/none sinks at real time (robot_speaking lasts as long as the speech)"),
    "tts.publish_reference": (
        True,
        "publish what the loudspeaker plays on tts/reference, stamped with its play time, for asr_node's echo canceller",
    ),
    "tts.cache_size": (CACHE_SIZE, "sentences kept synthesized (candidates and recent sentences)"),
    "tts.threads": (THREADS, "Piper's CPU threads (0: one per core); the LLM keeps the other core"),
    "tts.presynthesize": (True, "synthesize the opening words of predgen/candidate sentences ahead while idle"),
    "tts.first_words": (
        FIRST_WORDS,
        "a reply's first sentence starts playing once its first clause, or at most this many words, is synthesized; "
        "0 = synthesize whole sentences",
    ),
}


class TtsNode(ManagedNode):
    """ROS around audio/speech/player.py: topics in, player commands; player events, topics out."""

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
        self.player: ReplyPlayer | None = None
        self._sink = None
        self._events: PlayerEvents | None = None
        self._thread: threading.Thread | None = None
        self.say_sub = None
        self._listening = []
        self._watch = None  # timer: a vanished predgen_node
        self._turn_heard = ""
        self.bad_decisions = 0
        self.sink_errors = 0
        self.error_reply = 0  # the reply whose audio failed, for diagnostics
        self.last_error = ""
        self.speaking = False
        self._readers = 0  # robot_speaking readers matched at the last look (_tell_new_readers)
        self._retell_at: float | None = None
        self.predgen = PeerWatch(self)

    # ------------------------------------------------------------- lifecycle
    def configure(self) -> None:
        """Load the voice and open the sink."""
        try:
            self.synth = PiperSynthesizer(
                self.p["tts.voice_path"] or None,
                self.p["tts.cache_size"],
                first_words=self.p["tts.first_words"],
                threads=self.p["tts.threads"],
            )
        except VoiceError as err:
            raise StartupError(f"tts.voice_path: {err}") from None
        try:
            sink = make_sink(self.p["tts.sink"], self.p["tts.wav_dir"], self._publish_audio, self.p["tts.device"])
        except SinkError as err:
            raise StartupError(str(err)) from None
        self._sink, self._events = (
            sink,
            PlayerEvents(
                speaking=self._publish_speaking,
                first_audio=lambda t, sentence, cached: self.first_audio_pub.publish(first_audio(stamp(t), sentence, cached)),
                interruption=lambda t, what: self.interruption_pub.publish(voice_event(stamp(t), what)),
                played=self._on_cut_off,
                reference=self._publish_reference,
                dropped=lambda line: self.get_logger().warning(line),
                failed=self._on_failure,
            ),
        )
        self.player = self._new_player()

    def _new_player(self) -> ReplyPlayer:
        return ReplyPlayer(self.synth, self._sink, self._events, self.p["tts.chunk_ms"], self.p["tts.realtime"])

    def activate(self) -> None:
        self._thread = threading.Thread(target=self.player.run, name="tts-player", daemon=True)
        self._thread.start()
        self._publish_speaking(False)
        self.say_sub = self.create_subscription(String, "tts/say", lambda msg: self.player.say(msg.data), TEXT_QOS)
        self._listening = [
            self.say_sub,
            self.create_subscription(String, "predgen/candidate", self._on_candidate, TEXT_QOS),
            self.create_subscription(Header, "turn/decision", self._on_decision, TEXT_QOS),
            self.create_subscription(String, "turn/events", self._on_user_turn, TEXT_QOS),
        ]
        voice = Path(self.p["tts.voice_path"]).name if self.p["tts.voice_path"] else "embedded en_US joe medium"
        self.get_logger().info(f"ready (active): voice={voice} sink={self.p['tts.sink']}")
        self._watch = self.create_timer(0.02, self._on_watch)

    def deactivate(self) -> None:
        """Stop listening and playing (a reply cut short is closed); the voice stays loaded."""
        for subscription in self._listening:
            self.destroy_subscription(subscription)
        self._listening, self.say_sub = [], None
        self.destroy_timer(self._watch)
        self.player.shutdown()
        self._thread.join(2.0)
        self.player = self._new_player()  # its threads are gone; the next activate starts afresh

    def cleanup(self) -> None:
        self.synth = self.player = self._sink = None

    # ------------------------------------------------------------ callbacks
    def _on_candidate(self, msg: String) -> None:
        text, finished = candidate_of(msg)
        if text and self.p["tts.presynthesize"]:
            self.player.foresee(text, finished)

    def _on_user_turn(self, _msg: String) -> None:
        """turn/events carries only the user's turns: what predgen_node says next answers one."""
        self.player.user_spoke()

    def _on_decision(self, msg: Header) -> None:
        """The turn owner's word on the voice; the player acts on it within one chunk."""
        what, heard = decision_of(msg)
        try:
            decision = Voice(what)
        except ValueError:
            self.bad_decisions += 1
            self.get_logger().warning(
                f"ignored turn/decision {msg.frame_id!r}: frame_id must start with pause, resume or stop (messages.py)",
                throttle_duration_sec=5.0,
            )
            return
        if not self.speaking:
            return  # the reply ended as the decision crossed it on the wire
        if decision is Voice.STOP:
            self._turn_heard = heard  # for the log line: which words made the turn
            self.player.stop()
        elif decision is Voice.PAUSE:
            self.player.pause()
        elif decision is Voice.RESUME:
            self.player.resume()

    def _on_watch(self) -> None:
        """A reply whose sender vanished ends; a reader of robot_speaking that has just
        matched hears its value (below)."""
        self._tell_new_readers()
        if self.player.state is PlayerState.PLAYING and self.player.waiting_for_more and self.predgen.lost():
            self.get_logger().warning(f"{self.predgen.describe()} in the middle of reply {self.player.replies}: ending it")
            self.player.abandon()

    def _on_cut_off(self, heard: str) -> None:
        self.get_logger().info(f"barge-in: the user said {self._turn_heard!r}, speech stopped after {heard!r}")
        self.played_pub.publish(String(data=heard))

    def _on_failure(self, err: Exception) -> None:
        self.sink_errors += 1
        self.error_reply = self.player.replies
        self.last_error = f"{type(err).__name__}: {err}"
        self.get_logger().error(f"reply {self.player.replies}: audio failed ({self.last_error}); skipping the rest of this reply")

    # --------------------------------------------------------------- output
    def _publish_speaking(self, speaking: bool) -> None:
        self.speaking = speaking
        if not speaking:
            release_free_memory()
        if self.context.ok():  # a stop signal may have shut the context before close() ends a reply
            self.speaking_pub.publish(Bool(data=speaking))

    def _tell_new_readers(self) -> None:
        """A reader of robot_speaking that joins while the robot is silent is told so, when
        it matches and again RETELL_S later (the reader's side of the match may lag ours):
        asr_node reads it volatile (see STATE_QOS), so the `false` a tts_node restarted
        mid-reply published before asr_node matched it never arrived, and asr_node took the
        robot for speaking until the next reply (docs/results/stress.md).  Never `true`:
        listeners count replies by it."""
        readers, now = self.speaking_pub.get_subscription_count(), time.time()
        retell = readers > self._readers or (self._retell_at is not None and now >= self._retell_at)
        if readers > self._readers:
            self._retell_at = now + RETELL_S
        elif retell:
            self._retell_at = None
        if retell and not self.speaking and self.context.ok():
            self.speaking_pub.publish(Bool(data=False))
        self._readers = readers

    def _publish_audio(self, chunk: np.ndarray, sample_rate: int) -> None:
        self.audio_pub.publish(audio_chunk(chunk, sample_rate))

    def _publish_reference(self, chunk: np.ndarray, sample_rate: int, played_at: float) -> None:
        if self.reference_pub is not None:
            self.reference_pub.publish(reference_chunk(chunk, sample_rate, played_at))

    def health(self):
        player = self.player
        values = {
            "sink": self.p["tts.sink"],
            "speaking": self.speaking,
            "player": player.state.value,
            "replies": player.replies,
            "sentences": player.sentences,
            "cached_sentences": len(self.synth),
            "cache_hits": self.synth.hits,
            "barge_ins": player.barge_ins,
            "pauses": player.pauses,
            "resumes": player.resumes,
            "underruns": player.underruns,
            "audio_errors": self.sink_errors,
            "bad_turn_decisions": self.bad_decisions,
            "say_publishers": self.say_sub.get_publisher_count() if self.say_sub else 0,  # 0: no predgen_node found yet
            "predgen_reachable": self.predgen.reachable(),
            "stale_dropped": player.stale_dropped,
            "synthesized_s": round(player.synthesized_s, 3),
            "dropping_stale": player.stale,
        }
        if self.sink_errors and self.error_reply == player.replies:
            return ERROR, f"reply {self.error_reply}: {self.last_error}", values
        return OK, "speaking" if self.speaking else "idle", values


def main(args: list[str] | None = None) -> int:
    return run_node("tts_node", TtsNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
