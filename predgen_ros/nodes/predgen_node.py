"""predgen_node: speculative replies from the user's words so far, committed when the turn ends.

It hears the user on `turn/events` (turn_events.py): one ordered stream of the user's
turns from asr_node's turn owner: words so far, the ending (at a short pause, an eager
one), and, after an eager ending, `reopened` (the user went on: the reply is held, and
withdrawn at their first new word) or `confirmed`.

Subscription callbacks only post to the engine worker's mailbox; the worker
thread runs the model and publishes what each step emits.  One latency report
per turn goes out on `predgen/latency` once tts_node says when the first audio
of the reply reached the speaker (`tts/first_audio`).

It answers every utterance it hears: asr_node's turn owner (turn_taking.py)
publishes only the user's turns, so an acknowledgement or a cough over the robot
never reaches it.  When the user cuts a reply off, tts_node's `tts/played`
replaces the reply in the history.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace

from diagnostic_msgs.msg import DiagnosticArray, KeyValue
from std_msgs.msg import Header, String
from std_srvs.srv import Trigger

from ..engine.backends.llama import threads_beside_speech
from ..engine.config import ConfigError
from ..engine.lm import LanguageModel
from ..engine.metrics import report_entries, turn_measures
from ..engine.models import ModelError, load_language_model
from ..engine.params import ENGINE_PARAMS, engine_config
from ..engine.session import Session
from ..engine.turn import TurnStats
from ..engine.worker import EngineWorker, Event
from ..events import Emission, Heard
from ..turn_events import TurnEventError
from .common import ERROR, OK, TEXT_QOS, WARN, ManagedNode, StartupError, release_free_memory, run_node, seconds, stamp, status
from .messages import candidate, end_probability, first_audio_cached, sentence_of, turn_event_of

# The key-values of each predgen/latency status (docs/guide.md#topics-services-qos).
REPORT_KEYS = (
    "turn",
    "policy",
    "transcript",
    "first_sentence",
    "history_turns",
    "previous_reply",
    "prompt_tokens",
    "t_end_of_speech",
    "t_final_transcript",
    "t_commit",
    "t_first_audio",
    "audio_latency_s",
    "ttfs_s",
    "endpoint_s",
    "llm_after_final_s",
    "tts_s",
    "first_audio_cached",
    "nfe_tfs",
    "accepted_tokens",
    "candidate_tokens",
    "rounds",
    "input_nfe",
    "input_llm_s",
    "guess_nfe",
    "end_probability",
    "end_scored_partials",
    "decode_tokens",
    "decode_s",
    "jacobi_passes",
    "jacobi_tokens",
)
FIRST_AUDIO_TIMEOUT_S = 10.0  # report a turn without first-audio time after this long


@dataclass
class PendingReport:
    number: int
    turn: TurnStats
    t_first_audio: float | None = None
    first_audio_cached: bool | None = None


class PredgenNode(ManagedNode):
    def __init__(self):
        super().__init__("predgen_node", ENGINE_PARAMS)
        self.candidate_pub = self.create_publisher(String, "predgen/candidate", TEXT_QOS)
        self.say_pub = self.create_publisher(String, "tts/say", TEXT_QOS)
        self.response_pub = self.create_publisher(String, "predgen/response", TEXT_QOS)
        self.latency_pub = self.create_publisher(DiagnosticArray, "predgen/latency", TEXT_QOS)
        self.end_probability_pub = self.create_publisher(KeyValue, "turn/end_probability", TEXT_QOS)
        self.lm: LanguageModel | None = None
        self.session: Session | None = None
        self.worker: EngineWorker | None = None
        self._listening = []
        self._hearing = None  # turn/events
        self.turns = 0
        self.ignored = 0
        self._pending: list[PendingReport] = []
        self._lock = threading.Lock()
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_timer(1.0, self._report_overdue)

    # ------------------------------------------------------------- lifecycle
    def configure(self) -> None:
        """Load the model (the slow, memory-heavy step) and make the session."""
        try:
            config, model_params = engine_config(self.p)
        except ConfigError as err:
            raise StartupError(str(err)) from None
        if model_params.threads == 0:  # the ASR and the TTS run beside the LLM: leave them a core
            model_params = replace(model_params, threads=threads_beside_speech())
        try:
            self.lm = load_language_model(model_params)
        except ModelError as err:
            raise StartupError(
                f"{err} [model.path={model_params.path or '(embedded)'}, model.backend={model_params.backend}, model.device={model_params.device}]"
            ) from None
        self.session = Session(self.lm, config, time.time)

    def activate(self) -> None:
        self.worker = EngineWorker(self.session, self._on_emission)
        self.worker.start()
        # Subscriptions last: asr_node starts talking once it hears this one.
        self._hearing = self.create_subscription(String, "turn/events", self._on_turn_event, TEXT_QOS)
        self._listening = [
            self._hearing,
            self.create_subscription(Header, "tts/first_audio", self._on_first_audio, TEXT_QOS),
            self.create_subscription(String, "tts/played", self._on_played, TEXT_QOS),
        ]
        config = self.session.config
        self.get_logger().info(
            f"ready (active): policy={config.policy} verifier={config.verifier.describe()} decoder={config.decoder} {self.lm.describe()}"
        )

    def deactivate(self) -> None:
        """Stop hearing the user and stop the worker; the model stays loaded."""
        for subscription in self._listening:
            self.destroy_subscription(subscription)
        self._listening, self._hearing = [], None
        self.worker.stop()
        self.worker = None

    def cleanup(self) -> None:
        self.session = self.lm = None

    # ------------------------------------------------------------ callbacks
    def _on_turn_event(self, msg: String) -> None:
        try:
            event = turn_event_of(msg)
        except TurnEventError as err:
            self._ignore(f"turn/events message: {err}")
            return
        self.worker.mailbox.post(Event(Heard.TURN, event, t=time.time()))

    def _on_played(self, msg: String) -> None:
        self.worker.mailbox.post(Event(Heard.PLAYED, text=msg.data))

    def _on_reset(self, request, response):
        if self.worker is not None:
            self.worker.mailbox.post(Event(Heard.RESET))
        elif self.session is not None:
            self.session.reset()  # inactive: no worker shares the session
        else:
            response.success, response.message = False, f"predgen_node is {self.lifecycle_state}: configure it first"
            return response
        response.success, response.message = True, "history cleared"
        self.get_logger().info("history cleared (~/reset)")
        return response

    def _ignore(self, what: str) -> None:
        """Bad input is counted and logged (at most every 5 s), never raised."""
        self.ignored += 1
        self.get_logger().warning(f"ignored {what}", throttle_duration_sec=5.0)

    # ------------------------------------------------- engine (worker thread)
    def _on_emission(self, kind: Emission, text: str, turn: TurnStats) -> None:
        if not self.context.ok():
            return  # a stop signal shut the context while a turn was being decoded: nothing to publish to
        if kind in (Emission.CANDIDATE, Emission.BEGINNING):
            self.candidate_pub.publish(candidate(text, finished=kind is Emission.CANDIDATE))
        elif kind is Emission.END_PROBABILITY:  # key: the partial; value: P(the user is done after it)
            self.end_probability_pub.publish(end_probability(text, turn.end_probabilities[-1][1]))
        elif kind is Emission.COMMIT:
            self._on_commit(text, turn)
        elif kind is Emission.SENTENCE:
            self.say_pub.publish(String(data=text))
        elif kind is Emission.DONE:
            self.response_pub.publish(String(data=text))
            self.say_pub.publish(String(data=""))  # end of this reply
            release_free_memory()
        elif kind is Emission.INTERRUPTED:
            self.say_pub.publish(String(data=""))
            release_free_memory()
        elif kind is Emission.NOTICE:  # the served model failed: a short apology instead of the reply
            self.say_pub.publish(String(data=text))
            self.say_pub.publish(String(data=""))

    def _on_commit(self, text: str, turn: TurnStats) -> None:
        self.turns += 1
        report = PendingReport(self.turns, turn)
        if text:
            with self._lock:
                self._pending.append(report)
            self.say_pub.publish(String(data=text))
        else:
            self._publish_report(report)  # nothing to say: no audio to wait for

    # ------------------------------------------------------------- reports
    def _on_first_audio(self, msg: Header) -> None:
        with self._lock:
            report = next((r for r in self._pending if r.turn.first_sentence == sentence_of(msg)), None)
            if report is None:
                return
            self._pending.remove(report)
        report.t_first_audio = seconds(msg.stamp)
        report.first_audio_cached = first_audio_cached(msg)
        self._publish_report(report)

    def _report_overdue(self) -> None:
        now = time.time()
        with self._lock:
            overdue = [r for r in self._pending if now - r.turn.t_commit > FIRST_AUDIO_TIMEOUT_S]
            self._pending = [r for r in self._pending if r not in overdue]
        for report in overdue:
            self._publish_report(report)

    def _publish_report(self, report: PendingReport) -> None:
        turn = report.turn
        t_end = turn.t_speech_end if turn.t_speech_end is not None else turn.t_final  # an ending without its stamp: its arrival
        first_audio = report.t_first_audio if report.t_first_audio is not None else math.nan
        measures = turn_measures(turn, t_end, first_audio)
        values = {
            "turn": report.number,
            "policy": self.p["policy"],
            "transcript": turn.user_text,
            "first_sentence": turn.first_sentence,
            "history_turns": turn.history_turns,
            "previous_reply": turn.previous_reply,
            "prompt_tokens": len(turn.prompt_ids),
            "t_end_of_speech": t_end,
            "t_final_transcript": turn.t_final,
            "t_commit": turn.t_commit,
            "t_first_audio": first_audio,
            **report_entries(measures),
            "first_audio_cached": "" if report.first_audio_cached is None else report.first_audio_cached,
            "end_probability": turn.end_probabilities[-1][1] if turn.end_probabilities else math.nan,
            "end_scored_partials": len(turn.end_probabilities),
        }
        if not turn.first_sentence:
            level, message = OK, f"turn {report.number}: empty reply, nothing to say"
        elif math.isnan(first_audio):
            level, message = WARN, f"turn {report.number}: no tts/first_audio within {FIRST_AUDIO_TIMEOUT_S:g} s"
        else:
            level, message = OK, f"turn {report.number}: audio latency {measures['audio_latency_s']:.3f} s"
        msg = DiagnosticArray()
        msg.header.stamp = stamp(time.time())
        msg.status = [status("/predgen_ros/predgen_node/turn", level, message, values)]
        self.latency_pub.publish(msg)

    # ----------------------------------------------------------- diagnostics
    def health(self):
        """A configured node's state; the worker's figures while it is active."""
        worker = self.worker
        values = {
            "policy": self.session.config.policy,
            **self.lm.backend.describe(),
            "turns": self.turns,
            "history_turns": len(self.session.history),
            "busy": bool(worker and worker.busy()),
            "mailbox": len(worker.mailbox) if worker else 0,
            "partials_replaced": worker.mailbox.replaced if worker else 0,
            "ignored_messages": self.ignored,
            "engine_errors": worker.errors if worker else 0,
            "finals_not_taken": worker.finals_not_taken if worker else 0,  # endings sent again, or stale
            "forward_passes": self.lm.stats.passes,
            "say_subscribers": self.say_pub.get_subscription_count(),  # tts_nodes this node's replies reach
            # the writers its turn/events reader has matched: asr_node starts once this counts its own
            # (what it publishes before, this node misses)
            "turn_writers_matched": self._hearing.get_publisher_count() if self._hearing is not None else 0,
        }
        if worker is None:
            return OK, "model loaded, not listening", values
        if not worker.alive:
            return ERROR, "engine worker stopped", values
        if worker.errors:
            return WARN, f"{worker.errors} engine error(s), see the log", values
        return OK, "generating" if worker.busy() else "idle", values


def main(args: list[str] | None = None) -> int:
    return run_node("predgen_node", PredgenNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
