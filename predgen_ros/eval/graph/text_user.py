"""text_user: a simulated user who types each text at a speaking rate, in place of asr_node.

An evaluation stand-in for the ear (`--asr-backend text` in bringup, the demo, the launch
file and `make stress`): it says each text as turn/events (the words as they come, then the
ending at the last character) and waits for the robot's answer (`robot_speaking`) before the
next.  No audio, no recognizer, no turn owner: it never speaks over the robot.  Its state on
/diagnostics says when it is done ("input finished"), which the graph tools wait for.
"""

from __future__ import annotations

import threading
import time
from enum import Enum

from std_msgs.msg import Bool, String

from ...audio.recognition.text_asr import CHARS_PER_MINUTE, QuestionError, load_questions, text_partials
from ...nodes.common import ERROR, OK, TEXT_QOS, WARN, ManagedNode, StartupError, run_node
from ...nodes.listeners import wait_for_predgen
from ...nodes.messages import turn_event
from ...nodes.peer_watch import PeerWatch
from ...nodes.waiting import Waits
from ...os_threads import name_thread
from ...turn_events import TurnEventWriter

TEXT_PARAMS = {
    "text.source": ("", "MT-Bench .jsonl or a text file, one utterance a line; empty = MT-Bench turn 1"),
    "text.limit": (0, "only the first N utterances; 0 = all"),
    "text.chars_per_minute": (CHARS_PER_MINUTE, "speaking rate"),
    "text.wait_for_reply": (True, "wait until the robot has answered before the next utterance"),
    "text.reply_timeout_s": (120.0, "give up waiting for a reply after this long (s)"),
    "text.gap_s": (1.0, "silence before each utterance (s)"),
}


class UserState(Enum):
    """The value is what /diagnostics reports."""

    IDLE = "idle"
    WAITING_FOR_PREDGEN = "waiting for predgen_node"
    WAITING_FOR_TTS = "waiting for tts_node"
    PAUSE = "pause"  # the silence before an utterance
    SPEAKING = "speaking"
    WAITING_FOR_REPLY = "waiting for the reply"
    INPUT_FINISHED = "input finished"
    ERROR = "error"


class TextUserNode(ManagedNode):
    def __init__(self):
        super().__init__("text_user", TEXT_PARAMS)
        self.turn_pub = self.create_publisher(String, "turn/events", TEXT_QOS)
        self.predgen = PeerWatch(self)
        self.state, self.error = UserState.IDLE, ""
        self.texts: list[str] = []
        self.utterances = self.replies = 0
        self.robot_speaking = False
        self._stopping = threading.Event()
        self.waits = Waits(self._stopping)  # cut short when the node deactivates
        self._speaking_sub = None
        self.thread: threading.Thread | None = None

    def configure(self) -> None:
        try:
            questions = load_questions(self.p["text.source"] or None, self.p["text.limit"] or None)
        except QuestionError as err:
            raise StartupError(f"text.source: {err}") from None
        self.texts = [q.text for q in questions]

    def activate(self) -> None:
        self._stopping.clear()
        self._speaking_sub = self.create_subscription(Bool, "robot_speaking", self._on_robot_speaking, TEXT_QOS)
        self.thread = threading.Thread(target=self._guarded, name="text-user", daemon=True)
        self.thread.start()

    def deactivate(self) -> None:
        self._stopping.set()
        self.thread.join(2.0)
        self.destroy_subscription(self._speaking_sub)
        self.state = UserState.IDLE

    def _on_robot_speaking(self, msg: Bool) -> None:
        self.replies += self.robot_speaking and not msg.data
        self.robot_speaking = msg.data

    def _guarded(self) -> None:
        name_thread()
        try:
            self._speak_all()
        except Exception as err:  # keep the node (and its diagnostics) alive
            self.state, self.error = UserState.ERROR, f"{type(err).__name__}: {err}"
            self.get_logger().error(f"text user failed: {self.error}")

    def _speak_all(self) -> None:
        """Each text: a pause, its words at the speaking rate, its ending; then its reply."""
        p, user = self.p, TurnEventWriter()
        self.state = UserState.WAITING_FOR_PREDGEN
        if not wait_for_predgen(self, self.waits, (self.turn_pub,), self.predgen):
            return
        if p["text.wait_for_reply"]:  # robot_speaking matched: no reply's end is missed
            self.state = UserState.WAITING_FOR_TTS
            if not self.waits.until(lambda: self._speaking_sub.get_publisher_count() > 0):
                return
        rate = p["text.chars_per_minute"] / 60.0
        for text in self.texts:
            self.state = UserState.PAUSE
            if self._stopping.wait(p["text.gap_s"]):
                return
            self.state = UserState.SPEAKING
            partials, t_end = text_partials(text, rate)
            t0 = time.time()
            for t, said in partials:
                self.waits.sleep_until(t0 + t)
                if said.split():
                    self._publish(user.words(" ".join(said.split()), time.time()))
            self.waits.sleep_until(t0 + t_end)
            replies = self.replies
            self._publish(user.final(text, t0 + t_end, may_continue=False, handed_on=True))
            self.utterances += 1
            if p["text.wait_for_reply"]:
                self._wait_for_reply(replies)
        self.state = UserState.INPUT_FINISHED

    def _wait_for_reply(self, replies: int) -> None:
        self.state = UserState.WAITING_FOR_REPLY
        timeout = self.p["text.reply_timeout_s"]
        answered = lambda: self.replies > replies and not self.robot_speaking  # noqa: E731
        if not self.waits.until(answered, timeout) and not self._stopping.is_set():
            self.get_logger().warning(f"no reply within text.reply_timeout_s={timeout:g} s; going on")

    def _publish(self, events) -> None:
        for event in events:
            self.turn_pub.publish(turn_event(event))

    def health(self):
        waiting = self.state in (UserState.WAITING_FOR_PREDGEN, UserState.WAITING_FOR_TTS)
        level = ERROR if self.state is UserState.ERROR else WARN if waiting else OK
        values = {
            "state": self.state.value,
            "utterances": self.utterances,
            "of": len(self.texts),
            "robot_speaking": self.robot_speaking,
            "predgen_reachable": self.predgen.reachable(),
        }
        return level, self.error or self.state.value, values


def main(args: list[str] | None = None) -> int:
    return run_node("text_user", TextUserNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
