"""`predgen-ros endpoints --sweep`: many endpoint rules tuned from one pass over a bag.

One pass of the bag's audio through the streaming ASR with a recorder in the
endpointer's place: it never ends an utterance before `observe_s` of silence,
and at every pause of at least `pause_s` it keeps Smart Turn's probability
(asked when the pause reaches each of the grid's short pauses, as a policy with
that pause asks it) and, chunk by chunk, the silence so far and
the LLM's estimate for the words heard.  Any rule of the four policies can
then be replayed on those pauses in microseconds: a rule cuts a question off
if it fires at a pause that ends before the question's speech does, and its
delay is when it fires at the question's last pause.

What the replay cannot see: after an early final the real ASR starts a new
utterance, so later estimates of a question that was cut may differ a little;
the cut itself, and the delays of the questions that are not cut, are what a
run of the policy measures (the sweep's fixed rows reproduce `endpoints`').
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ...audio.recognition.asr import StreamingAsr
from ...audio.recognition.endpoint import EndpointConfig, Endpointer
from ...audio.recognition.recognizers import make_recognizer
from ...audio.recognition.vad import make_vad
from ..bag_replay.bags import QuestionMarker
from ..bag_replay.live_asr import CLOSING_TOLERANCE_S  # a pause this close to the question's end is its last one
from ..records import percentile
from .endpoints import PolicyRun, hear

# The grid's short pauses: a policy asks Smart Turn when the pause reaches its own pause_s,
# and the model hears that much silence at the end (a score asked at 0.1 s misjudged every
# rule with a longer pause: through the graph, pause 0.25 s cut 27 questions where the sweep
# said 6).
PAUSES_S = (0.1, 0.15, 0.2, 0.25, 0.3)


@dataclass
class Pause:
    t_voice_end: float  # stream time of the last voiced audio before it
    audio: dict[float, float]  # Smart Turn's probability, asked when the pause reached each of PAUSES_S
    steps: list[tuple[float, float | None]] = field(default_factory=list)  # (silence so far, text estimate) per chunk


class PauseRecorder(Endpointer):
    """Ends an utterance only after the config's `max_silence_s`; records every pause of
    at least the config's `pause_s`, and Smart Turn's probability at each of PAUSES_S."""

    def __init__(self, config: EndpointConfig, audio_estimate, clock):
        super().__init__(config, audio_estimate)
        self.clock = clock
        self.pauses: list[Pause] = []
        self._open: Pause | None = None

    def speech(self) -> None:
        super().speech()
        self._open = None

    def ends(self, silence_s: float, text_estimate: float | None = None) -> bool:
        if silence_s >= self.config.pause_s:
            if self._open is None:
                self._open = Pause(self.clock() - silence_s, {})
                self.pauses.append(self._open)
            for pause_s in PAUSES_S:
                if silence_s >= pause_s and pause_s not in self._open.audio:
                    self._open.audio[pause_s] = self.audio_estimate()
            self._open.steps.append((silence_s, text_estimate))
        return silence_s >= self.config.max_silence_s


def observe_pauses(
    audio: list[tuple[float, bytes]],
    vad: str,
    text_estimate,
    smart_turn,
    pause_s: float,
    observe_s: float,
    progress=None,
    recognizer: str = "whisper",
) -> tuple[list[Pause], PolicyRun]:
    """Every pause of the bag's speech, and what the ASR heard (for the text signal's AUC)."""
    asr = StreamingAsr(make_recognizer(recognizer), vad=make_vad(vad))
    recorder = PauseRecorder(
        EndpointConfig(policy="fused", pause_s=pause_s, max_silence_s=observe_s),
        lambda: smart_turn.probability(asr.utterance_audio),
        lambda: asr.stream_time,
    )
    asr.endpointer = recorder
    heard = hear(f"observe {observe_s:g} s", asr, audio, text_estimate, progress)
    return recorder.pauses, heard


@dataclass(frozen=True)
class Rule:
    """One endpoint rule: the silence it needs, given the estimates."""

    policy: str
    pause_s: float = 0.15
    silence_s: float = 0.35
    max_silence_s: float = 1.0
    audio_threshold: float = 0.5
    text_threshold: float = 1e-3

    def needs(self, audio: float | None, text: float | None) -> float:
        if self.policy == "fixed":
            return self.silence_s
        audio_ok = audio is not None and audio >= self.audio_threshold
        text_ok = text is not None and text >= self.text_threshold
        complete = {"smart_turn": audio_ok, "llm": text_ok, "fused": audio_ok and text_ok}[self.policy]
        if complete:
            return self.pause_s
        if self.policy == "fused" and (audio_ok or text_ok):
            return self.silence_s
        return self.max_silence_s

    def fires(self, pause: Pause) -> float | None:
        """The silence at which the rule ends the utterance in this pause, if it does."""
        for silence, text in pause.steps:
            if silence >= self.needs(pause.audio.get(self.pause_s), text):
                return silence
        return None

    @property
    def label(self) -> str:
        if self.policy == "fixed":
            return f"fixed {self.silence_s:g}"
        parts = [self.policy, f"pause {self.pause_s:g}"]
        if self.policy in ("smart_turn", "fused"):
            parts.append(f"audio>={self.audio_threshold:g}")
        if self.policy in ("llm", "fused"):
            parts.append(f"text>={self.text_threshold:g}")
        if self.policy == "fused":
            parts.append(f"one {self.silence_s:g}")
        return " ".join(parts + [f"max {self.max_silence_s:g}"])


def score_rule(rule: Rule, pauses: list[Pause], markers: list[QuestionMarker], t0_ns: int) -> dict:
    """The rule replayed on every question's pauses: delays from the true end of speech, cut-off questions."""
    delays, cut = [], []
    for i, marker in enumerate(markers):
        start, end = (marker.t_start_ns - t0_ns) / 1e9, (marker.t_end_ns - t0_ns) / 1e9
        stop = (markers[i + 1].t_start_ns - t0_ns) / 1e9 if i + 1 < len(markers) else float("inf")
        mine = [p for p in pauses if start <= p.t_voice_end < stop]
        inner = [p for p in mine if p.t_voice_end < end - CLOSING_TOLERANCE_S]
        if any(rule.fires(p) is not None for p in inner):
            cut.append(marker.qid)
        last = [p for p in mine if p.t_voice_end >= end - CLOSING_TOLERANCE_S]
        fired = rule.fires(last[0]) if last else None
        if fired is not None:
            delays.append(last[0].t_voice_end + fired - end)
    return {
        "rule": rule.label,
        **{k: getattr(rule, k) for k in ("policy", "pause_s", "silence_s", "max_silence_s", "audio_threshold", "text_threshold")},
        "endpoint_delay_p50_s": percentile(delays, 0.5),
        "endpoint_delay_p90_s": percentile(delays, 0.9),
        "false_endpoint_rate": len(cut) / len(markers),
        "cut_off": cut,
    }


