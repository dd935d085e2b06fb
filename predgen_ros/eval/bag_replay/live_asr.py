"""`predgen-ros eval --endpoint-policies`: the bag's audio through a live asr_node, one run per policy.

A plain eval replays the transcripts the bag recorded.  This one replays the
user's audio (`audio/user`) into asr_node (`--asr-backend`, the parameter file's
VAD), so the endpoint policy under test decides when each final goes out, and
`llm` and `fused` hear predgen_node's `turn/end_probability` as on a robot.

Per run: the audio latency from the true end of speech, as in every eval, and
the finals that cut a question off: asr_node stamps each final's end of
speech (`asr/speech_end`), and one that lies before the question's own end
means a pause inside the question ended the turn.  The baseline runs once,
with `baseline_endpoint`, for the ratio.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...audio.pcm import AUDIO_CHUNK_MS, SAMPLE_RATE, chunks
from ...nodes.bringup import Graph
from ...nodes.messages import audio_chunk
from ..hearing.endpoints import endpoint_config
from ..records import TurnRecord, percentile
from .bags import GRAPH_TOPICS, USER_TOPICS, BagError, BagMessage, QuestionMarker, read_bag
from .replay import EvalSettings, GraphRun, Player
from .talk_over import contract_words, diagnostics_value, speaking_spans, talk_over_s, words_lost

# A final whose speech ended this close to the question's end closes the question
# (the VAD's frames and the voice's fade-out); an inserted hesitation lies much earlier.
CLOSING_TOLERANCE_S = 0.25
DIAGNOSTICS_WAIT_S = 1.5  # the nodes publish /diagnostics at 1 Hz
LIVE_NODES = ("asr_node", "predgen_node", "tts_node")


def load_audio_replay(bag, limit: int | None, chunk_ms: int = AUDIO_CHUNK_MS) -> list[BagMessage]:
    """The user's audio chunks of the first `limit` questions, none longer than `chunk_ms`."""
    messages = read_bag(bag, ["audio/user", "eval/turn"])
    starts = [m.t_ns for m in messages if m.topic == "eval/turn"]  # a marker is stored at its question's start
    audio = [m for m in messages if m.topic == "audio/user" and not (limit and limit < len(starts) and m.t_ns >= starts[limit])]
    if not audio:
        raise BagError(f"{bag}: no audio/user messages to replay into asr_node: make it with `predgen-ros make-bag`")
    return [piece for message in audio for piece in split_audio(message, chunk_ms)]


def split_audio(message: BagMessage, chunk_ms: int) -> list[BagMessage]:
    """An audio chunk as pieces of at most `chunk_ms`, each stamped when its last sample
    arrives (a bag stamps a chunk at its end), as a microphone would deliver them."""
    from rclpy.serialization import deserialize_message, serialize_message
    from std_msgs.msg import Int16MultiArray

    pcm = np.asarray(deserialize_message(message.raw, Int16MultiArray).data, dtype=np.int16).tobytes()
    if len(pcm) <= 2 * SAMPLE_RATE * chunk_ms // 1000:
        return [message]
    pieces, sent = [], 0
    for piece in chunks(pcm, chunk_ms / 1000):
        sent += len(piece)
        t_ns = message.t_ns - (len(pcm) - sent) // 2 * 1_000_000_000 // SAMPLE_RATE
        raw = serialize_message(audio_chunk(np.frombuffer(piece, dtype=np.int16), SAMPLE_RATE))
        pieces.append(replace(message, t_ns=t_ns, raw=raw))
    return pieces


def endpoint_overrides(name: str) -> dict:
    """asr_node's parameters for `fixed_<seconds>`, `smart_turn`, `llm` or `fused`."""
    config = endpoint_config(name)
    if config.policy == "fixed":
        return {"asr.endpoint.policy": "fixed", "asr.endpoint_silence_s": config.silence_s}
    return {"asr.endpoint.policy": config.policy}


def live_asr_runs(settings: EvalSettings) -> list[GraphRun]:
    """In the order of the policies: the baseline once (with `baseline_endpoint`), every
    other policy once per endpoint policy."""

    def run(name: str, policy: str, endpoint: str) -> GraphRun:
        overrides = {"asr.backend": settings.asr_backend, "asr.input": "topic", **endpoint_overrides(endpoint)}
        return GraphRun(name, policy, overrides, LIVE_NODES, LivePlayer)

    runs = []
    for policy in settings.policies:
        if policy == "baseline":
            runs.append(run("baseline", "baseline", settings.baseline_endpoint))
        else:
            runs += [run(f"{policy}@{endpoint}", policy, endpoint) for endpoint in settings.endpoint_policies]
    return runs


