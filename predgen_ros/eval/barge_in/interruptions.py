"""`predgen-ros eval-interruptions`: the interruption bag through the live graph, once per policy.

asr_node hears a continuous 16 kHz stream on `audio/user` (silence between the
clips), with `asr.mute_while_robot_speaks: false` as on a robot with echo
cancellation.  Per trial: the history is cleared, the request is played, and
once the robot's first audio is out and `after_s` has passed, the event.  Then
the trial waits for the reply to end (and, after a barge-in, for the answer to
the new request).  Scored from what the graph published:

  false stop      an acknowledgement or a burst ended the reply (`tts/interruption` stop)
  resumed pause   the voice paused and went on
  new turn        predgen_node answered an acknowledgement or a burst (a latency report after it)
  missed          a barge-in that did not stop the robot: it talked on to its reply's end
                  (how long after the onset: "talked on"), or it paused and resumed
  time to silence from the barge-in's first voiced sample to the pause or stop (when the
                  audio handed to the sink ran out); its p90 is also given with each
                  barge-in talked on counted at its talked-on time
  answered        the barge-in got a reply of its own
  history         the answer's prompt held, as the earlier reply, exactly what tts/played said was heard
  reply lost      a request without its whole reply: none came, a false stop, or a barge-in left unanswered
  paused early    the voice paused in a reply before the trial's event began, the user silent
                  since the request (OWN_PAUSE_AFTER_S after its last word): the robot's own voice
  ran on          the robot was not silent REPLY_TIMEOUT_S after the trial (it kept answering
                  its own voice): the evaluation stopped it, as an operator would; after
                  RAN_ON_LIMIT such trials the run of that hearing ends (the table's `trials`)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

from ...audio.heard_audio import INDEX as HEARD_INDEX
from ...audio.pcm import AUDIO_CHUNK_MS, SAMPLE_RATE
from ...audio.recognition.recognizers import DEFAULT_RECOGNIZER
from ...nodes.bringup import Graph
from ...nodes.probe import GraphProbe
from ..hearing.echo_mic import RoomMicrophone, probe_speech
from .interruption_bag import Trial, last_voiced_s
from .interruption_results import SILENCE, TrialResult

CHUNK_S = AUDIO_CHUNK_MS / 1000  # the microphone's chunks, as asr_node's own microphone source reads them
NODES = ("asr_node", "predgen_node", "tts_node")
REPLY_TIMEOUT_S = 60.0
REACTION_S = 0.3  # an event whose onset came later than this before the reply's natural end was not over the robot
OWN_PAUSE_AFTER_S = 0.5  # a pause this long after the request's last voiced sample was not the user's
EVAL_STOPS = 3  # a robot still talking to itself after this many of the evaluation's stops ends the hearing
RAN_ON_LIMIT = 3  # trials after which the robot ran on before a hearing ends: each costs minutes, and the finding is made
ANSWER_WAIT_S = 10.0  # a barge-in unanswered this long after its audio ended, the robot silent, was not heard (mute)
# The interruption policies compared: the default, and the behaviour before turn-taking.
POLICIES = {
    "pause": {"turn.interruption": "pause"},
    "stop": {"turn.interruption": "stop", "turn.min_words": 1, "turn.backchannels": "", "turn.min_speech_s": 0.0},
}
GRAPH_OVERRIDES = {
    "asr.backend": DEFAULT_RECOGNIZER,
    "asr.input": "topic",
    "asr.mute_while_robot_speaks": False,
    "tts.sink": "none",
    "tts.realtime": True,
}
USER_ALONE = {"asr.echo_cancel": "none"}  # without --robot-in-mic the microphone hears the user alone: nothing to cancel
# --robot-in-mic: the loudspeaker's sound is published (eval/hearing/echo_mic.py mixes it into the
# microphone) and asr_node hears the room as configured (`--hearing`).
ROBOT_IN_MIC = {"tts.sink": "topic", "asr.mute_while_robot_speaks": True}
HEARING = {
    "echo": {"asr.echo_cancel": "webrtc"},  # the defaults: the canceller, so no mute
    "mute": {"asr.echo_cancel": "none", "asr.mute_while_robot_speaks": True},  # the default before echo cancellation
    "open": {"asr.echo_cancel": "none", "asr.mute_while_robot_speaks": False},  # neither
}
ROOM_BLOCK = 10  # trials in one room before the next
SILENT_NUMBER = 1000  # silent trials are numbered from here


class AudioFeed:
    """A live microphone stand-in: 20 ms chunks (CHUNK_S) on `audio/user` at real time, silence
    unless a clip is queued; `play` returns when the clip's first chunk went out.  With a
    `room` (eval/hearing/echo_mic.py) the microphone also hears the robot's loudspeaker.
    A faulty microphone's output (`send`) and its stops (`stop_for`) are for the spoken soak."""

    def __init__(self, node, room=None):
        from std_msgs.msg import Int16MultiArray

        from ...nodes.common import TEXT_QOS

        self.pub = node.create_publisher(Int16MultiArray, "audio/user", TEXT_QOS)
        self.room = room
        # (clip number where a clip begins, else None; samples; None: 16 kHz through the room, else
        # the rate they go out at as they are)
        self._chunks: deque = deque()
        self._started: dict[int, float] = {}
        self._clips = 0
        self._silent_until = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from ...nodes.messages import audio_chunk

        size = int(CHUNK_S * SAMPLE_RATE)
        silence = np.zeros(size)
        t = time.time()
        if self.room is not None:
            self.room.start(t)
        while not self._stop.is_set():
            t += CHUNK_S
            self._stop.wait(max(0.0, t - time.time()))
            clip, chunk, rate = self._chunks.popleft() if self._chunks else (None, silence, None)
            heard = chunk if rate is None else silence  # the room's time goes on under a faulty chunk
            pcm = self.room.next_chunk(heard) if self.room is not None else heard.astype(np.int16)
            if time.time() >= self._silent_until:
                self.pub.publish(audio_chunk(pcm, SAMPLE_RATE) if rate is None else audio_chunk(chunk, rate))
            if clip is not None:
                self._started[clip] = time.time() - CHUNK_S  # the chunk's audio began a chunk ago

    def send(self, samples: np.ndarray, rate: int) -> None:
        """Queue one message of `samples` labelled `rate`, as a faulty microphone sends it (past the room)."""
        self._chunks.append((None, samples.astype(np.int16), rate))

    def stop_for(self, seconds: float) -> None:
        """The microphone sends nothing for `seconds` from now (the room's time goes on)."""
        self._silent_until = time.time() + seconds

    def play(self, pcm: np.ndarray) -> float:
        """Queue `pcm`; the wall time its first sample reached asr_node's stream."""
        self._clips += 1
        clip = self._clips
        size = int(CHUNK_S * SAMPLE_RATE)
        heard = self.room.user_clip(pcm) if self.room is not None else pcm.astype(np.float64)
        for start in range(0, len(heard), size):
            piece = heard[start : start + size]
            self._chunks.append((clip if start == 0 else None, np.pad(piece, (0, size - len(piece))), None))
        while clip not in self._started:
            time.sleep(0.01)
        return self._started.pop(clip)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1.0)