def sweep_rules() -> list[Rule]:
    """The grid: fixed silences, and each estimate-driven policy over its thresholds and waits."""
    rules = [Rule("fixed", silence_s=s) for s in (0.25, 0.35, 0.5, 0.65, 0.8, 1.0)]
    pauses, maxes = PAUSES_S, (0.8, 1.0, 1.2)
    audio_thresholds = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99)
    text_thresholds = (1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.2, 0.3, 0.5)
    for pause, most, a in itertools.product(pauses, maxes, audio_thresholds):
        rules.append(Rule("smart_turn", pause, max_silence_s=most, audio_threshold=a))
    for pause, most, t in itertools.product(pauses, maxes, text_thresholds):
        rules.append(Rule("llm", pause, max_silence_s=most, text_threshold=t))
    for pause, one, most, a, t in itertools.product(
        pauses, (0.35, 0.5, 0.55, 0.6, 0.65), maxes, audio_thresholds, text_thresholds
    ):
        if pause < one < most:
            rules.append(Rule("fused", pause, one, most, a, t))
    return rules


def best_rules(scored: list[dict], max_delay_s: float, max_false_rate: float) -> list[dict]:
    """Per policy, the rule with the fewest cut-off questions among those whose median
    delay meets `max_delay_s` (then the fastest), and whether it also meets `max_false_rate`."""
    best = {}
    for row in scored:
        if row["endpoint_delay_p50_s"] is None or row["endpoint_delay_p50_s"] > max_delay_s:
            continue
        key = (row["false_endpoint_rate"], row["endpoint_delay_p50_s"], row["endpoint_delay_p90_s"] or 0)
        if row["policy"] not in best or key < best[row["policy"]][0]:
            best[row["policy"]] = (key, row)
    return [{**row, "meets_false_rate": row["false_endpoint_rate"] <= max_false_rate} for _, row in best.values()]


def pareto(scored: list[dict]) -> list[dict]:
    """The rules no other rule of the same policy beats on both median delay and cut-off questions."""
    timed = [r for r in scored if r["endpoint_delay_p50_s"] is not None]

    def beaten(r: dict) -> bool:
        return any(
            o["policy"] == r["policy"]
            and o is not r
            and o["endpoint_delay_p50_s"] <= r["endpoint_delay_p50_s"]
            and o["false_endpoint_rate"] <= r["false_endpoint_rate"]
            and (o["endpoint_delay_p50_s"], o["false_endpoint_rate"]) != (r["endpoint_delay_p50_s"], r["false_endpoint_rate"])
            for o in timed
        )

    return sorted((r for r in timed if not beaten(r)), key=lambda r: (r["policy"], r["endpoint_delay_p50_s"]))


FRONTIER_LIMITS_S = (0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.8)


def format_sweep(scored: list[dict], best: list[dict]) -> str:
    from ..report import fmt

    def row(r: dict, limit: str = "") -> str:
        return (
            f"| {limit}{r['rule']} | {fmt(r['endpoint_delay_p50_s'], '.3f')} s | {fmt(r['endpoint_delay_p90_s'], '.3f')} s | "
            f"{fmt(r['false_endpoint_rate'], '.1%')} |"
        )

    header = ["| rule | endpoint delay p50 | p90 | false endpoints |", "|---|---:|---:|---:|"]
    fixed = [r for r in scored if r["policy"] == "fixed"]
    frontier = []
    for limit in FRONTIER_LIMITS_S:
        for policy in ("smart_turn", "llm", "fused"):
            within = [
                r
                for r in scored
                if r["policy"] == policy and r["endpoint_delay_p50_s"] is not None and r["endpoint_delay_p50_s"] <= limit
            ]
            if within:
                frontier.append(
                    row(min(within, key=lambda r: (r["false_endpoint_rate"], r["endpoint_delay_p50_s"])), f"≤ {limit:g} s: ")
                )
    return "\n".join(
        [
            "Fixed silences:",
            "",
            *header,
            *map(row, fixed),
            "",
            "Per policy, the fewest cut-off questions within the target delay:",
            "",
            *header,
            *map(row, best),
            "",
            "Per median-delay limit and policy, the rule with the fewest cut-off questions:",
            "",
            *header,
            *frontier,
        ]
    )
