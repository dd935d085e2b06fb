"""The reply player's states without ROS: a fake voice (one sample per character) and a recording sink."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from predgen_ros.audio.speech.player import PlayerEvents, PlayerState, ReplyPlayer
from predgen_ros.audio.speech.sinks import NullSink
from predgen_ros.audio.speech.tts import Speech

RATE = 1000  # samples a second: a 50 ms chunk is 50 samples


class Voice:
    """Each character becomes 10 samples of its code; the opening is the first word."""

    sample_rate = RATE

    def __init__(self, fail_on: str = ""):
        self.fail_on = fail_on
        self.synthesized: list[str] = []
        self.done = threading.Event()  # a piece was synthesized

    def pieces(self, sentence: str) -> list[str]:
        head, _, rest = sentence.partition(" ")
        return [head + " ", rest] if rest else [head]

    def opening_ahead(self, words: str, finished: bool = True) -> str | None:
        pieces = self.pieces(words)
        return pieces[0] if finished or len(pieces) > 1 else None

    def cached(self, piece: str) -> bool:
        return piece in self.synthesized

    def synthesize(self, piece: str) -> Speech:
        if self.fail_on and self.fail_on in piece:
            raise RuntimeError(f"cannot say {piece!r}")
        self.synthesized.append(piece)
        self.done.set()
        return Speech(np.repeat(np.array([ord(c) for c in piece], dtype=np.int16), 10), RATE)


class Recorder(NullSink):
    def __init__(self, block: threading.Event | None = None):
        self.replies: list[list[int]] = []
        self.block = block  # play() waits on it: the test decides when a chunk has played
        self.chunks = threading.Semaphore(0)

    def begin(self, name, sample_rate):
        self.replies.append([])

    def play(self, chunk):
        self.replies[-1] += chunk.tolist()
        self.chunks.release()
        if self.block is not None:
            self.block.wait(5.0)

    def text(self, reply: int) -> str:
        return "".join(chr(v) for v in self.replies[reply][::10])


class Log(PlayerEvents):
    def __init__(self):
        self.seen: list[tuple] = []
        self.changed = threading.Condition()
        super().__init__(
            speaking=lambda on: self._add("speaking", on),
            first_audio=lambda t, sentence, cached: self._add("first_audio", sentence, cached),
            interruption=lambda t, what: self._add(what),
            played=lambda heard: self._add("played", heard),
            failed=lambda err: self._add("failed", str(err)),
        )

    def _add(self, *event):
        with self.changed:
            self.seen.append(event)
            self.changed.notify_all()

    def wait_for(self, event: tuple) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: event in self.seen, 10.0), f"{event} never came: {self.seen}"


@pytest.fixture
def play():
    players = []

    def start(voice=None, sink=None):
        log = Log()
        player = ReplyPlayer(voice or Voice(), sink or Recorder(), log, chunk_ms=50, realtime=False)
        thread = threading.Thread(target=player.run, daemon=True)
        thread.start()
        players.append((player, thread))
        return player, log

    yield start
    for player, thread in players:
        player.shutdown()
        thread.join(5.0)


def wait_until(condition, timeout: float) -> bool:
    """True once `condition` holds; False after `timeout` s (a generous bound, not a window)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_reply_plays_every_sentence_in_order_then_ends(play):
    sink = Recorder()
    player, log = play(sink=sink)
    for sentence in ("Hello there.", "How are you?", ""):
        player.say(sentence)
    log.wait_for(("speaking", False))
    assert sink.text(0) == "Hello there.How are you?"
    assert log.seen == [("speaking", True), ("first_audio", "Hello there.", False), ("speaking", False)]
    assert player.state is PlayerState.IDLE and player.sentences == 2
    assert player.synthesized_s == pytest.approx(len(sink.replies[0]) / RATE)  # what it made is what it said


def test_a_foreseen_opening_is_ready_and_reported_cached(play):
    voice = Voice()
    player, log = play(voice=voice)
    player.foresee("Sure thing.")
    assert voice.done.wait(10.0)  # the opening is ready before the reply comes
    player.say("Sure thing.")
    player.say("")
    log.wait_for(("speaking", False))
    assert ("first_audio", "Sure thing.", True) in log.seen


