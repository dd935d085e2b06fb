"""`predgen-ros eval`: every graph run on one bag, then the scores and the report.

A run is a bag replay through the graph (replay.py: the ASR messages into
predgen_node and tts_node; live_asr.py: the audio into asr_node as well, once
per endpoint policy).  Each run's records are kept as soon as it ends, so a long
evaluation can be resumed; the summary, the ASR quality, the answers' scores and
report.md are written at the end.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from ...engine.params import ENGINE_PARAMS
from ..conversation import score_answers
from ..hearing.asr_quality import asr_quality
from ..hearing.endpoints import format_endpoint_table
from ..hearing.heard_right import (
    format_heard_table,
    heard_summary,
    in_context_first_sentences,
    mark_heard_right,
    reference_first_sentences,
)
from ..records import TurnRecord, mark_matches, summarize, summarize_by_duration
from ..report import format_duration_table, format_table, write_outputs
from .bags import BagError
from .live_asr import endpoint_summary, live_asr_runs, load_audio_replay
from .phases import TurnPhases, format_phase_table, phase_summary, plot_phases
from .replay import EvalSettings, GraphRun, load_replay, run_graph


def graph_runs(settings: EvalSettings) -> list[GraphRun]:
    if settings.endpoint_policies:
        return live_asr_runs(settings)
    return [GraphRun(policy, policy) for policy in settings.policies]


def run_eval(settings: EvalSettings, progress=None) -> tuple[list[TurnRecord], dict]:
    """Every run on the same bag; returns the records and summary.json's content.

    Each run's records are kept in runs/<name>.json as soon as it ends; with
    `resume`, a run found there is not repeated (a long evaluation can be split)."""
    import rclpy

    live = bool(settings.endpoint_policies)
    messages, markers = load_replay(settings.bag, settings.limit)
    quality = asr_quality(messages, markers)
    if live:
        messages = load_audio_replay(settings.bag, settings.limit, settings.audio_chunk_ms)
    runs = graph_runs(settings)
    for run in runs:  # said now, not after the run that would have written over it
        kept, recorded = settings.out / "runs" / f"{run.name}.json", settings.out / f"recorded_{run.name}"
        if recorded.exists() and not (settings.resume and kept.is_file()):
            raise BagError(f"{recorded} already exists: remove it, choose another --out, or --resume")
    (settings.out / "runs").mkdir(parents=True, exist_ok=True)
    records: list[TurnRecord] = []
    rclpy.init()
    try:
        for run in runs:
            kept = settings.out / "runs" / f"{run.name}.json"
            if settings.resume and kept.is_file():
                records += [TurnRecord(**row) for row in json.loads(kept.read_text())]
                continue
            mine = run_graph(run, messages, markers, settings, lambda run=run: progress(run.name) if progress else None)
            kept.write_text(json.dumps([asdict(r) for r in mine]))
            records += mine
    finally:
        rclpy.try_shutdown()
    names = [run.name for run in runs]
    mark_matches(records)
    texts = {m.qid: m.text for m in markers}
    lm, config = scoring_model(settings)
    score_answers(records, texts, lm)
    in_context = in_context_first_sentences(lm, config, records, texts) if settings.keep_history else None
    mark_heard_right(records, reference_first_sentences(lm, config, texts, settings.keep_history), in_context)
    summary = summarize(records, names)
    quality["heard"] = heard_summary(records, texts, names)
    quality["_by_duration"] = summarize_by_duration(records, names)
    if live:
        quality["endpoint_policies"] = endpoint_summary(records, summary, runs)
    phases = {name: [TurnPhases.of_record(r) for r in records if r.policy == name and r.answered] for name in names}
    quality["phases"] = phase_summary(phases)
    plot_phases(settings.out / "phases.png", phases)
    meta = {
        "bag": str(settings.bag),
        "questions": len(markers),
        "overrides": settings.overrides,
        "keep_history": settings.keep_history,
        "live_asr": live,
    }
    write_outputs(settings.out, records, summary, meta, {}, extra=quality)
    (settings.out / "report.md").write_text(markdown_report(summary, quality, records, settings, names))
    return records, {**summary, **quality}


def scoring_model(settings: EvalSettings):
    """The graph's model and engine settings, loaded here after the replay, to score
    relevance and to answer the questions' true texts."""
    from ...engine.models import load_language_model
    from ...engine.params import engine_config, read_params_file

    params = {**read_params_file(settings.params_file), **settings.overrides}
    config, model = engine_config({name: value for name, value in params.items() if name in ENGINE_PARAMS})
    return load_language_model(model), config


def markdown_report(summary: dict, quality: dict, records: list[TurnRecord], settings: EvalSettings, names: list[str]) -> str:
    questions = len({r.qid for r in records})
    lines = [
        f"# predgen_ros evaluation on `{settings.bag}`",
        "",
        f"{questions} questions replayed with their recorded timing, "
        + (
            "their audio through asr_node, predgen_node and tts_node"
            if settings.endpoint_policies
            else "their transcripts through predgen_node and tts_node"
        )
        + f", once per run ({', '.join(names)}), each question only after the reply to the previous one had ended. Audio latency is measured from the true end of speech (the last voiced sample) "
        "to the first audio chunk handed to the sink for the reply to the question's last final transcript. "
        + (
            "The conversation history is kept across questions."
            if settings.keep_history
            else "The questions are independent: predgen_node's history is reset before each."
        ),
        "",
        f"- ASR revision rate: {quality['revision_rate']:.1%} of partial updates change a word other than the last",
        f"- ASR word error rate of the bag's recorded finals against the question text: {quality['wer']:.1%}",
        "",
        "What the words cost (`eval/hearing/heard_right.py`: answered as if heard right = the first sentence is the one the "
        "model gives to the question's true text, after the text replay's history in a conversation; in context = "
        "after the history the run itself had; the WER is of the finals each run's asr_node heard, live ASR only):",
        "",
        format_heard_table(quality["heard"]),
        "- repeat: share of answers whose first six words repeat an earlier answer's in this run; start: share that "
        "begin with the run's most frequent first two words; copy: mean share of "
        "each reply's 4-token runs found in an earlier reply of the run; relev: mean relevance "
        "of each first sentence to its question (log-probability given the question alone minus given other questions "
        "of the bag, see `eval/conversation.py`)",
        "",
        "```",
        format_table(summary),
        "",
        format_duration_table(quality["_by_duration"]),
        "```",
        "",
        "Where the silence goes (`eval/bag_replay/phases.py`: detector lag = the voice detector's end of speech after the true "
        "end, endpoint = the final after the detector's end, LLM = the commit after the final, TTS = the first audio "
        "after the commit; cached = the first sentence's opening came from the audio cache):",
        "",
        "```",
        format_phase_table(quality["phases"]),
        "```",
        "",
        "![phases](phases.png)",
        "",
        *(
            [
                "Endpoint policies (the bag's audio through a live asr_node; a cut-off question got a final before its speech ended):",
                "",
                format_endpoint_table(quality["endpoint_policies"]),
                "",
            ]
            if "endpoint_policies" in quality
            else []
        ),
        "| question | " + " | ".join(f"{p} (s)" for p in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    cells = {(r.qid, r.policy): f"{r.audio_latency_s:.3f}" if r.answered else f"no reply: {r.no_reply}" for r in records}
    for qid in dict.fromkeys(r.qid for r in records):
        lines.append(f"| {qid} | " + " | ".join(cells.get((qid, p), "-") for p in names) + " |")
    lines += ["", "![latency](latency.png)", ""]
    return "\n".join(lines)
