"""`bench`, `frontier` and `passes`: the engine on a virtual clock, and its forward passes."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from ..audio.recognition.text_asr import CHARS_PER_MINUTE
from ..audio.speech.pieces import FIRST_WORDS
from ..engine.config import POLICIES, ConfigError
from .options import (
    ENGINE_OPTIONS,
    MODEL_OPTIONS,
    add_out_option,
    add_param_options,
    check_limit,
    comma_list,
    given_params,
    policy_list,
)

BENCH_ONLY_OPTIONS = {
    "generation.anticipate": "--anticipate",
    "generation.history_tokens": "--history-tokens",
    "generation.history_turns": "--history-turns",
}


def _add_question_options(parser: argparse.ArgumentParser) -> None:
    """The options bench and frontier share: questions, engine settings, model."""
    parser.add_argument(
        "--questions",
        type=Path,
        default=None,
        help="MT-Bench .jsonl or a text file, one question a line (default: MT-Bench turn 1)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument(
        "--turn",
        type=comma_list(int),
        default=[1],
        help="MT-Bench turn; 2 asks each follow-up after turn 1 and the model's own reply to it; 1,2 both (default 1)",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=None,
        help="only questions shorter than this many characters (80 = 8 s of speech at 600 chars/min)",
    )
    parser.add_argument(
        "--params",
        type=Path,
        default=None,
        help="ROS 2 parameter file whose predgen_node section sets the defaults (e.g. config/predgen.yaml)",
    )
    add_param_options(parser, ENGINE_OPTIONS)
    parser.add_argument(
        "--endpoint-delay",
        type=float,
        default=0.0,
        help="the simulated endpoint: the turn ends this long after the user's last word, s (default %(default)g)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=0, help="reply length; 0 (default) stops after the first sentence")
    parser.add_argument(
        "--conversation",
        action="store_true",
        help="ask the questions in one conversation, history kept (default: independent questions, history reset)",
    )
    add_param_options(parser, MODEL_OPTIONS)
    parser.add_argument(
        "--tts-first-words",
        type=int,
        default=FIRST_WORDS,
        help=f"the first audio comes once the first sentence's first clause, or at most this many words, is synthesized; "
        f"0 = the whole sentence (tts_node's tts.first_words; default {FIRST_WORDS})",
    )


def register(sub) -> None:
    bench = sub.add_parser("bench", help="side-by-side latency benchmark of the policies on MT-Bench (virtual clock)")
    _add_question_options(bench)
    bench.add_argument(
        "--policies", type=policy_list, default=list(POLICIES), help="comma-separated, from baseline,preemptive,predgen"
    )
    add_param_options(bench, BENCH_ONLY_OPTIONS)
    bench.add_argument(
        "--chars-per-minute", type=float, default=CHARS_PER_MINUTE, help="user's speaking rate (default %(default)g)"
    )
    bench.add_argument("--out", type=Path, default=None, help="write summary.json, turns.csv and latency.png here")
    bench.set_defaults(run=cmd_bench)

    frontier = sub.add_parser(
        "frontier", help="many verifier settings against one baseline on one loaded model: speedup vs quality loss"
    )
    _add_question_options(frontier)
    frontier.add_argument(
        "--settings",
        type=comma_list(str),
        required=True,
        help="comma-separated KIND[=VALUE][+anticipate], e.g. exact,exact+anticipate,margin=0.25,minp=0.5,topk=3",
    )
    frontier.add_argument("--rates", type=comma_list(float), default=[CHARS_PER_MINUTE], help="speaking rates, one run each")
    frontier.add_argument("--history", type=comma_list(int), default=None, help="history budgets in tokens, one run each")
    add_out_option(frontier, "frontier-out", "frontier.md, frontier.json, frontier.png and one bench folder per run")
    frontier.set_defaults(run=cmd_frontier)

    passes = sub.add_parser(
        "passes", help="forward-pass cost per backend and weight format against the memory-bandwidth floor (one run)"
    )
    passes.add_argument(
        "--settings",
        default=None,
        help="comma-separated backend:variant (default: transformers:float32,transformers:bfloat16,"
        "llama_cpp:q4_1,llama_cpp:q8_0,llama_cpp:f16)",
    )
    passes.add_argument("--threads", type=int, default=0, help="llama_cpp threads (default 0: every core)")
    passes.add_argument("--out", type=Path, default=None, help="write passes.json and passes.md here")
    passes.set_defaults(run=cmd_passes)


def _bench_params(args: argparse.Namespace) -> dict:
    """Defaults, then the parameter file, then the options given on the command line."""
    from ..engine.params import read_params_file

    params = read_params_file(args.params) if args.params else {}
    params.update(given_params(args, {**ENGINE_OPTIONS, **MODEL_OPTIONS, **BENCH_ONLY_OPTIONS}))
    params["generation.max_new_tokens"] = args.max_new_tokens  # the benchmark measures the first sentence
    return params


def _bench_job(args: argparse.Namespace):
    """Questions and settings checked (one-line errors) before the model loads."""
    from ..engine.params import engine_config
    from ..eval.benchmark.bench_job import BenchJob, questions_of_turns

    check_limit(args.limit)
    if not set(args.turn) <= {1, 2} or len(set(args.turn)) < len(args.turn):
        raise ConfigError(f"--turn takes 1, 2 or 1,2, got {','.join(map(str, args.turn))}")
    if 2 in args.turn and args.conversation:
        raise ConfigError("--turn 2 asks each follow-up after its own turn 1; it cannot be combined with --conversation")
    questions = questions_of_turns(args.questions, args.limit, args.turn)
    if args.max_chars is not None:
        questions = [q for q in questions if len(q.text) < args.max_chars]
        if not questions:
            raise ConfigError(f"no question is shorter than --max-chars {args.max_chars}")
    if args.tts_first_words < 0:
        raise ConfigError(f"--tts-first-words is a number of words, 0 or more; got {args.tts_first_words}")
    params = _bench_params(args)
    config, model_params = engine_config(params)
    if args.endpoint_delay < 0:
        raise ConfigError(f"--endpoint-delay is a number of seconds, 0 or more; got {args.endpoint_delay:g}")
    return BenchJob(
        questions,
        config,
        args.endpoint_delay,
        model_params,
        args.conversation,
        tuple(args.turn),
        args.max_chars,
        args.tts_first_words,
    )


def cmd_bench(args: argparse.Namespace) -> int:
    from ..eval import report
    from ..eval.benchmark import bench

    job = _bench_job(args)
    policies = args.policies if "baseline" in args.policies else ["baseline"] + args.policies
    job.load()
    records, summary, by_duration, ties = job.run(bench.policy_variants(job.config, policies), args.chars_per_minute)
    config = job.config
    turns = f", at most {config.history_turns} turns" if config.history_turns else ""
    conversation = f" in one conversation (history {config.history_tokens} tokens{turns})" if args.conversation else ""
    turn = (
        f" (MT-Bench turns {','.join(map(str, args.turn))}; turn 2 after turn 1 and the model's reply)" if 2 in args.turn else ""
    )
    anticipate = ", anticipation" if config.anticipate else ""
    print(
        f"\n{len(job.questions)} questions{turn}{conversation}, verifier={config.verifier.describe()}{anticipate}, "
        f"decoder={config.decoder}, copy ban={config.copy_ban or 'off'}{' +user' if config.copy_ban_user else ''}, opening ban={config.copy_ban_opening or 'off'}, endpoint delay={job.endpoint_delay}s, TTS first words={job.tts_first_words or 'off'}, {job.lm.describe()}"
    )
    print(report.format_table(summary))
    print(report.format_duration_table(by_duration))
    for policy, rows in ties.items() if config.verifier.lossless else ():  # top-K differs by design
        _print_mismatches(policy, rows)
    if args.out:
        meta = job.meta(chars_per_minute=args.chars_per_minute)
        report.write_outputs(args.out, records, summary, meta, ties, extra={"_by_duration": by_duration})
        print(f"wrote {args.out}/summary.json, turns.csv, latency.png")
    return 0


def _print_mismatches(label: str, rows: list[dict]) -> None:
    for row in rows:
        gap = (
            f"logit gap {row['logit_gap']:.4f} ({row['tokens'][0]!r} vs baseline {row['tokens'][1]!r})"
            if "logit_gap" in row
            else "length differs"
        )
        print(f"  {label} q{row['qid']}: first sentence differs at token {row['position']}: {gap}")


def cmd_frontier(args: argparse.Namespace) -> int:
    from ..eval import report
    from ..eval.benchmark.frontier import format_frontier, frontier_variants, run_label, write_frontier

    job = _bench_job(args)
    if args.history and not args.conversation:
        raise ConfigError("--history sets the budget of a conversation's history: add --conversation")
    variants = frontier_variants(args.settings, job.config)  # a bad setting fails before the model loads
    if any(rate <= 0 for rate in args.rates):
        raise ConfigError(f"--rates must be > 0 characters per minute, got {args.rates}")
    job.load()
    runs = []
    for rate in args.rates:
        for history in args.history or [None]:
            label = run_label(rate, history)
            budget = {} if history is None else {"history_tokens": history}
            runs_variants = {name: replace(config, **budget) for name, config in variants.items()}
            records, summary, by_duration, ties = job.run(runs_variants, rate, desc=label)
            meta = job.meta(chars_per_minute=rate, settings=args.settings, **budget)
            report.write_outputs(args.out / label, records, summary, meta, ties, extra={"_by_duration": by_duration})
            runs.append(
                {
                    "run": label,
                    "chars_per_minute": rate,
                    "history_tokens": history,
                    "summary": summary,
                    "by_duration": by_duration,
                }
            )
            print(f"\n{label}:\n{report.format_table(summary)}\n{report.format_duration_table(by_duration)}")
            for name, config in variants.items():
                if name != "baseline" and config.verifier.lossless:  # lossless: any difference is a bug or a near tie
                    _print_mismatches(name, ties[name])
    write_frontier(args.out, runs, job.meta(settings=args.settings, rates=args.rates, history=args.history))
    rule = job.config.verifier
    guards = f"max-gap={rule.max_gap:g} (topk) exact-head={rule.exact_head} copy-guard={rule.copy_guard}"
    print(f"\n{len(job.questions)} questions; guards of the lossy verifiers: {guards}\n{format_frontier(runs)}")
    print(f"wrote {args.out}/frontier.md, frontier.json, frontier.png and one folder per run")
    return 0


def cmd_passes(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..eval.benchmark import passes

    settings = [passes.Setting.parse(text.strip()) for text in (args.settings or passes.DEFAULT_SETTINGS).split(",")]
    if args.threads < 0:
        raise ConfigError(f"--threads must be >= 0 (0: every core), got {args.threads}")
    bandwidth = passes.memory_bandwidth()
    rows = []
    for setting in tqdm(settings, desc="passes", unit="setting"):
        rows.append(passes.measure_in_child(setting, args.threads))
    table = passes.format_table(rows, bandwidth)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "passes.json").write_text(json.dumps({"bandwidth": bandwidth, "rows": rows}, indent=1))
        (args.out / "passes.md").write_text(table + "\n")
        print(f"wrote {args.out}/passes.json, passes.md")
    return 0