class Recorder(GraphProbe):
    """Records what the graph says about the robot's voice and its turns."""

    def __init__(self, room=None):
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import Bool, Header, Int16MultiArray, String
        from std_srvs.srv import Trigger

        from ...nodes.common import AUDIO_QOS, TEXT_QOS, seconds

        super().__init__("predgen_interruptions")
        self.speaking: list[tuple[float, bool]] = []
        self.voice: list[tuple[float, str]] = []  # tts/interruption: (when the audio fell silent or went on, what)
        self.played: list[str] = []
        self.reports: list[dict[str, str]] = []
        self._last_report = 0.0
        self.reset = self.node.create_client(Trigger, "/predgen_node/reset")
        self.decisions = self.node.create_publisher(Header, "turn/decision", TEXT_QOS)
        sub = self.node.create_subscription
        self.listening = [
            sub(Bool, "robot_speaking", lambda m: self.speaking.append((time.time(), m.data)), TEXT_QOS),
            sub(Header, "tts/interruption", lambda m: self.voice.append((seconds(m.stamp), m.frame_id)), TEXT_QOS),
            sub(String, "tts/played", lambda m: self.played.append(m.data), TEXT_QOS),
            sub(DiagnosticArray, "predgen/latency", self._on_report, TEXT_QOS),
        ]
        if room is not None:  # the loudspeaker's sound, into the room's microphone as the card plays it
            self.listening.append(sub(Int16MultiArray, "tts/reference", lambda m: self._into_room(room, m), AUDIO_QOS))

    @staticmethod
    def _into_room(room: RoomMicrophone, msg) -> None:
        """tts/reference is what the loudspeaker plays, stamped when tts_node handed it to the
        card (in the robot's process, where no network delays it); the card plays it from there."""
        from ...nodes.messages import audio_rate, played_at

        handed = played_at(msg)
        if handed is not None:
            room.robot_played(np.asarray(msg.data, dtype=np.int16), audio_rate(msg), handed)

    def ready_to_speak(self, feed: AudioFeed) -> None:
        """Until the graph hears the feed and this recorder hears the graph, every node is
        connected, and the robot is quiet: a user may speak."""
        self.spin_until(
            lambda: self.reset.service_is_ready() and feed.pub.get_subscription_count() > 0 and self.hears_the_graph(),
            120,
            "the graph",
        )
        self.wait_connected(NODES)
        self.wait_quiet()

    def hears_the_graph(self) -> bool:
        """Every topic recorded has a matched writer: nothing the graph says is missed."""
        return all(s.get_publisher_count() > 0 for s in self.listening)

    def _on_report(self, msg) -> None:
        self.reports += [{kv.key: kv.value for kv in s.values} for s in msg.status]
        self._last_report = time.time()

    @property
    def is_speaking(self) -> bool:
        return bool(self.speaking) and self.speaking[-1][1]

    def settled(self, since: float) -> bool:
        """Nothing happened since `since` is proven, not waited out: asr_node reported after it
        that its ear holds nothing on its way (no utterance open, no final owed or awaiting
        confirmation), and predgen_node, reporting after that, had nothing to do.  A turn
        still to come would be in one of the two."""
        heard_at, answered_at = self.health_at.get("asr_node", 0.0), self.health_at.get("predgen_node", 0.0)
        ear_settled = heard_at > since and self.value("asr_node", "ear_settled") == "True"
        engine_idle = self.value("predgen_node", "busy") == "False" and self.value("predgen_node", "mailbox") == "0"
        return ear_settled and answered_at > heard_at and engine_idle

    def wait_settled(self, since: float) -> None:
        """Until `settled(since)` and the robot is silent; a turn it proves absent is absent."""
        self.wait_for(lambda: not self.is_speaking and self.settled(since), REPLY_TIMEOUT_S)

    def wait_quiet(self) -> int:
        """Until the robot is silent and nothing is on its way (`settled` since its voice and the
        last report: the last trial's turns are over).  Returns how often the evaluation had to
        stop it and clear its history (it kept talking, answering its own voice with neither
        canceller nor mute): 0 when it fell silent by itself, EVAL_STOPS + 1 when it never did."""
        from ...nodes.common import stamp
        from ...nodes.messages import turn_decision

        def quiet() -> bool:
            last = max([t for t, _ in self.speaking] + [self._last_report])
            return not self.is_speaking and self.settled(last)

        for stops in range(EVAL_STOPS + 1):
            if self.wait_for(quiet, REPLY_TIMEOUT_S):
                return stops
            if stops < EVAL_STOPS:
                self.decisions.publish(turn_decision(stamp(time.time()), "stop", "(the evaluation)"))
                self.clear_history()
        return EVAL_STOPS + 1

    def clear_history(self) -> None:
        from std_srvs.srv import Trigger

        future = self.reset.call_async(Trigger.Request())
        self.spin_until(future.done, 30, "/predgen_node/reset")


