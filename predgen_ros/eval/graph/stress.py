"""`predgen-ros stress` (`make stress`): a soak of the real graph, then its faults.

Soak: the three nodes as processes; the text user (eval/graph/text_user.py) speaks `turns`
utterances at a fast rate (MT-Bench questions mixed with awkward ones: "hi",
emoji, right-to-left script, control characters); tts_node plays into the null
sink.  A monitor node in this process counts the finals sent and the responses,
samples every node's resident memory after each answer, and respawns a node
that dies (counted as a crash).  A turn the user waited `turn_timeout_s` for
without a response is stuck.

Faults, each with an asserted outcome:
  predgen_kill   predgen_node SIGKILLed mid-turn and respawned: the next utterance is answered
  sink_failure   the wav sink's folder replaced by a file: tts_node reports ERROR for
                 that reply, then speaks the next one
  bad_paths      a missing model, voice or vosk model: the node exits non-zero with
                 one line naming the parameter and the path

Memory: every node's resident set is sampled at each answer.  Two lines say how much
each node grew from answer `rss_from_turn` to the last, and over the soak's second
half (a robot that talks all day must plateau: the second half's growth is the one to
watch); the last line printed is
  stress: sent=N answered=N faults=N crashes=N stuck=N max_rss_mb=X rss_growth_mb=Y late_growth_mb=Z
(Y: the nodes' total growth from answer `rss_from_turn`; Z: their total over the second half),
and `<out>/rss.csv` holds every sample.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...nodes.bringup import NODES, TEXT_USER, Graph, GraphError, in_place_of_the_ear
from ...nodes.probe import GraphProbe
from .text_user import UserState

AWKWARD = (
    "hi",
    "what does 🤖🚀 mean for a robot?",
    "ما هي عاصمة فرنسا؟ tell me please",
    "tell\x07 me\x1b[31m about paris\u202e",
    "ok",
)
MAX_RESPAWNS = 5  # a node that keeps dying ends the soak


@dataclass
class StressSettings:
    params_file: Path
    out: Path
    turns: int = 300
    chars_per_minute: float = 12000.0
    max_new_tokens: int = 16
    rss_from_turn: int = 50
    turn_timeout_s: float = 30.0
    restart_timeout_s: float = 120.0
    soak_limit_s: float | None = None  # the soak stops here whatever happens; None: 9 s a turn, at least 10 min

    def __post_init__(self):
        if self.soak_limit_s is None:
            self.soak_limit_s = max(600.0, 9.0 * self.turns)  # 300 turns take about 10 min


@dataclass
class StressResult:
    sent: int = 0
    answered: int = 0
    crashes: int = 0
    stuck: int = 0
    faults: dict[str, str] = field(default_factory=dict)  # scenario -> "ok" or what went wrong
    rss_samples: list[tuple[int, dict[str, float]]] = field(default_factory=list)  # (answers so far, node -> MB)
    growth_by_node_mb: dict[str, float] = field(default_factory=dict)  # from answer rss_from_turn to the last
    late_growth_by_node_mb: dict[str, float] = field(default_factory=dict)  # over the soak's second half

    @property
    def rss_growth_mb(self) -> float:
        return sum(self.growth_by_node_mb.values())

    @property
    def late_growth_mb(self) -> float:
        return sum(self.late_growth_by_node_mb.values())

    @property
    def max_rss_mb(self) -> float:
        return max((mb for _, sample in self.rss_samples for mb in sample.values()), default=0.0)

    def growth_from(self, answer: int) -> dict[str, float]:
        """Each node's growth from its first sample at or after `answer` to its last sample (MB)."""
        start = next((sample for n, sample in self.rss_samples if n >= answer), None)
        if start is None:
            return {}
        end = self.rss_samples[-1][1]
        return {node: end[node] - start[node] for node in end if node in start}

    @property
    def passed(self) -> bool:
        return self.answered == self.sent and not self.crashes and not self.stuck and all(v == "ok" for v in self.faults.values())

    def line(self) -> str:
        return (
            f"stress: sent={self.sent} answered={self.answered} faults={len(self.faults)} crashes={self.crashes} "
            f"stuck={self.stuck} max_rss_mb={self.max_rss_mb:.1f} rss_growth_mb={self.rss_growth_mb:.1f} "
            f"late_growth_mb={self.late_growth_mb:.1f}"
        )