def test_a_beginning_is_synthesized_once_its_opening_is_certain_and_the_commit_plays_it_cached(play):
    voice = Voice()
    player, log = play(voice=voice)
    player.foresee("Sure", finished=False)  # one word: the opening is not yet known
    player.foresee("Sure thing", finished=False)  # a word after it: the opening stands
    assert voice.done.wait(10.0)
    assert voice.synthesized == ["Sure "]
    player.say("Sure thing, it is.")
    player.say("")
    log.wait_for(("speaking", False))
    assert ("first_audio", "Sure thing, it is.", True) in log.seen


def test_pause_holds_where_it_paused_and_resume_goes_on_from_there(play):
    gate = threading.Event()
    sink = Recorder(block=gate)
    player, log = play(sink=sink)
    player.say("Paused here and then resumed.")
    player.say("")
    assert sink.chunks.acquire(timeout=10)  # the first chunk is playing
    player.pause()
    gate.set()
    log.wait_for(("pause",))
    assert player.state is PlayerState.PAUSED
    held, waits = len(sink.replies[0]), player.paused_waits
    # nothing plays while paused: the voice has looked three times more for a resume, and played nothing
    assert wait_until(lambda: player.paused_waits >= waits + 3, timeout=10)
    assert not sink.chunks.acquire(blocking=False) and len(sink.replies[0]) == held
    player.resume()
    log.wait_for(("speaking", False))
    assert sink.text(0) == "Paused here and then resumed."  # nothing lost, nothing twice
    assert [e[0] for e in log.seen if e[0] in ("pause", "resume")] == ["pause", "resume"]


def test_stop_cuts_the_reply_says_what_was_heard_and_drops_its_rest(play):
    gate = threading.Event()
    sink = Recorder(block=gate)
    player, log = play(sink=sink)
    player.say("One two three four five six seven eight nine ten.")
    player.say("Never said.")
    assert sink.chunks.acquire(timeout=10)
    player.stop()
    gate.set()
    log.wait_for(("speaking", False))
    heard = next(e[1] for e in log.seen if e[0] == "played")
    assert heard.endswith("—") and "ten" not in heard
    # the work it cost: the stopped sentence (its rest was made ahead), never the sentence dropped
    assert player.synthesized_s == pytest.approx(10 * len("One two three four five six seven eight nine ten.") / RATE)
    assert player.state is PlayerState.DISCARDING
    player.say("")  # the stopped reply's end
    player.say("A new reply.")
    player.say("")
    log.wait_for(("first_audio", "A new reply.", False))
    log.wait_for(("speaking", False))
    assert "Never said." not in "".join(sink.text(i) for i in range(len(sink.replies)))
    assert player.barge_ins == 1


def test_commands_outside_a_reply_change_nothing(play):
    player, log = play()
    player.pause()
    player.stop()
    player.say("Still fine.")
    player.say("")
    log.wait_for(("speaking", False))
    assert not [e for e in log.seen if e[0] in ("pause", "stop", "played")]


def test_a_failing_sentence_loses_its_reply_and_the_next_reply_plays(play):
    player, log = play(voice=Voice(fail_on="broken"))
    player.say("This is broken.")
    player.say("So is the rest.")
    player.say("")
    log.wait_for(("failed", "cannot say 'is broken.'"))
    player.say("Working again.")
    player.say("")
    log.wait_for(("first_audio", "Working again.", False))
    assert not [e for e in log.seen if e == ("first_audio", "So is the rest.", False)]


def test_an_abandoned_reply_ends_and_what_comes_later_is_stale_until_the_user_speaks(play):
    gate = threading.Event()
    sink = Recorder(block=gate)
    player, log = play(sink=sink)
    player.say("Half a reply.")
    assert sink.chunks.acquire(timeout=10)
    player.abandon()
    gate.set()
    log.wait_for(("speaking", False))
    player.say("Late sentence.")
    assert player.stale_dropped == 1
    player.user_spoke()
    player.say("Fresh reply.")
    player.say("")
    log.wait_for(("first_audio", "Fresh reply.", False))