class LivePlayer(Player):
    """Plays the bag's audio to asr_node and records its finals beside the graph's answers."""

    replayed = ("audio/user",)
    sent = {"audio/user": USER_TOPICS["audio/user"]}
    recorded_topics = {
        **GRAPH_TOPICS,
        "asr/partial": USER_TOPICS["asr/partial"],  # with turn/end_probability: the path from the voice's end to the final
        "asr/final": USER_TOPICS["asr/final"],
        "asr/speech_end": USER_TOPICS["asr/speech_end"],
        "asr/voice": USER_TOPICS["asr/voice"],  # the end-of-turn contract's word on each final
        "turn/end_probability": "diagnostic_msgs/msg/KeyValue",
        "tts/interruption": "std_msgs/msg/Header",  # where the robot's voice paused, went on or stopped
        "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",  # the recognizer's lag, the LLM's and the TTS's work
    }

    def _send(self, message: BagMessage, shift_ns: int) -> None:
        from rclpy.serialization import deserialize_message

        self.publishers["audio/user"].publish(deserialize_message(message.raw, self.types[message.msgtype]))

    def _speech_ends(self) -> list[int]:
        return [msg.stamp.sec * 1_000_000_000 + msg.stamp.nanosec for topic, _, msg in self.recorded if topic == "asr/speech_end"]

    def _final_of(self, marker: QuestionMarker, shift_ns: int, graph: Graph, timeout: float) -> int | None:
        """The end-of-speech stamp of the final that closes the question (the reply to it
        comes after it), once asr_node has sent it; None if it sends none in `timeout`."""
        closing_ns = marker.t_end_ns + shift_ns - int(CLOSING_TOLERANCE_S * 1e9)
        closing = lambda: [t for t in self._speech_ends() if t >= closing_ns]  # noqa: E731
        return closing()[0] if self.wait_for(lambda: bool(closing()), timeout) else None

    def play(self, *args, **kwargs) -> list[tuple[int, str]]:
        outcomes = super().play(*args, **kwargs)
        self.spin_for(DIAGNOSTICS_WAIT_S)  # the nodes' counters after the last reply
        return outcomes

    def records(self, name: str, markers: list[QuestionMarker], outcomes: list[tuple[int, str]]) -> list[TurnRecord]:
        records = super().records(name, markers, outcomes)
        ends = self._speech_ends()
        finals = [msg.data for topic, _, msg in self.recorded if topic == "asr/final"]  # one speech end before each
        said = contract_words(self.recorded, ends)
        spans = speaking_spans(self.recorded)
        starts = [m.t_start_ns + shift for m, (shift, _) in zip(markers, outcomes)] + [float("inf")]
        for i, (record, marker, (shift_ns, _)) in enumerate(zip(records, markers, outcomes)):
            start, closing = marker.t_start_ns + shift_ns, marker.t_end_ns + shift_ns - int(CLOSING_TOLERANCE_S * 1e9)
            record.early_finals = sum(start <= t < closing for t in ends)
            heard = [(t, text, word) for t, text, word in zip(ends, finals, said) if starts[i] <= t < starts[i + 1]]
            record.heard = " ".join(text for _, text, _ in heard)
            record.words_lost = words_lost(
                [(text, last) for _, text, (last, _) in heard], closed=any(t >= closing for t, _, _ in heard)
            )
            record.withdrawn = sum(resumed for _, _, (_, resumed) in heard)
            record.unconfirmed = sum(last is None for _, _, (last, _) in heard)
            record.talk_over_s = talk_over_s(spans, start, marker.t_end_ns + shift_ns)
            record.recognizer_lag_p90_s = diagnostics_value(self.recorded, "asr_node", "recognizer_lag_p90_s", starts[i + 1])
            # the work: counters as reported at 1 Hz, so a question's share may lean on its neighbour's; their sum is exact
            record.llm_passes = self._counted("predgen_node", "forward_passes", starts[i], starts[i + 1])
            record.synthesized_s = self._counted("tts_node", "synthesized_s", starts[i], starts[i + 1])
        return records

    def _counted(self, node: str, counter: str, from_ns: float, to_ns: float) -> float | None:
        """How far `node`'s `counter` went from `from_ns` to `to_ns`, from its /diagnostics."""
        after = diagnostics_value(self.recorded, node, counter, to_ns)
        return None if after is None else after - (diagnostics_value(self.recorded, node, counter, from_ns) or 0.0)


def endpoint_summary(records: list[TurnRecord], summary: dict, runs: list[GraphRun]) -> dict:
    """summary.json's `endpoint_policies`: per endpoint policy (per run where several
    generation policies ran), latency from the true end of speech and the cut-off questions."""
    tested = [run for run in runs if run.policy != "baseline"]
    several = len({run.policy for run in tested}) > 1
    baseline = summary.get("baseline", {}).get("audio_latency_p50_s")
    result = {}
    for run in tested:
        rows = [r for r in records if r.policy == run.name]
        cut = [r.qid for r in rows if r.early_finals]
        latencies = [r.audio_latency_s for r in rows if r.answered]
        lags = [r.recognizer_lag_p90_s for r in rows if r.recognizer_lag_p90_s is not None]
        overlaps = [r.talk_over_s for r in rows if r.talk_over_s]
        result[run.name if several else run.name.split("@", 1)[1]] = {
            "run": run.name,
            "questions": len(rows),
            "answered": len(latencies),
            "audio_latency_p50_s": percentile(latencies, 0.5),
            "audio_latency_p90_s": percentile(latencies, 0.9),
            "false_endpoint_rate": len(cut) / len(rows) if rows else None,
            "cut_off": cut,
            "without_final": [r.qid for r in rows if not r.heard],  # a final lost, or merged into the next question's
            "recognizer_lag_p90_s_max": max(lags) if lags else None,  # the worst p90 asr_node reported during the run
            "talk_over_rate": len(overlaps) / len(rows) if rows else None,
            "talk_over_p90_s": percentile(overlaps, 0.9),
            "words_lost": [r.qid for r in rows if r.words_lost],
            "replies_withdrawn": sum(r.withdrawn or 0 for r in rows),  # times the voice came back after a final: replies held
            "finals_without_contract": sum(r.unconfirmed or 0 for r in rows),  # neither confirmed nor resumed: must be 0
            "llm_passes_per_question": _mean([r.llm_passes for r in rows]),
            "synthesized_s_per_question": _mean([r.synthesized_s for r in rows]),
            "baseline_audio_latency_p50_s": baseline,
            "speedup_vs_baseline_p50": summary[run.name]["speedup_vs_baseline_p50"],
        }
    return result


def _mean(values: list[float | None]) -> float | None:
    """None when a node never reported its counter (a run recorded before it had one)."""
    return None if not values or any(v is None for v in values) else sum(values) / len(values)
