"""The user of the eager end-of-turn graph tests (test_eager_end_graph, test_eager_end_echo_graph):
a microphone on audio/user at real time, and what the graph heard of it."""

from __future__ import annotations

import time

import numpy as np

from predgen_ros.audio.pcm import SAMPLE_RATE
from predgen_ros.eval.barge_in.interruptions import CHUNK_S, REPLY_TIMEOUT_S, Recorder
from predgen_ros.turn_taking import CUT_OFF_MARK

# Every pause of 0.2 s ends the turn eagerly (Smart Turn always says complete), and the user may
# go on for 3 s of the stream after it.  The test holds the audio while it waits for the robot,
# so the stream's clock, and with it the window, stands still however slow the machine is.
EAGER = {
    "asr.endpoint.policy": "smart_turn",
    "asr.endpoint.pause_s": 0.2,
    "asr.endpoint.audio_threshold": 1e-6,
    "asr.endpoint.max_silence_s": 3.0,
}


class User:
    """The user at the microphone: 20 ms chunks on audio/user at real time, and heard finals
    and voice events (asr/final, asr/voice) as they arrive, and the turn stream (turn/events)."""

    def __init__(self, rec: Recorder):
        from std_msgs.msg import Header, Int16MultiArray, String

        from predgen_ros.nodes.common import TEXT_QOS
        from predgen_ros.nodes.messages import turn_event_of, voice_kind

        self.rec = rec
        self.pub = rec.node.create_publisher(Int16MultiArray, "audio/user", TEXT_QOS)
        self.heard: list[tuple[str, str]] = []  # ("final", text) and ("voice", kind) in arrival order
        self.turns = []  # turn/events, in order
        rec.node.create_subscription(String, "asr/final", lambda m: self.heard.append(("final", m.data)), TEXT_QOS)
        rec.node.create_subscription(Header, "asr/voice", lambda m: self.heard.append(("voice", voice_kind(m))), TEXT_QOS)
        rec.node.create_subscription(String, "turn/events", lambda m: self.turns.append(turn_event_of(m)), TEXT_QOS)

    def turn_stream(self) -> list[tuple[str, int]]:
        """The turn events but for the words: (kind, utterance)."""
        return [(e.kind.value, e.utterance) for e in self.turns if e.kind != "text"]

    def say(self, pcm: np.ndarray, then_until, timeout: float = REPLY_TIMEOUT_S) -> None:
        """`pcm`, then silence until `then_until()` holds."""
        from predgen_ros.nodes.messages import audio_chunk

        size = int(CHUNK_S * SAMPLE_RATE)
        t = time.time()

        def send(chunk: np.ndarray) -> None:
            nonlocal t
            self.pub.publish(audio_chunk(chunk.astype(np.int16), SAMPLE_RATE))
            t += CHUNK_S
            self.rec.spin_for(max(0.0, t - time.time()))

        for at in range(0, len(pcm), size):
            send(pcm[at : at + size])
        deadline = time.time() + timeout
        while not then_until():
            assert time.time() < deadline, f"timed out; heard so far: {self.heard}"
            send(np.zeros(size))

    def finals(self) -> list[str]:
        return [text for what, text in self.heard if what == "final"]

    def contract(self) -> list[str]:
        """The contract's words in order, the i-th on the i-th final (each topic keeps its order)."""
        return [kind for what, kind in self.heard if what == "voice" and kind in ("confirmed", "resumed")]


def fresh(rec: Recorder, user: User) -> tuple[int, int, int]:
    rec.wait_quiet()
    rec.clear_history()
    user.heard.clear()
    user.turns.clear()
    return len(rec.reports), len(rec.voice), len(rec.played)


def eager_start(rec: Recorder, user: User, pcm: np.ndarray) -> None:
    """The user says `pcm`; once its final is heard the robot must begin its eager reply."""
    user.say(pcm, then_until=lambda: user.finals())
    assert rec.wait_for(lambda: rec.is_speaking, REPLY_TIMEOUT_S), (
        "the robot never began its eager reply",
        user.heard,
        user.turn_stream(),
    )


def continuation_answered_once(rec: Recorder, user: User, piper_voice, heard_word: str | None = "france") -> None:
    """More words after an eager start stop the reply, and the whole is answered once; the
    history keeps only what was played.  `heard_word`: a word the continuation must be
    heard with (None: any word that extends the cut)."""
    reports, voice, played = fresh(rec, user)
    eager_start(rec, user, piper_voice("What is the capital"))
    user.say(piper_voice("of France?"), then_until=lambda: len(user.contract()) == 2)
    rec.wait_quiet()
    assert len(user.finals()) == 2, (user.heard, user.turn_stream())
    cut, whole = user.finals()
    assert whole.lower().startswith(cut.lower()) and len(whole.split()) > len(cut.split()), user.heard
    assert heard_word is None or heard_word in whole.lower(), user.heard
    assert user.contract() == ["resumed", "confirmed"], user.heard
    # one utterance on the turn stream: ended early, reopened, its words extended under its number, confirmed
    n = user.turns[0].utterance
    assert user.turn_stream() == [("opened", n), ("ended_early", n), ("reopened", n), ("ended_early", n), ("confirmed", n)]
    assert [e.text for e in user.turns if e.kind == "ended_early"] == [cut, whole]
    assert "stop" in [what for _, what in rec.voice[voice:]]  # the eager reply stopped
    answers = [r for r in rec.reports[reports:] if r["transcript"] == whole]
    assert len(answers) == 1 and answers[0]["first_sentence"], rec.reports[reports:]
    heard_of_cut = rec.played[played]
    assert heard_of_cut.endswith(CUT_OFF_MARK), rec.played[played:]
    # the history: only what was played, marked cut off; nothing, if none of it was
    assert answers[0]["previous_reply"] == ("" if heard_of_cut == CUT_OFF_MARK else heard_of_cut)


def confirmation_answered_once(rec: Recorder, user: User, piper_voice) -> None:
    """An eager start the user lets stand is answered once, and never again."""
    reports, voice, _ = fresh(rec, user)
    eager_start(rec, user, piper_voice("What is the capital of France?"))
    began = len([on for _, on in rec.speaking if on])
    user.say(np.zeros(0), then_until=lambda: user.contract())
    rec.wait_quiet()
    assert len(user.finals()) == 1 and user.contract() == ["confirmed"], user.heard
    n = user.turns[0].utterance
    assert user.turn_stream() == [("opened", n), ("ended_early", n), ("confirmed", n)]
    assert [r["transcript"] for r in rec.reports[reports:]] == user.finals()  # one answer
    assert len([on for _, on in rec.speaking if on]) == began  # no second reply after the confirmation
    assert not {"pause", "stop"} & {what for _, what in rec.voice[voice:]}