def run_trial(rec: Recorder, feed: AudioFeed, policy: str, trial: Trial, question: np.ndarray, event: np.ndarray) -> TrialResult:
    """One trial from a quiet robot; it ends once the robot is quiet again."""
    result = TrialResult(policy, trial.number, trial.kind, trial.question, trial.event)
    _play_trial(rec, feed, result, trial, question, event)
    stops = rec.wait_quiet()
    result.ran_on, result.never_silent = stops > 0, stops > EVAL_STOPS
    return result


def _play_trial(rec: Recorder, feed: AudioFeed, result: TrialResult, trial: Trial, question: np.ndarray, event) -> TrialResult:
    rec.clear_history()
    reports, voice, played = len(rec.reports), len(rec.voice), len(rec.played)
    # the reply to the whole request: an early final at a pause inside it is answered too, and the rest is another turn
    request_end = feed.play(question) + last_voiced_s(question) - REACTION_S
    replied = lambda: any(float(r["t_end_of_speech"]) >= request_end for r in rec.reports[reports:])  # noqa: E731
    if not rec.wait_for(lambda: replied() and rec.is_speaking, REPLY_TIMEOUT_S):
        return result
    result.spoke = True
    if event is None:  # the user says nothing: does the robot's own voice pause it, stop it or make a turn?
        return _own_voice(rec, result, voice, reports, rec.speaking[-1][0])
    rec.spin_for(trial.after_s)
    speaking = len(rec.speaking)
    began = feed.play(event)
    onset = result.onset_at = began + trial.onset_s
    user_silent = request_end + REACTION_S + OWN_PAUSE_AFTER_S
    result.paused_early = any(what == "pause" and user_silent < t < onset - CHUNK_S for t, what in rec.voice[voice:])
    if trial.kind == "barge_in":  # its answer: a report for a turn after the onset, then the robot silent again
        answer = lambda: [r for r in rec.reports[reports:] if float(r["t_end_of_speech"]) > onset]  # noqa: E731
        give_up = began + len(event) / SAMPLE_RATE + ANSWER_WAIT_S
        rec.wait_for(lambda: (bool(answer()) or time.time() > give_up) and not rec.is_speaking, REPLY_TIMEOUT_S)
    else:  # the reply plays out; then until a turn the event might have made would show
        rec.wait_for(lambda: not rec.is_speaking, REPLY_TIMEOUT_S)
        rec.wait_settled(time.time())
    after = [(t, what) for t, what in rec.voice[voice:] if t >= onset - CHUNK_S]
    kinds = [what for _, what in after]
    result.paused, result.stopped = "pause" in kinds, "stop" in kinds
    result.resumed = "pause" in kinds and "resume" in kinds[kinds.index("pause") :]
    silenced = [t for t, what in after if what in ("pause", "stop")]
    ended = [t for t, on in rec.speaking[speaking:] if not on]
    result.event_over_speech = bool(silenced) or (bool(ended) and ended[0] - onset >= REACTION_S)
    # a turn of the event's making: its speech ended after the event began (not the request's own words,
    # finalized after the onset because an early final cut the request and the user went on)
    turns = [r for r in rec.reports[reports:] if float(r["t_end_of_speech"]) > onset]
    result.new_turn = turns[0]["transcript"] if turns else ""
    if trial.kind == "barge_in":
        result.silence_s = silenced[0] - onset if silenced else None
        if not silenced and ended:
            result.talked_on_s = ended[0] - onset
        result.answered = bool(turns and turns[0]["first_sentence"])
        result.played = rec.played[-1] if len(rec.played) > played else ""
        result.history = turns[0]["previous_reply"] if turns else ""
    return result


