"""asr_node: the user's speech as `asr/partial` hypotheses and `asr/final` transcripts.

Backends: pocketsphinx or vosk over the microphone, a WAV file or the
`audio/user` topic (16 kHz mono chunks, e.g. a bag's audio replayed by
`predgen-ros eval --live-asr`), or `text` (a simulated user speaking questions
at a fixed rate).  Before each final it
publishes `asr/speech_end`, whose stamp is the end of the user's voiced audio,
so latency can be measured from the moment the user stopped talking.

When the utterance ends is the endpoint policy's call (audio/endpoint.py): a
fixed silence, or a short pause when Smart Turn (the audio) or the LLM (the
words, from predgen_node's `turn/end_probability`) says the turn is complete.

asr_node also owns the turn (turn_taking.py's TurnOwner, `turn.*` parameters):
speech that begins while the robot speaks reaches asr/partial and asr/final only
once it is a turn, and what the robot's voice does meanwhile (pause, resume,
stop) goes out on `turn/decision` for tts_node.

A lifecycle node like the other two: configure opens the recognizer and the
audio source (a bad parameter stays unconfigured with its reason), activate
starts hearing (a WAV file or a text list from its beginning), deactivate stops
publishing, cleanup frees the recognizer and closes the microphone.
"""

from __future__ import annotations

import queue
import threading
import time
from enum import Enum
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import KeyValue
from std_msgs.msg import Bool, Header, Int16MultiArray, String

from ..audio.asr import AsrEvent, StreamingAsr, in_order
from ..audio.ear import Ear, build_ear
from ..audio.echo import ECHO_CANCELLERS
from ..audio.endpoint import EndpointError
from ..audio.heard_audio import CancellerInputs, HeardAudio
from ..audio.pcm import SAMPLE_RATE, AsrError, chunks, microphone_chunks, read_wav, to_pcm16k
from ..audio.recognizers import RECOGNIZERS
from ..audio.text_asr import QuestionError, load_questions, text_partials
from ..events import Heard
from ..os_threads import name_thread
from ..turn_taking import TurnOwner, Voice, turn_owner, words
from .asr_params import ASR_PARAMS, ear_settings
from .common import AUDIO_QOS, ERROR, OK, TEXT_QOS, WARN, ManagedNode, StartupError, run_node, stamp
from .messages import audio_rate, played_at, speech_end, turn_decision, voice_event
from .peer_watch import PEER, PeerWatch

UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"  # rmw's name for an endpoint whose node it has not heard of yet


class AsrState(Enum):
    """What asr_node's source is doing; the value is what /diagnostics reports."""

    IDLE = "idle"  # not active
    STARTING = "starting"
    WAITING_FOR_PREDGEN = "waiting for predgen_node"
    WAITING_FOR_TTS = "waiting for tts_node"
    LISTENING = "listening"
    MUTED = "muted"  # the robot speaks: its voice is not the user's
    PAUSE = "pause"  # text backend: the silence before an utterance
    SPEAKING = "speaking"  # text backend: an utterance being said
    WAITING_FOR_REPLY = "waiting for the reply"
    INPUT_FINISHED = "input finished"
    ERROR = "error"

    @property
    def level(self) -> int:
        waiting = self in (AsrState.WAITING_FOR_PREDGEN, AsrState.WAITING_FOR_TTS)
        return ERROR if self is AsrState.ERROR else WARN if waiting else OK


