"""asr_node: the user's turns as one ordered stream, `turn/events` (turn_events.py).

It hosts the ear (audio/ear.py) over its audio source (microphone, `audio/user` or a WAV
file) and the turn owner (turn_taking.py, `turn.*`): speech over the robot is handed on only once it is a turn, and
what the robot's voice does meanwhile goes out on `turn/decision` for tts_node.  What is
handed on is numbered into turn/events; for recordings the same words also go out on
`asr/partial`, `asr/speech_end` and `asr/final`, and every change of the voice on `asr/voice`.

A lifecycle node: configure opens the recognizer and the source (a bad parameter stays
unconfigured with its reason), activate starts hearing, deactivate stops publishing,
cleanup frees the recognizer and closes the microphone.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import KeyValue
from std_msgs.msg import Bool, Header, Int16MultiArray, String

from ..audio.ear import Ear, EarSettings, build_ear
from ..audio.heard_audio import CancellerInputs, HeardAudio
from ..audio.pcm import AsrError, to_pcm16k
from ..os_threads import name_thread
from ..turn_events import TurnEvent, TurnEventWriter
from ..turn_taking import TurnOwner, Voice, turn_owner, words
from .asr_params import ASR_PARAMS, ear_settings
from .asr_state import AsrState
from .audio_input import AudioInput, open_audio_input
from .common import AUDIO_QOS, TEXT_QOS, WARN, ManagedNode, StartupError, run_node, stamp
from .hearing_loop import HearingLoop
from .listeners import wait_for_predgen
from .messages import audio_rate, played_at, speech_end, turn_decision, turn_event, voice_event
from .microphone_check import MicrophoneCheck
from .peer_watch import PeerWatch
from .waiting import Waits


class AsrNode(ManagedNode):
    def __init__(self):
        super().__init__("asr_node", ASR_PARAMS)
        self.partial_pub = self.create_publisher(String, "asr/partial", TEXT_QOS)
        self.final_pub = self.create_publisher(String, "asr/final", TEXT_QOS)
        self.speech_end_pub = self.create_publisher(Header, "asr/speech_end", TEXT_QOS)
        self.voice_pub = self.create_publisher(Header, "asr/voice", TEXT_QOS)  # the voice's start/end: turn_taking.py
        self.decision_pub = self.create_publisher(Header, "turn/decision", TEXT_QOS)  # what tts_node's voice does
        self.turn_pub = self.create_publisher(String, "turn/events", TEXT_QOS)  # the user's turns, in order
        self.turn_events = TurnEventWriter()
        self.turns: TurnOwner | None = None
        self._due = None  # timer: a pause that lasted turn.resume_s resumes
        self.ear: Ear | None = None  # the hearing chain (audio/ear.py), audio backends
        self.predgen = PeerWatch(self)  # on a split robot, the other host may go away
        self.microphone = MicrophoneCheck()  # asr.input topic: what arrives on audio/user
        self._watch = None  # timer: a gap in audio/user, a robot_speaking without its writer
        self.robot_speaking = False
        self.replies = 0  # robot_speaking true -> false transitions seen
        self.utterances = 0
        self.partials = 0
        self.state = AsrState.IDLE
        self.error = ""
        self._last_partial = ""
        self._stopping = threading.Event()
        self.waits = Waits(self._stopping)  # cut short when the node deactivates
        self._source = None  # configured: runs the source until it ends or the node deactivates
        self.audio_in: AudioInput | None = None  # audio backends: asr.input
        self.heard_audio: HeardAudio | None = None  # asr.record_dir
        self.canceller_inputs: CancellerInputs | None = None  # asr.record_dir, with the echo canceller
        self.loop: HearingLoop | None = None  # audio backends: the source thread's body
        self._reference_sub = None
        self._listening = []
        self.thread: threading.Thread | None = None

    # ------------------------------------------------------------- lifecycle
    def configure(self) -> None:
        try:
            self.turns = turn_owner(self.p)
            settings = ear_settings(self.p)  # every asr.* setting checked, whatever the backend
        except (AsrError, ValueError) as err:
            raise StartupError(str(err)) from None
        self._source = self._open_source(settings)

    def activate(self) -> None:
        self._stopping.clear()
        self.state, self.error = AsrState.STARTING, ""
        self._listening = [  # robot_speaking first: wait_for_listeners reads it
            self.create_subscription(Bool, "robot_speaking", self._on_robot_speaking, TEXT_QOS),
            self.create_subscription(KeyValue, "turn/end_probability", self._on_end_probability, TEXT_QOS),
        ]
        if self.audio_in is not None and self.audio_in.topic is not None:
            self._listening.append(self.create_subscription(Int16MultiArray, "audio/user", self._on_audio, TEXT_QOS))
        if self.ear is not None and self.ear.echo is not None:
            self._reference_sub = self.create_subscription(Int16MultiArray, "tts/reference", self._on_reference, AUDIO_QOS)
            self._listening.append(self._reference_sub)
        self._due = self.create_timer(0.02, lambda: self._decide(self.turns.due(), cause="no turn within turn.resume_s"))
        self._watch = self.create_timer(0.5, self._on_watch)
        self.thread = threading.Thread(target=self._guarded, args=(self._source,), name="asr-source", daemon=True)
        self.thread.start()
        echo = self.p["asr.echo_cancel"] if self.ear is not None and self.ear.echo is not None else "none"
        self.get_logger().info(f"ready (active): backend={self.p['asr.backend']} input={self.p['asr.input']} echo_cancel={echo}")

    def deactivate(self) -> None:
        self._stopping.set()
        self.thread.join(2.0)
        for subscription in self._listening:
            self.destroy_subscription(subscription)
        self._listening = []
        self.destroy_timer(self._due)
        self.destroy_timer(self._watch)
        self.microphone.stop()
        self.state = AsrState.IDLE

    def cleanup(self) -> None:
        if self.audio_in is not None and self.audio_in.close is not None:
            self.audio_in.close()
        if self.canceller_inputs is not None:
            self.canceller_inputs.close()
        if self.ear is not None:
            self.ear.close()
        self._source = self.audio_in = self.ear = None

    # ---------------------------------------------------------------- set-up
    def _open_source(self, settings: EarSettings):
        """A callable that produces the utterances; errors name the parameter at fault."""
        try:
            if self.p["asr.record_dir"]:
                self.heard_audio = HeardAudio(Path(self.p["asr.record_dir"]).expanduser())
            self.ear = build_ear(settings, on_utterance=self._heard if self.heard_audio else None)
        except (AsrError, ValueError) as err:
            raise StartupError(str(err)) from None
        if self.heard_audio is not None and self.ear.echo is not None:
            self.canceller_inputs = CancellerInputs(self.heard_audio.folder)
            self.ear.echo.tap = self.canceller_inputs.frame
        chunk_s = self.p["asr.chunk_ms"] / 1000.0
        try:
            self.audio_in = open_audio_input(self.p["asr.input"], self.p["asr.device"], chunk_s, self._stopping)
        except AsrError as err:
            raise StartupError(f"asr.input: {err}") from None
        self.loop = HearingLoop(self, self.ear, self.audio_in, chunk_s)
        return self.loop

    def _heard(self, pcm: bytes, final: str, t_speech_end: float) -> None:
        self.heard_audio.utterance(pcm, final, self.loop.stream_t0 + t_speech_end)

    def _on_audio(self, msg: Int16MultiArray) -> None:
        if self.state not in (AsrState.LISTENING, AsrState.MUTED):
            return  # not listening yet: stale audio would be heard late, with wrong times
        pcm, lines = self.microphone.chunk(np.asarray(msg.data, dtype=np.int16), audio_rate(msg), time.time())
        for line in lines:
            self.get_logger().warning(line)
        if pcm is not None:
            self.audio_in.topic.put(pcm)

    def _on_watch(self) -> None:
        """A robot said to speak by a writer that is gone (tts_node died mid-reply, and no
        other says so) is silent; a gap in audio/user is said while it lasts."""
        if self.robot_speaking and self._listening[0].get_publisher_count() == 0:
            self.get_logger().warning("robot_speaking lost its writer mid-reply (tts_node gone): taking the robot as silent")
            self._on_robot_speaking(Bool(data=False))
        topic = self.audio_in is not None and self.audio_in.topic is not None
        hearing = topic and self.state in (AsrState.LISTENING, AsrState.MUTED)
        if hearing and (line := self.microphone.silence(time.time())):
            self.get_logger().warning(line)

    def _on_reference(self, msg: Int16MultiArray) -> None:
        """What the loudspeaker played: the echo canceller's reference (audio/echo/canceller.py)."""
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
            self._publish_turn(self.turn_events.words(text, time.time()))

    def publish_final(self, text: str, t_speech_end: float, may_continue: bool = False) -> None:
        """The utterance's end of speech and final, when the turn owner says it is a turn
        (`may_continue`: an early end of turn, the user may still go on)."""
        text = " ".join(text.split()) or self._last_partial
        self._last_partial = ""
        if not text:
            return
        ruling = self.turns.final(text)
        self._decide(ruling.voice, text)
        self._publish_turn(self.turn_events.final(text, t_speech_end, may_continue, ruling.hand_on))
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

    def publish_voice(self, what: str, t: float) -> None:
        """A change of the user's voice at wall time `t`, and the turn owner's word on it."""
        self.voice_pub.publish(voice_event(stamp(t), what))
        self._decide(self.turns.voice(what, t).voice, cause=f"voice {what}")
        self._publish_turn(self.turn_events.voice(what, t))

    def _publish_turn(self, events: list[TurnEvent]) -> None:
        for event in events:
            self.turn_pub.publish(turn_event(event))

    def mutes(self) -> bool:
        """Whether the robot's voice deafens the node (asked, and no echo canceller can work)."""
        return self.p["asr.mute_while_robot_speaks"] and not self._hears_reference()

    def wait_for_listeners(self, need_tts: bool) -> None:
        """Start only once predgen_node listens (and tts_node, when a reply is awaited)."""
        self.state = AsrState.WAITING_FOR_PREDGEN
        wait_for_predgen(self, self.waits, (self.turn_pub,), self.predgen)
        if need_tts:
            self.state = AsrState.WAITING_FOR_TTS
            hears_tts = self._listening[0]  # robot_speaking: matched, so no reply's end is missed
            self.waits.until(lambda: hears_tts.get_publisher_count() > 0)

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
                "input": self.p["asr.input"],
                "state": self.state.value,
                "utterances": self.utterances,
                "utterances_over_robot_ignored": self.turns.ignored if self.turns else 0,
                "partials": self.partials,
                "robot_speaking": self.robot_speaking,
                "ear_settled": self.ear.asr.settled if self.ear is not None else True,  # nothing heard on its way
                **(self.ear.recognizer_load() if self.ear is not None else {}),
                **self._echo_figures(),
                **(self.microphone.figures() if self.audio_in is not None and self.audio_in.topic is not None else {}),
                **(self.heard_audio.figures(self.canceller_inputs) if self.heard_audio is not None else {}),
            },
        )

    def _echo_figures(self) -> dict:
        if self.ear is None or self.ear.echo is None:
            return {"echo_cancel": "none"}
        hears = "webrtc" if self._hears_reference() else "webrtc (no tts/reference yet: muting as asked)"
        return {"echo_cancel": hears, **self.ear.echo_figures()}


def main(args: list[str] | None = None) -> int:
    return run_node("asr_node", AsrNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
