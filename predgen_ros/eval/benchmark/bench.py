"""Side-by-side latency benchmark of the policies on a virtual clock (DESIGN.md §4-5).

Every setting (a policy with its engine configuration, under a label) answers
the same questions with the same loaded model, sentence detector and Piper
voice; the label "baseline" is the reference of every ratio.  Events happen at their scheduled times; compute
advances the clock by its measured wall time; idle gaps are skipped.  Every
latency is measured from the end of user speech, including any wait for work
that was in flight when the user stopped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from ...audio.speech.tts import PiperSynthesizer
from ...engine.config import EngineConfig
from ...engine.lm import LanguageModel
from ...engine.metrics import turn_measures
from ...engine.session import Session
from ...engine.turn import TurnStats
from ...events import Emission, Heard
from ..records import TurnRecord, mark_matches
from .clock import VirtualClock
from .questions import Question, TimedEvent, speak, whole_turn


def deliver(session: Session, event: TimedEvent) -> None:
    if event.kind is Heard.TURN:
        session.hear(event.turn, event.t)
    else:
        session.end_of_turn(event.t)


def run_turn(session: Session, tts: PiperSynthesizer, events: list[TimedEvent], clock: VirtualClock) -> float:
    """Play one utterance into the session; returns the time of the first audio.

    Candidate sentences' openings are pre-synthesized when the LLM has nothing to do;
    their synthesis time is spent on the same clock (one shared CPU).  The first
    audio comes once the committed sentence's opening is synthesized (audio/speech/pieces.py).
    """
    pending = deque(events)
    candidate = None  # the opening to synthesize ahead
    first_audio = None
    while True:
        while pending and pending[0].t <= clock():
            deliver(session, pending.popleft())
        if session.has_work():
            for kind, text in session.step():
                if kind in (Emission.CANDIDATE, Emission.BEGINNING):
                    candidate = tts.opening_ahead(text, finished=kind is Emission.CANDIDATE)
                elif kind is Emission.COMMIT:  # once per turn
                    pieces = tts.pieces(text) if text else []
                    if pieces:
                        tts.synthesize(pieces[0])  # instant when pre-synthesized
                    first_audio = clock()
                    for piece in pieces[1:]:  # synthesized while the opening plays, on the same CPU
                        tts.synthesize(piece)
                elif kind is Emission.DONE:
                    return first_audio
        elif candidate is not None:
            tts.synthesize(candidate)  # its opening only, as tts_node does
            candidate = None
        elif pending:
            clock.skip_to(pending[0].t)
        else:
            raise RuntimeError("the session went idle without a reply")


def turn_record(
    question: Question, policy: str, turn: TurnStats, t_start: float, t_end: float, first_audio: float, lm: LanguageModel
) -> TurnRecord:
    logprob, not_top = lm.continuation_scores(turn.prompt_ids, turn.first_sentence_ids)
    return TurnRecord(
        qid=question.qid,
        policy=policy,
        speech_s=t_end - t_start,
        **turn_measures(turn, t_end, first_audio),
        first_sentence=turn.first_sentence,
        first_sentence_logprob=logprob,
        not_top_share=not_top,
        reply=turn.reply,
        first_sentence_ids=turn.first_sentence_ids,
        prompt_ids=turn.prompt_ids,
    )


def near_tie_report(records: list[TurnRecord], lm: LanguageModel, policy: str) -> list[dict]:
    """For each first sentence that differs from baseline's: where the tokens part
    and the logit gap between the two choices under the complete prompt."""
    baseline = {r.qid: r for r in records if r.policy == "baseline"}
    report = []
    for r in records:
        if r.policy != policy or r.matches_baseline is not False:
            continue
        ours, theirs = r.first_sentence_ids, baseline[r.qid].first_sentence_ids
        split = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        entry = {
            "qid": r.qid,
            "position": split,
            "policy_sentence": r.first_sentence,
            "baseline_sentence": baseline[r.qid].first_sentence,
        }
        if split < min(len(ours), len(theirs)):
            logits = lm.token_logits(r.prompt_ids + ours[:split], [ours[split]])[0]
            entry["logit_gap"] = float(logits[theirs[split]] - logits[ours[split]])
            entry["tokens"] = [lm.decode([ours[split]]), lm.decode([theirs[split]])]
        report.append(entry)
    return report


@dataclass
class BenchSettings:
    variants: dict[str, EngineConfig]  # label -> configuration; "baseline" is the reference
    chars_per_second: float = 10.0
    endpoint_delay: float = 0.0
    conversation: bool = False  # keep the history across questions, like a robot dialogue


# The user starts the next question this long after the previous reply: longer
# than the late-copy window, so a question that starts like the previous one is new.
QUESTION_GAP_S = 2.0


def context_history(lm: LanguageModel, config: EngineConfig, context: tuple[str, ...]) -> list[tuple[str, str]]:
    """The earlier turns of a dialogue with the model's own replies (baseline's greedy
    decoding, untimed), so that every policy hears the follow-up after the same history."""
    session = Session(lm, replace(config, policy="baseline"), VirtualClock())
    for text in context:
        whole_turn(session, text)
        while session.has_work():
            session.step()
    return list(session.history)


def policy_variants(config: EngineConfig, policies: list[str]) -> dict[str, EngineConfig]:
    """One setting per policy, labelled by the policy's name."""
    return {p: replace(config, policy=p) for p in policies}


def run_bench(
    lm: LanguageModel, tts: PiperSynthesizer, questions: list[Question], settings: BenchSettings, progress=None
) -> list[TurnRecord]:
    """All settings on all questions; one session (and one virtual clock) per setting on
    the shared model.  Independent questions reset the history before each one (to
    the question's own context: MT-Bench turn 1 and its reply before turn 2)."""
    clocks = {label: VirtualClock() for label in settings.variants}
    sessions = {label: Session(lm, config, clocks[label]) for label, config in settings.variants.items()}
    reference = settings.variants["baseline"]
    records = []
    for question in questions:
        events, t_end = speak(question.text, settings.chars_per_second, settings.endpoint_delay)
        history = context_history(lm, reference, question.context) if question.context and not settings.conversation else []
        for policy, session in sessions.items():
            if not settings.conversation:
                session.reset(history)
            tts.clear()  # no policy may reuse audio another one synthesized
            clock = clocks[policy]
            start = clock() + QUESTION_GAP_S
            first_audio = run_turn(session, tts, [replace(e, t=start + e.t) for e in events], clock)
            records.append(turn_record(question, policy, session.turn, start, start + t_end, first_audio, lm))
            if progress:
                progress(question, policy)
    mark_matches(records)
    return records