def _own_voice(rec: Recorder, result: TrialResult, voice: int, reports: int, reply_began: float) -> TrialResult:
    """A reply with no user speech over it: it should play out untouched (a turn whose
    speech ended after the reply began was made of the robot's own voice)."""
    rec.wait_for(lambda: not rec.is_speaking, REPLY_TIMEOUT_S)
    rec.wait_settled(time.time())  # a turn made of the robot's own voice or its echo's tail would show
    kinds = [what for _, what in rec.voice[voice:]]
    result.event_over_speech = True
    result.paused, result.stopped = "pause" in kinds, "stop" in kinds
    result.resumed = "pause" in kinds and "resume" in kinds[kinds.index("pause") :]
    own = [r for r in rec.reports[reports:] if float(r["t_end_of_speech"]) > reply_began]
    result.new_turn = own[0]["transcript"] if own else ""
    return result


def silent_trials(trials, count: int) -> list:
    """`count` trials of the bag's requests with nothing said over the reply (kind SILENCE)."""
    picked = [trials[i % len(trials)] for i in range(count)]
    return [(Trial(SILENT_NUMBER + i, SILENCE, t.question, "", 0.0), question, None) for i, (t, question, _) in enumerate(picked)]


def interleave(first: list, second: list) -> list:
    out = []
    for i in range(max(len(first), len(second))):
        out += first[i : i + 1] + second[i : i + 1]
    return out


