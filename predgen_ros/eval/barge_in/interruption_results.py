"""What a run of speech over the robot scored: each trial's result, and per policy the
counts the interruption evaluation reports (eval/barge_in/interruptions.py runs the trials)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..hearing.asr_quality import reference_words, word_errors
from ..records import percentile
from .interruption_bag import KINDS

SILENCE = "silence"  # a trial with nothing said over the reply


@dataclass
class TrialResult:
    policy: str
    number: int
    kind: str
    question: str
    event: str
    spoke: bool = False  # the robot answered the request
    event_over_speech: bool = False  # the robot's voice reacted to the event, or spoke on for REACTION_S after its onset
    paused: bool = False
    resumed: bool = False
    stopped: bool = False
    new_turn: str = ""  # the transcript of a turn made after the event, if any
    silence_s: float | None = None  # barge-in: the event's onset to the pause or stop
    talked_on_s: float | None = None  # a barge-in the voice never paused for: the onset to its reply's own end
    onset_at: float | None = None  # wall time of the event's first voiced sample (to find it in a recording of the run)
    paused_early: bool = False  # the voice paused before the event, with the user silent: its own voice paused it
    answered: bool = False
    played: str = ""  # tts/played after the stop
    history: str = ""  # the answer's previous_reply
    ran_on: bool = False  # the robot did not fall silent after the trial: the evaluation stopped it
    never_silent: bool = False  # ... and it went on talking through EVAL_STOPS stops: its hearing ends here
    heard: list[str] = field(default_factory=list)  # with asr.record_dir: "NNNN.wav: final" of the trial's utterances

    @property
    def false_stop(self) -> bool:
        return self.kind != "barge_in" and self.stopped

    @property
    def lost(self) -> bool:
        """A request left without its whole reply: none came, an acknowledgement or a burst
        stopped it, or a barge-in got no answer."""
        if not self.spoke:
            return True
        return self.false_stop if self.kind != "barge_in" else (self.event_over_speech and not self.answered)

    @property
    def history_matches(self) -> bool:
        return bool(self.played) and self.history == self.played


def summarize(results: list[TrialResult]) -> dict:
    """Per policy: the counts eval/barge_in/interruptions.py's docstring defines, over events that came while the robot spoke."""
    summary = {}
    for policy in dict.fromkeys(r.policy for r in results):
        mine = [r for r in results if r.policy == policy and r.spoke and r.event_over_speech]
        row = {"trials": sum(r.policy == policy for r in results), "scored": len(mine)}
        for kind in (*KINDS, SILENCE):
            of_kind = [r for r in mine if r.kind == kind]
            n = len(of_kind) or 1
            if kind == SILENCE:
                if of_kind:
                    row[kind] = {
                        "replies": len(of_kind),
                        "self_pauses": sum(r.paused for r in of_kind),
                        "self_stops": sum(r.stopped for r in of_kind),
                        "own_voice_turns": sum(bool(r.new_turn) for r in of_kind),
                    }
            elif kind == "barge_in":
                silences = [r.silence_s for r in of_kind if r.silence_s is not None]
                # what the user waited for silence: a barge-in talked over, until the reply's own end
                waits = silences + [r.talked_on_s for r in of_kind if r.silence_s is None and r.talked_on_s is not None]
                errors = sum(word_errors(reference_words(r.event), reference_words(r.new_turn)) for r in of_kind)
                words = sum(len(reference_words(r.event)) for r in of_kind)
                row[kind] = {
                    "events": len(of_kind),
                    "missed": sum(not r.stopped for r in of_kind),
                    "silence_p50_s": percentile(silences, 0.5),
                    "silence_p90_s": percentile(silences, 0.9),
                    "missed_talked_on_s": sorted(
                        round(r.talked_on_s, 3) for r in of_kind if r.silence_s is None and r.talked_on_s is not None
                    ),
                    "silence_p90_with_missed_s": percentile(waits, 0.9),
                    "answered": sum(r.answered for r in of_kind),
                    "history_matches": sum(r.history_matches for r in of_kind),
                    "turn_wer": errors / words if words else None,
                }
            else:
                row[kind] = {
                    "events": len(of_kind),
                    "false_stops": sum(r.false_stop for r in of_kind),
                    "false_stop_rate": sum(r.false_stop for r in of_kind) / n,
                    "paused": sum(r.paused for r in of_kind),
                    "resumed": sum(r.resumed for r in of_kind),
                    "new_turns": sum(bool(r.new_turn) for r in of_kind),
                }
        events = [r for r in results if r.policy == policy and r.spoke and r.kind != SILENCE]
        row["paused_early"] = {"replies": len(events), "paused": sum(r.paused_early for r in events)}
        row["lost_replies"] = sum(r.lost for r in results if r.policy == policy)
        row["ran_on"] = sum(r.ran_on for r in results if r.policy == policy)
        summary[policy] = row
    return summary


def format_summary(summary: dict) -> str:
    def fmt(x):
        return "-" if x is None else f"{x:.3f}"

    def talked_on(c: dict) -> str:
        seconds = c.get("missed_talked_on_s")
        return f" (talked on {', '.join(f'{s:.2f}' for s in seconds)} s)" if seconds else ""

    def with_missed(c: dict) -> str:
        return f" ({fmt(c['silence_p90_with_missed_s'])} with those)" if c.get("missed_talked_on_s") else ""

    lines = [
        "| policy | trials | acknowledgements: false stops | resumed pauses | new turns | bursts: false stops | resumed pauses | "
        "new turns | barge-ins: missed | silence p50 / p90 (s) | answered | history = played | WER of their turns | "
        "replies with nothing said: self-pauses / self-stops / turns of its own voice | "
        "paused before the event, the user silent | replies lost | "
        "ran on (stopped by the evaluation) |",
        "|---|" + "---:|" * 16,
    ]
    for policy, row in summary.items():
        a, b, c = row["backchannel"], row["burst"], row["barge_in"]
        quiet = row.get(SILENCE)
        own = (
            f"{quiet['self_pauses']} / {quiet['self_stops']} / {quiet['own_voice_turns']} of {quiet['replies']}" if quiet else "-"
        )
        wer = "-" if c["turn_wer"] is None else f"{c['turn_wer']:.1%}"
        early = f"{row['paused_early']['paused']} of {row['paused_early']['replies']}" if "paused_early" in row else "-"
        lines.append(
            f"| {policy} | {row['trials']} | {a['false_stops']}/{a['events']} ({a['false_stop_rate']:.0%}) | {a['resumed']} | {a['new_turns']} "
            f"| {b['false_stops']}/{b['events']} ({b['false_stop_rate']:.0%}) | {b['resumed']} | {b['new_turns']} "
            f"| {c['missed']}/{c['events']}{talked_on(c)} | {fmt(c['silence_p50_s'])} / {fmt(c['silence_p90_s'])}"
            f"{with_missed(c)} "
            f"| {c['answered']}/{c['events']} | {c['history_matches']}/{c['events']} | {wer} | {own} | {early} | {row['lost_replies']} "
            f"| {row['ran_on']} |"
        )
    return "\n".join(lines)


def write_results(out: Path, results: list[TrialResult], summary: dict) -> None:
    rows = [{**asdict(r), "false_stop": r.false_stop, "history_matches": r.history_matches, "lost": r.lost} for r in results]
    (out / "trials.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "report.md").write_text(
        "# Speech over the robot, through the live graph\n\n"
        "Scored over the events that began while the robot spoke (see `predgen_ros/eval/barge_in/interruptions.py`).\n\n"
        + format_summary(summary)
        + "\n"
    )