def test_after_an_underrun_the_chunks_play_back_to_back_again():
    """The next sentence came late (still being synthesized): its chunks start now and
    follow each other, never stamped over each other (the echo canceller's reference)."""
    stamps: list[tuple[float, float]] = []  # (when a chunk starts to play, its seconds)
    ended = threading.Event()
    events = PlayerEvents(
        reference=lambda chunk, rate, t: stamps.append((t, len(chunk) / rate)),
        speaking=lambda on: on or ended.set(),
    )
    voice = Voice()
    player = ReplyPlayer(voice, Recorder(), events, chunk_ms=50, realtime=True)
    thread = threading.Thread(target=player.run, daemon=True)
    thread.start()
    try:
        player.say("Hello there.")
        while len(stamps) < 4:  # the first sentence's chunks ("Hello " and "there.", 60 samples each) were handed over
            assert not ended.wait(0.01)
        ended.wait(0.3)  # ...and have played: the schedule lies in the past when the next sentence comes
        first = len(stamps)
        player.say("A late sentence.")
        player.say("")
        assert ended.wait(10.0)
    finally:
        player.shutdown()
        thread.join(5.0)
    assert len(stamps) > first
    for (t, seconds), (t_next, _) in zip(stamps, stamps[1:]):
        assert t_next >= t + seconds - 1e-9, stamps  # a chunk starts once the one before it has played


class SlowCard(Recorder):
    """A sink that takes `per_chunk` seconds of the player's clock to accept each chunk."""

    def __init__(self, per_chunk: float):
        super().__init__()
        self.now = 0.0
        self.per_chunk = per_chunk

    def play(self, chunk):
        super().play(chunk)
        self.now += self.per_chunk


@pytest.mark.parametrize(("per_chunk", "underruns"), [(0.0, 0), (0.04, 4)])
def test_a_sink_slower_than_the_voice_counts_underruns(per_chunk, underruns):
    """20 ms chunks of two 60 ms pieces: a sink that takes 40 ms per chunk leaves a gap
    before every chunk but each piece's first (a piece's first waits on synthesis, not the
    sink); one that takes no time leaves none."""
    sink = SlowCard(per_chunk)
    spoken = threading.Event()
    events = PlayerEvents(speaking=lambda on: on or spoken.set())
    player = ReplyPlayer(Voice(), sink, events, chunk_ms=20, realtime=True, clock=lambda: sink.now)
    thread = threading.Thread(target=player.run, daemon=True)
    thread.start()
    try:
        player.say("Hello there.")
        player.say("")
        assert spoken.wait(10.0)
    finally:
        player.shutdown()
        thread.join(5.0)
    assert sink.text(0) == "Hello there."
    assert player.underruns == underruns


class SlowSecondSentence(Voice):
    """The second sentence's synthesis waits for `go`: the player sits between pieces."""

    def __init__(self):
        super().__init__()
        self.go = threading.Event()
        self.waiting = threading.Event()

    def synthesize(self, piece: str) -> Speech:
        if piece.startswith("Later"):
            self.waiting.set()
            assert self.go.wait(10.0)
        return super().synthesize(piece)


@pytest.mark.parametrize("command", ["pause", "stop"])
def test_a_pause_or_stop_between_sentences_is_stamped_where_the_voice_fell_silent(command):
    """The robot is silent between two sentences (the next one still being synthesized) when
    the user speaks: the pause or stop is applied at the next sentence's first chunk, but
    the voice fell silent when the sentence before ended (the time to silence is measured
    from these stamps)."""
    clock = [10.0]
    stamps: list[tuple[float, str]] = []
    voice, sink = SlowSecondSentence(), Recorder()
    events = PlayerEvents(interruption=lambda t, what: stamps.append((t, what)))
    player = ReplyPlayer(voice, sink, events, chunk_ms=50, realtime=False, clock=lambda: clock[0])
    thread = threading.Thread(target=player.run, daemon=True)
    thread.start()
    try:
        player.say("Hello there.")
        player.say("Later words.")
        player.say("")
        assert voice.waiting.wait(10.0)  # the first sentence was handed over at 10.0 s; the second is not ready
        clock[0] = 20.0
        getattr(player, command)()
        voice.go.set()
        while not stamps:
            assert thread.is_alive()
            threading.Event().wait(0.01)
    finally:
        player.shutdown()  # a paused player stops holding too
        thread.join(5.0)
    assert stamps[0] == (10.0, command)  # not 20.0, when it was applied
    assert sink.text(0) == "Hello there."  # the second sentence never played