class AsrNode(ManagedNode):
    def __init__(self):
        super().__init__("asr_node", ASR_PARAMS)
        self.partial_pub = self.create_publisher(String, "asr/partial", TEXT_QOS)
        self.final_pub = self.create_publisher(String, "asr/final", TEXT_QOS)
        self.speech_end_pub = self.create_publisher(Header, "asr/speech_end", TEXT_QOS)
        self.voice_pub = self.create_publisher(Header, "asr/voice", TEXT_QOS)  # the voice's start/end: turn_taking.py
        self.decision_pub = self.create_publisher(Header, "turn/decision", TEXT_QOS)  # what tts_node's voice does
        self.turns: TurnOwner | None = None
        self._due = None  # timer: a pause that lasted turn.resume_s resumes
        self.ear: Ear | None = None  # the hearing chain (audio/ear.py), audio backends
        self.predgen = PeerWatch(self)  # on a split robot, the other host may go away
        self.robot_speaking = False
        self.replies = 0  # robot_speaking true -> false transitions seen
        self.utterances = 0
        self.partials = 0
        self.state = AsrState.IDLE
        self.error = ""
        self._last_partial = ""
        self._stopping = threading.Event()
        self._source = None  # configured: runs the source until it ends or the node deactivates
        self._close_source = None  # what closes the microphone
        self._arrived: queue.Queue[bytes] | None = None  # asr.input topic: the chunks of audio/user
        self.heard_audio: HeardAudio | None = None  # asr.record_dir
        self.canceller_inputs: CancellerInputs | None = None  # asr.record_dir, with the echo canceller
        self._stream_t0 = 0.0  # wall time at the stream's time 0 (a paused source moves it)
        self._reference_sub = None
        self._listening = []
        self.thread: threading.Thread | None = None

    # ------------------------------------------------------------- lifecycle
    def configure(self) -> None:
        try:
            self.turns = turn_owner(self.p)
        except ValueError as err:
            raise StartupError(str(err)) from None
        if self.p["asr.echo_cancel"] not in ECHO_CANCELLERS:
            raise StartupError(
                f"asr.echo_cancel: unknown canceller {self.p['asr.echo_cancel']!r} (choose one of {', '.join(ECHO_CANCELLERS)})"
            )
        self._source = self._open_source()

    def activate(self) -> None:
        self._stopping.clear()
        self.state, self.error = AsrState.STARTING, ""
        self._listening = [  # robot_speaking first: _wait_for_listeners reads it
            self.create_subscription(Bool, "robot_speaking", self._on_robot_speaking, TEXT_QOS),
            self.create_subscription(KeyValue, "turn/end_probability", self._on_end_probability, TEXT_QOS),
        ]
        if self._arrived is not None:
            self._listening.append(self.create_subscription(Int16MultiArray, "audio/user", self._on_audio, TEXT_QOS))
        if self.ear is not None and self.ear.echo is not None:
            self._reference_sub = self.create_subscription(Int16MultiArray, "tts/reference", self._on_reference, AUDIO_QOS)
            self._listening.append(self._reference_sub)
        self._due = self.create_timer(0.02, lambda: self._decide(self.turns.due(), cause="no turn within turn.resume_s"))
        self.thread = threading.Thread(target=self._guarded, args=(self._source,), name="asr-source", daemon=True)
        self.thread.start()

    def deactivate(self) -> None:
        self._stopping.set()
        self.thread.join(2.0)
        for subscription in self._listening:
            self.destroy_subscription(subscription)
        self._listening = []
        self.destroy_timer(self._due)
        self.state = AsrState.IDLE

    def cleanup(self) -> None:
        if self._close_source:
            self._close_source()
        if self.canceller_inputs is not None:
            self.canceller_inputs.close()
        if self.ear is not None:
            self.ear.close()
        self._source = self._close_source = self._arrived = self.ear = None

    # ---------------------------------------------------------------- set-up
    def _open_source(self):
        """A callable that produces the utterances; errors name the parameter at fault."""
        backend = self.p["asr.backend"]
        if backend == "text":
            try:
                questions = load_questions(self.p["asr.text.source"] or None, self.p["asr.text.limit"] or None)
            except QuestionError as err:
                raise StartupError(f"asr.text.source: {err}") from None
            return lambda: self._speak_texts([q.text for q in questions])
        if backend not in RECOGNIZERS:
            raise StartupError(f"asr.backend: unknown backend {backend!r} (choose one of {', '.join(RECOGNIZERS)})")
        try:
            if self.p["asr.record_dir"]:
                self.heard_audio = HeardAudio(Path(self.p["asr.record_dir"]).expanduser())
            self.ear = build_ear(ear_settings(self.p), on_utterance=self._heard if self.heard_audio else None)
        except (AsrError, EndpointError, ValueError) as err:
            raise StartupError(str(err)) from None
        if self.heard_audio is not None and self.ear.echo is not None:
            self.canceller_inputs = CancellerInputs(self.heard_audio.folder)
            self.ear.echo.tap = self.canceller_inputs.frame
        asr = self.ear.asr
        chunk_s = self.p["asr.chunk_ms"] / 1000.0
        try:
            if self.p["asr.input"] == "microphone":  # opened here: a missing device is reported now
                stream = microphone_chunks(chunk_s, self.p["asr.device"])
                self._close_source = stream.close
                return lambda: self._listen(asr, stream, chunk_s, paced=True)
            if self.p["asr.input"] == "topic":
                self._arrived = arrived = queue.Queue()
                return lambda: self._listen(asr, self._queued(arrived), chunk_s, paced=True)
            pcm = read_wav(self.p["asr.input"])
        except AsrError as err:
            raise StartupError(f"asr.input: {err}") from None
        return lambda: self._listen(asr, chunks(pcm, chunk_s), chunk_s, paced=False)

    def _heard(self, pcm: bytes, final: str, t_speech_end: float) -> None:
        self.heard_audio.utterance(pcm, final, self._stream_t0 + t_speech_end)

    def _queued(self, arrived: queue.Queue):
        """The chunks that arrived on `audio/user`, in order, as they come."""
        while not self._stopping.is_set():
            try:
                yield arrived.get(timeout=0.1)
            except queue.Empty:
                continue

    def _on_audio(self, msg: Int16MultiArray) -> None:
        if self.state not in (AsrState.LISTENING, AsrState.MUTED):
            return  # not listening yet: stale audio would be heard late, with wrong times
        rate = audio_rate(msg)
        if rate not in (None, SAMPLE_RATE):  # unlabelled chunks are taken as 16 kHz
            label = msg.layout.dim[0].label
            self.get_logger().warning(
                f"ignored audio/user chunk labelled {label!r}: asr_node hears 16 kHz mono int16 (layout label 'mono_{SAMPLE_RATE}hz')",
                throttle_duration_sec=5.0,
            )
            return
        self._arrived.put(np.asarray(msg.data, dtype=np.int16).tobytes())

    def _on_reference(self, msg: Int16MultiArray) -> None:
        """What the loudspeaker played: the echo canceller's reference (audio/echo.py)."""
        t, rate = played_at(msg), audio_rate(msg)
        if t is None or rate is None:
            self.get_logger().warning(
                "ignored tts/reference chunk without its rate label or played_at_ns stamp (messages.py)",
                throttle_duration_sec=5.0,
            )
            return
        self.ear.echo.played(t, to_pcm16k(np.asarray(msg.data, dtype=np.int16), rate))

    def _hears_reference(self) -> bool:
        """The echo canceller can work: a tts/reference publisher is matched."""
        return self._reference_sub is not None and self._reference_sub.get_publisher_count() > 0

    def _on_end_probability(self, msg: KeyValue) -> None:
        """predgen_node's estimate that the user is done after the words in `key`."""
        try:
            probability = float(msg.value)
        except ValueError:
            self.get_logger().warning(
                f"ignored turn/end_probability with value {msg.value!r}: not a number", throttle_duration_sec=5.0
            )
            return
        if self.ear is not None:
            self.ear.asr.text_estimate(msg.key, probability)

    # ------------------------------------------------------------ publishing
    def publish_partial(self, text: str) -> None:
        """The hypothesis, when it changed and the turn owner hands it on."""
        text = " ".join(text.split())
        if not text or text == self._last_partial:  # only on change, never empty
            return
        self._last_partial = text
        ruling = self.turns.partial(text)
        self._decide(ruling.voice, text)
        if ruling.hand_on:
            self.partials += 1
            self.partial_pub.publish(String(data=text))

    def publish_final(self, text: str, t_speech_end: float) -> None:
        """The utterance's end of speech and final, when the turn owner says it is a turn."""
        text = " ".join(text.split()) or self._last_partial
        self._last_partial = ""
        if not text:
            return
        ruling = self.turns.final(text)
        self._decide(ruling.voice, text)
        if not ruling.hand_on:
            why = "has no word" if not words(text) else "was said over the robot (turn.min_words, turn.backchannels)"
            self.get_logger().info(f"{text!r} {why}: no turn")
            return
        self.utterances += 1
        self.speech_end_pub.publish(speech_end(stamp(t_speech_end), self.utterances))
        self.final_pub.publish(String(data=text))

    def _decide(self, voice: Voice, heard: str = "", cause: str = "") -> None:
        """The turn owner's word on the robot's voice, for tts_node (logged with its cause:
        why did the robot pause?)."""
        if voice is Voice.KEEP:
            return
        self.decision_pub.publish(turn_decision(stamp(time.time()), voice.value, heard))
        self.get_logger().info(f"turn: {voice.value} ({cause or repr(heard)})")

    def _on_robot_speaking(self, msg: Bool) -> None:
        if self.robot_speaking and not msg.data:
            self.replies += 1
        self.robot_speaking = msg.data
        self._decide(self.turns.robot_speaking(msg.data), cause="a reply began while the user went on after an early final")

    # --------------------------------------------------------------- sources
    def _guarded(self, source) -> None:
        name_thread()  # the audio loop: voice detector, echo canceller, endpoint (the CPU budget reads it by name)
        try:
            source()
        except AsrError as err:
            self.state, self.error = AsrState.ERROR, str(err)
            self.get_logger().error(str(err))
        except Exception as err:  # keep the node (and its diagnostics) alive
            self.state, self.error = AsrState.ERROR, f"{type(err).__name__}: {err}"
            self.get_logger().error(f"ASR source failed: {self.error}")

    def _listen(self, asr: StreamingAsr, audio, chunk_s: float, paced: bool) -> None:
        """Feed audio chunks at their real timing; publish what the recognizer hears.

        Stream time maps to wall time at each chunk's arrival, so a source that
        pauses (a replay waiting for the robot's reply) keeps its stamps right."""
        # every source waits: what it hears before predgen_node's readers match is lost to it
        # (a demo beside a busy CPU once lost its first question so); live audio meanwhile is dropped
        self._wait_for_listeners(need_tts=False)
        self.state = AsrState.LISTENING
        start = t0 = time.time()
        heard_s = 0.0
        for i, pcm in enumerate(audio):
            if self._stopping.is_set():
                return
            if not paced:  # a file: play it at real time, like a microphone
                self._sleep_until(start + (i + 1) * chunk_s)
            heard_s += len(pcm) / (2 * SAMPLE_RATE)
            t0 = self._stream_t0 = time.time() - heard_s
            echo = self.ear.echo
            pcm = self.ear.hear(pcm, echo.clock.captured(time.time(), len(pcm) // 2) if echo is not None else 0.0)
            # after an early final the user may go on: hear it (tts_node stops on the partial)
            mute = self.p["asr.mute_while_robot_speaks"] and not self._hears_reference()
            muted = self.robot_speaking and mute and not asr.listening_for_more()
            self.state = AsrState.MUTED if muted else AsrState.LISTENING
            events = asr.skip(pcm) if muted else asr.feed(pcm)
            if muted and self.ear.guarded_vad is not None:
                self.ear.guarded_vad.forget()  # the recognizer skipped this audio and dropped what it held
            self._publish(asr, events, t0)
        self._publish(asr, asr.finish_stream(), t0)
        self.state = AsrState.INPUT_FINISHED

    def _publish(self, asr: StreamingAsr, events, t0: float) -> None:
        """One chunk's words and voice changes, in order (asr.in_order)."""
        for item in in_order(events, asr.voice_changes()):
            if isinstance(item, AsrEvent):
                self._publish_event(item, t0)
                continue
            what, t = item
            if what in ("start", "resumed"):
                t = self.ear.voice_began(t)  # counted late over the echo
            self.voice_pub.publish(voice_event(stamp(t0 + t), what))
            self._decide(self.turns.voice(what, t0 + t).voice, cause=f"voice {what}")

    def _publish_event(self, event, t0: float) -> None:
        if event.kind is Heard.PARTIAL:
            self.publish_partial(event.text)
        else:
            self.publish_final(event.text, t0 + event.t_speech_end)

    def _speak_texts(self, texts: list[str]) -> None:
        """The simulated user: each text at the configured rate, then wait for the reply."""
        self._wait_for_listeners(need_tts=self.p["asr.text.wait_for_reply"])
        rate = self.p["asr.text.chars_per_minute"] / 60.0
        for text in texts:
            self.state = AsrState.PAUSE
            if self._stopping.wait(self.p["asr.text.gap_s"]):
                return
            self.state = AsrState.SPEAKING
            partials, t_end = text_partials(text, rate)
            t0 = time.time()
            for t, said in partials:
                self._sleep_until(t0 + t)
                self.publish_partial(said)
            self._sleep_until(t0 + t_end)
            replies = self.replies
            self.publish_final(text, t0 + t_end)
            if self.p["asr.text.wait_for_reply"]:
                self.state = AsrState.WAITING_FOR_REPLY
                self._wait_for(
                    lambda replies=replies: self.replies > replies and not self.robot_speaking, self.p["asr.text.reply_timeout_s"]
                )
        self.state = AsrState.INPUT_FINISHED

    def _wait_for_listeners(self, need_tts: bool) -> None:
        """Start only once predgen_node listens (and tts_node, when a reply is awaited).
        predgen_node hears all three of the user's topics, so each must have a listener."""
        self.state = AsrState.WAITING_FOR_PREDGEN
        publishers = (self.partial_pub, self.speech_end_pub, self.final_pub)
        self._wait_for(lambda: all(pub.get_subscription_count() > 0 for pub in publishers), None)
        # Our writers matched a reader, but DDS matches each side on its own: until predgen_node's
        # readers have matched these writers, what we publish is lost to it (a soak once lost its
        # first question so).  Its heartbeat counts the writers its readers matched: wait until
        # that is every writer of the three topics this node sees (its own among them).
        self._wait_for(lambda: self._subscriber_nodes(self.speech_end_pub), None)
        if PEER in self._subscriber_nodes(self.speech_end_pub):
            writers = lambda: min(self.count_publishers(pub.topic_name) for pub in publishers)  # noqa: E731
            self._wait_for(lambda: int(self.predgen.values.get("asr_writers_matched", "0")) >= writers(), None)
        if need_tts:
            self.state = AsrState.WAITING_FOR_TTS
            hears_tts = self._listening[0]  # robot_speaking: matched, so no reply's end is missed
            self._wait_for(lambda: hears_tts.get_publisher_count() > 0, None)

    def _subscriber_nodes(self, publisher) -> set[str]:
        """The nodes of `publisher`'s topic's subscriptions; empty until each one's name is known
        (the graph names an endpoint some time after DDS matched it)."""
        names = {info.node_name for info in self.get_subscriptions_info_by_topic(publisher.topic_name)}
        return set() if UNKNOWN_NODE in names else names

    def _wait_for(self, condition, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.time() + timeout
        while not condition():
            if self._stopping.wait(0.05) or (deadline and time.time() > deadline):
                if deadline and time.time() > deadline:
                    self.get_logger().warning(f"no reply within asr.text.reply_timeout_s={timeout:g} s; going on")
                return False
        return True

    def _sleep_until(self, t: float) -> None:
        self._stopping.wait(max(0.0, t - time.time()))

    # ----------------------------------------------------------- diagnostics
    def health(self):
        level, message = self.state.level, self.error or self.state.value
        if self.predgen.lost():
            level, message = max(level, WARN), f"{message}; {self.predgen.describe()}"
        return (
            level,
            message,
            {
                "predgen_reachable": self.predgen.reachable(),
                "backend": self.p["asr.backend"],
                "input": self.p["asr.input"] if self.p["asr.backend"] != "text" else "text",
                "state": self.state.value,
                "utterances": self.utterances,
                "utterances_over_robot_ignored": self.turns.ignored if self.turns else 0,
                "partials": self.partials,
                "robot_speaking": self.robot_speaking,
                **(self.ear.recognizer_load() if self.ear is not None else {}),
                **self._echo_figures(),
                **self._recording(),
            },
        )

    def _echo_figures(self) -> dict:
        if self.ear is None or self.ear.echo is None:
            return {"echo_cancel": "none"}
        hears = "webrtc" if self._hears_reference() else "webrtc (no tts/reference yet: muting as asked)"
        return {"echo_cancel": hears, **self.ear.echo_figures()}

    def _recording(self) -> dict:
        if self.heard_audio is None:
            return {}
        inputs = self.canceller_inputs
        return {
            "utterances_saved": self.heard_audio.count,
            "utterances_not_saved": self.heard_audio.failed,
            **({"canceller_inputs_s": round(inputs.frames / SAMPLE_RATE, 1)} if inputs else {}),
        }


def main(args: list[str] | None = None) -> int:
    return run_node("asr_node", AsrNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