def run_policy(
    policy: str, trials, params_file: Path, out: Path, extra: dict, progress=None, room_seed: int | None = None, label: str = ""
) -> list[TrialResult]:
    """One graph, every trial.  `room_seed`: the robot's voice in the microphone through
    seeded rooms (a new room every ROOM_BLOCK trials); `label` names the run (policy)."""
    label = label or policy
    overrides = {**GRAPH_OVERRIDES, **(ROBOT_IN_MIC if room_seed is not None else USER_ALONE), **extra, **POLICIES[policy]}
    room = RoomMicrophone(probe_speech()) if room_seed is not None else None
    heard_dir = Path(overrides["asr.record_dir"]) if overrides.get("asr.record_dir") else None
    results, notes = [], []
    with open(out / f"{label}.log", "w") as log, Graph(params_file, overrides, nodes=NODES, log=log) as graph:
        rec = Recorder(room)
        rec.graph = graph
        rec.wait_active(NODES)
        feed = AudioFeed(rec.node, room)  # silence from now on: the ear's clock runs while the evaluation waits
        try:
            rec.ready_to_speak(feed)
            for i, (trial, question, event) in enumerate(trials):
                if room is not None and i % ROOM_BLOCK == 0:  # between trials, so never mid-reply
                    room.enter_room(room_seed * 1000 + i // ROOM_BLOCK)
                saved = _heard_lines(heard_dir)
                result = run_trial(rec, feed, label, trial, question, event)
                result.heard = [f"{line['file']}: {line['final']}" for line in _heard_lines(heard_dir)[len(saved) :]]
                results.append(result)
                if progress:
                    progress()
                ran_on = sum(r.ran_on for r in results)
                if result.never_silent or ran_on >= RAN_ON_LIMIT:
                    notes.append(
                        f"{label} ended after {len(results)} of {len(trials)} trials: the robot ran on in {ran_on} of them"
                    )
                    if progress:
                        progress(len(trials) - len(results))
                    break
            heard = {k: v for k, v in rec.health.get("asr_node", (0, "", {}))[2].items() if k.startswith("echo")}
            underruns = rec.health.get("tts_node", (0, "", {}))[2].get("underruns", "?")
        finally:
            feed.close()
            rec.close()
    if room is not None:
        notes.append(f"room microphone: {room.clipped} samples clipped, {room.late_chunks} loudspeaker chunks late")
        notes.append(f"asr_node's canceller at the end: {heard}")
        notes.append(f"tts_node's loudspeaker underruns: {underruns}")
    with open(out / f"{label}.log", "a") as log:
        log.writelines(f"{note}\n" for note in notes)
    return results


def _heard_lines(folder: Path | None) -> list[dict]:
    """The utterances asr_node has saved to `folder` so far (asr.record_dir; none without it)."""
    index = folder / HEARD_INDEX if folder else None
    if index is None or not index.is_file():
        return []
    return [json.loads(line) for line in index.read_text().splitlines() if line.strip()]