def soak_utterances(turns: int) -> list[str]:
    """MT-Bench turn-1 questions with an awkward utterance after every tenth, cycled to `turns`."""
    from ...audio.recognition.text_asr import load_questions

    questions = [q.text for q in load_questions()]
    pool = []
    for i, question in enumerate(questions):
        pool.append(question)
        if i % 10 == 9:
            pool.append(AWKWARD[(i // 10) % len(AWKWARD)])
    return [pool[i % len(pool)] for i in range(turns)]


class Monitor(GraphProbe):
    """The probe, counting responses and speaking for the fault scenarios."""

    def __init__(self):
        from std_msgs.msg import Bool, String

        from ...nodes.common import TEXT_QOS

        super().__init__("predgen_stress_monitor")
        self.responses: list[str] = []
        self._speaking = None  # turn/events: made when the faults need it
        self.node.create_subscription(String, "predgen/response", lambda m: self.responses.append(m.data), TEXT_QOS)
        self.robot_speaking = False
        self.node.create_subscription(Bool, "robot_speaking", lambda m: setattr(self, "robot_speaking", m.data), TEXT_QOS)

    def say(self, text: str, stop_after_words: int | None = None) -> None:
        """Word-by-word turn events (50 ms apart), then the ending: a user of its own
        stream, beside the text user's."""
        from std_msgs.msg import String

        from ...nodes.common import TEXT_QOS
        from ...nodes.messages import turn_event
        from ...turn_events import TurnEventWriter

        if self._speaking is None:  # not earlier: the text user counts the writers of turn/events before it speaks
            self._speaking = self.node.create_publisher(String, "turn/events", TEXT_QOS)
        # as asr_node and the text user do: speak once predgen_node's reader has matched every writer (ours among them)
        writers = lambda: self.node.count_publishers("turn/events")  # noqa: E731
        self.wait_for(lambda: int(self.value("predgen_node", "turn_writers_matched", "0")) >= writers(), 30.0)
        user, words = TurnEventWriter(), text.split()
        for n in range(1, len(words) + 1):
            for event in user.words(" ".join(words[:n]), time.time()):
                self._speaking.publish(turn_event(event))
            self.spin_for(0.05)
            if stop_after_words == n:
                return
        for event in user.final(text, time.time(), may_continue=False, handed_on=True):
            self._speaking.publish(turn_event(event))

    def answered(self, text: str, timeout: float) -> bool:
        """Say `text` once the robot is silent (a short word over it is no turn: turn_taking.py);
        True when predgen/response answers it within `timeout`."""
        self.wait_for(lambda: not self.robot_speaking, timeout)
        before = len(self.responses)
        self.say(text)
        return self.wait_for(lambda: len(self.responses) > before, timeout)

    def predgen_serving(self, timeout: float) -> bool:
        """True once a live predgen_node is active (a killed one cannot answer)."""
        try:
            self.wait_active(["predgen_node"], timeout)
        except GraphError:
            return False
        return True


def write_rss(path: Path, samples: list[tuple[int, dict[str, float]]]) -> None:
    """One row per sample: the answers so far, then each node's resident memory (MB)."""
    nodes = sorted({node for _, sample in samples for node in sample})
    rows = [",".join(["answered", *nodes])]
    rows += [",".join([str(n), *(f"{sample.get(node, float('nan')):.1f}" for node in nodes)]) for n, sample in samples]
    path.write_text("\n".join(rows) + "\n")


def node_rss_mb(graph: Graph) -> dict[str, float]:
    import psutil

    rss = {}
    for node, proc in graph.procs.items():
        try:
            rss[node] = psutil.Process(proc.pid).memory_info().rss / 2**20
        except psutil.Error:
            pass  # it just died; the crash check counts it
    return rss


def soak(graph: Graph, monitor: Monitor, settings: StressSettings, result: StressResult, progress=None) -> None:
    """Wait while the text user speaks every utterance; respawn crashed nodes; sample memory.
    `sent` is the text user's own count of the endings it published (its diagnostics)."""
    last_change = time.time()
    give_up = time.time() + settings.soak_limit_s
    while True:
        monitor.spin_for(0.1)
        sent = int(monitor.value(TEXT_USER, "utterances", "0"))
        answered = len(monitor.responses)
        if answered > result.answered:
            result.rss_samples.append((answered, node_rss_mb(graph)))
            if progress:
                progress(answered - result.answered)
        if (sent, answered) != (result.sent, result.answered):
            result.sent, result.answered, last_change = sent, answered, time.time()
        if (exited := graph.exited()) is not None:
            result.crashes += 1
            print(f"stress: {exited[0]} exited with code {exited[1]}; respawning it", file=sys.stderr, flush=True)
            if result.crashes > MAX_RESPAWNS:
                print(f"stress: more than {MAX_RESPAWNS} crashes; see {settings.out / 'graph.log'}", file=sys.stderr, flush=True)
                result.stuck = max(1, result.sent - result.answered)
                break
            graph.launch(exited[0])
        finished = monitor.value(TEXT_USER, "state") == UserState.INPUT_FINISHED.value
        if finished and result.answered >= result.sent:
            break
        if time.time() - last_change > settings.turn_timeout_s + 5 or time.time() > give_up:  # nothing moves any more
            result.stuck = max(1, result.sent - result.answered)
            print(
                f"stress: the soak stopped at {result.answered} answers of {result.sent} utterances", file=sys.stderr, flush=True
            )
            for node, (level, message, values) in sorted(monitor.health.items()):  # what each node last said of itself
                print(f"stress: {node} health: level {level}, {message}, {values}", file=sys.stderr, flush=True)
            break
    result.rss_samples.append((result.answered, node_rss_mb(graph)))
    write_rss(settings.out / "rss.csv", result.rss_samples)
    result.growth_by_node_mb = result.growth_from(settings.rss_from_turn)
    result.late_growth_by_node_mb = result.growth_from(result.answered // 2)
    for label, growth in (
        (f"from answer {settings.rss_from_turn}", result.growth_by_node_mb),
        (f"over the second half (from answer {result.answered // 2})", result.late_growth_by_node_mb),
    ):
        nodes = ", ".join(f"{n} {mb:+.1f} MB" for n, mb in growth.items())
        print(f"stress: rss growth {label}: {nodes}", file=sys.stderr, flush=True)


def fault_predgen_kill(graph: Graph, monitor: Monitor, settings: StressSettings) -> str:
    monitor.say("please tell me a long story about a robot and its friends", stop_after_words=5)
    graph.kill("predgen_node")
    monitor.health.pop("predgen_node", None)  # forget the killed node's last report
    graph.launch("predgen_node")
    if not monitor.predgen_serving(settings.restart_timeout_s):
        return f"predgen_node did not serve again within {settings.restart_timeout_s:g} s of its respawn"
    if not monitor.answered("what is the capital of france", settings.turn_timeout_s):
        return "the first utterance after the respawn got no response"
    return "ok"


def fault_sink_failure(graph: Graph, monitor: Monitor, settings: StressSettings) -> str:
    wav_dir = (settings.out / "fault-wav").resolve()
    say_subscribers = lambda: int(monitor.value("predgen_node", "say_subscribers", "-1"))  # noqa: E731
    graph.terminate("tts_node")
    if not monitor.wait_for(lambda: say_subscribers() == 0, settings.restart_timeout_s):
        return "predgen_node still counts the stopped tts_node on tts/say"
    monitor.health.pop("tts_node", None)  # forget the stopped node's last report
    graph.launch("tts_node", {"tts.sink": "wav", "tts.wav_dir": str(wav_dir)})
    if not monitor.wait_for(lambda: "tts_node" in monitor.health, settings.restart_timeout_s):
        return "tts_node with the wav sink did not come up"
    # predgen_node's side of the match: a sentence published before it would be lost
    if not monitor.wait_for(lambda: say_subscribers() >= 1, settings.restart_timeout_s):
        return "predgen_node's tts/say never reached the respawned tts_node"

    def reply_written(label: str) -> str:
        written = len(list(wav_dir.glob("*.wav")))
        if not monitor.answered(f"tell me one fact about the moon {label}", settings.turn_timeout_s):
            return f"no response to the utterance {label}"
        if not monitor.wait_for(lambda: len(list(wav_dir.glob("*.wav"))) > written, settings.turn_timeout_s):
            return f"no WAV written for the reply {label}"
        return ""

    level = lambda: monitor.health.get("tts_node", (None,))[0]  # noqa: E731
    if error := reply_written("before the sink failure"):
        return error
    shutil.rmtree(wav_dir)
    wav_dir.write_text("not a folder: the wav sink cannot write here\n")
    if not monitor.answered("tell me one fact about the moon while the sink is broken", settings.turn_timeout_s):
        return "no response to the utterance while the sink is broken"
    if not monitor.wait_for(lambda: level() == 2, 10.0):
        return "tts_node diagnostics did not turn ERROR for the failed reply"
    wav_dir.unlink()
    wav_dir.mkdir()
    if error := reply_written("after the sink failure"):
        return error
    if not monitor.wait_for(lambda: level() == 0, 10.0):
        return "tts_node diagnostics stayed ERROR after a good reply"
    return "ok"


BAD_PATHS = (
    ("predgen_node", "model.path", {}),
    ("tts_node", "tts.voice_path", {}),
    ("asr_node", "asr.vosk.model_path", {"asr.backend": "vosk"}),
)


def fault_bad_paths(graph: Graph, monitor: Monitor, settings: StressSettings) -> str:
    from ...nodes.bringup import node_command

    for node, parameter, extra in BAD_PATHS:
        missing = f"/nonexistent/predgen_stress/{parameter}"
        command = node_command(node, settings.params_file, {**extra, parameter: missing})
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=graph.env)
        lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        if proc.returncode == 0 or len(lines) != 1 or parameter not in lines[0] or missing not in lines[0]:
            return f"{node} with a missing {parameter}: exit {proc.returncode}, output {lines[:3]}"
    return "ok"


FAULTS = {"predgen_kill": fault_predgen_kill, "sink_failure": fault_sink_failure, "bad_paths": fault_bad_paths}


def run_stress(settings: StressSettings, progress=None) -> StressResult:
    import rclpy

    settings.out.mkdir(parents=True, exist_ok=True)
    source = settings.out / "utterances.txt"
    source.write_text("\n".join(soak_utterances(settings.turns)) + "\n", encoding="utf-8")
    overrides = {
        "policy": "predgen",
        "generation.max_new_tokens": settings.max_new_tokens,
        "text.source": str(source.resolve()),
        "text.chars_per_minute": float(settings.chars_per_minute),
        "text.gap_s": 0.2,
        "text.reply_timeout_s": float(settings.turn_timeout_s),
        "tts.sink": "none",
        "tts.realtime": False,
    }
    result = StressResult()
    rclpy.init()
    try:
        with (
            open(settings.out / "graph.log", "w") as log,
            Graph(settings.params_file, overrides, in_place_of_the_ear(NODES, "text"), log=log) as graph,
        ):
            monitor = Monitor()
            try:
                if not monitor.predgen_serving(settings.restart_timeout_s):
                    raise RuntimeError(
                        f"predgen_node did not come up within {settings.restart_timeout_s:g} s; see {settings.out / 'graph.log'}"
                    )
                soak(graph, monitor, settings, result, progress)
                graph.terminate(TEXT_USER)  # its input is done; the monitor speaks from here on (its writers gone)
                for name, scenario in FAULTS.items():
                    result.faults[name] = scenario(graph, monitor, settings)
                    print(f"stress: fault {name}: {result.faults[name]}", file=sys.stderr, flush=True)
            finally:
                monitor.close()
    finally:
        rclpy.try_shutdown()
    return result
