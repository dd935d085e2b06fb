"""The `predgen-ros` command."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from .audio.asr import VADS
from .audio.endpoint import DEFAULT_ENDPOINT_POLICIES
from .engine.config import DECODERS, POLICIES, VERIFIERS, ConfigError, ModelError


class _OneLineParser(argparse.ArgumentParser):
    """Usage mistakes are reported as one line, like every other error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _policy_list(text: str) -> list[str]:
    policies = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise argparse.ArgumentTypeError(f"unknown policy {', '.join(unknown) or text!r}: choose from {', '.join(POLICIES)}")
    return policies


def _comma_list(cast):
    def parse(text: str) -> list:
        try:
            values = [cast(item.strip()) for item in text.split(",") if item.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {cast.__name__}, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {cast.__name__}, got {text!r}")
        return values

    return parse


def _add_bench_options(parser: argparse.ArgumentParser) -> None:
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
        type=_comma_list(int),
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
    parser.add_argument(
        "--verifier",
        choices=VERIFIERS,
        default=None,
        help="exact (default, lossless), topk (the paper's setting), margin or minp",
    )
    parser.add_argument("--k", type=int, default=None, help="K of the top-K verifier (default 3)")
    parser.add_argument(
        "--max-gap", type=float, default=None, help="top-K: a kept token lies at most this many nats below the most likely one"
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=None,
        help="margin: a kept token lies at most this many nats below the top one (default 0.25)",
    )
    parser.add_argument(
        "--min-p",
        type=float,
        default=None,
        help="minp: a kept token has at least this share of the top token's probability (default 0.5)",
    )
    parser.add_argument(
        "--exact-head", type=int, default=None, help="all but exact: the reply's first N tokens must be the most likely one"
    )
    parser.add_argument(
        "--copy-guard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="all but exact: a runner-up token may not copy an earlier reply",
    )
    parser.add_argument("--decoder", choices=DECODERS, default=None, help="ar (default) or jacobi")
    parser.add_argument("--jacobi-block", type=int, default=None, help="tokens per Jacobi iteration (default 8)")
    parser.add_argument(
        "--copy-ban",
        type=int,
        default=None,
        help="a reply never completes a run of this many tokens of an earlier reply in the prompt (default 4; 0: plain greedy)",
    )
    parser.add_argument(
        "--copy-ban-user",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the copy ban also covers the user's words: the reply does not echo the request (default: off)",
    )
    parser.add_argument(
        "--copy-ban-opening",
        type=int,
        default=None,
        help="a reply does not begin with the first N tokens an earlier reply began with (default 0: off)",
    )
    parser.add_argument(
        "--endpoint-delay", type=float, default=None, help="seconds from the final transcript to the end of turn (default 0)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=0, help="reply length; 0 (default) stops after the first sentence")
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=None,
        help="with --max-new-tokens: the reply ends after this many sentences (default 2; 0: no limit)",
    )
    parser.add_argument(
        "--conversation",
        action="store_true",
        help="ask the questions in one conversation, history kept (default: independent questions, history reset)",
    )
    _add_model_options(parser)


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help="a .gguf file or a local Hugging Face model folder (default: embedded SmolLM2-135M-Instruct)",
    )
    parser.add_argument(
        "--backend", default=None, help="auto (llama_cpp on a CPU, transformers on CUDA), llama_cpp, transformers"
    )
    parser.add_argument("--weights", default=None, help="llama_cpp, embedded model: f16 (default), q8_0, q4_1 (as shipped)")
    parser.add_argument("--threads", type=int, default=None, help="llama_cpp: threads per pass (default 0: every core)")
    parser.add_argument("--device", default=None, help="transformers: auto, cpu or cuda[:N] (default: auto)")
    parser.add_argument(
        "--dtype", default=None, help="transformers: auto (float32 on CPU, float16 on CUDA), float32, float16, bfloat16"
    )
    parser.add_argument("--system-prompt", default=None, help="what the model is told before the conversation (default: config)")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="predgen-ros", description="Speculative LLM replies for ROS 2 voice dialogue.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)

    bench = sub.add_parser("bench", help="side-by-side latency benchmark of the policies on MT-Bench (virtual clock)")
    _add_bench_options(bench)
    bench.add_argument(
        "--policies", type=_policy_list, default=list(POLICIES), help="comma-separated, from baseline,preemptive,predgen"
    )
    bench.add_argument(
        "--anticipate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="predgen: also speculate on the model's guess of how the user's sentence ends (default: on; --no-anticipate: off)",
    )
    bench.add_argument("--chars-per-minute", type=float, default=600.0, help="speaking rate of the simulated user (default 600)")
    bench.add_argument("--history-tokens", type=int, default=None, help="history kept in the prompt, in tokens (default 1024)")
    bench.add_argument(
        "--history-turns",
        type=int,
        default=None,
        help="at most this many earlier turns in the prompt (default 1; 0: as many as --history-tokens holds)",
    )
    bench.add_argument("--out", type=Path, default=None, help="write summary.json, turns.csv and latency.png here")

    frontier = sub.add_parser(
        "frontier", help="many verifier settings against one baseline on one loaded model: speedup vs quality loss"
    )
    _add_bench_options(frontier)
    frontier.add_argument(
        "--settings",
        type=_comma_list(str),
        required=True,
        help="comma-separated KIND[=VALUE][+anticipate], e.g. exact,exact+anticipate,margin=0.25,minp=0.5,topk=3",
    )
    frontier.add_argument(
        "--rates",
        type=_comma_list(float),
        default=[600.0],
        help="speaking rates in characters per minute, one run each (default 600)",
    )
    frontier.add_argument(
        "--history",
        type=_comma_list(int),
        default=None,
        help="history budgets in tokens, one run each (with --conversation; default 1024)",
    )
    frontier.add_argument(
        "--out",
        type=Path,
        default=Path("frontier-out"),
        help="frontier.md, frontier.json, frontier.png and one bench folder per run (default frontier-out)",
    )

    up = sub.add_parser(
        "bringup", help="start asr_node, predgen_node and tts_node as processes (pip-only stand-in for ros2 launch)"
    )
    up.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    up.add_argument("--policy", choices=POLICIES, default=None, help="predgen_node policy")
    up.add_argument("--asr-backend", default=None, help="pocketsphinx, vosk or text")
    up.add_argument("--asr-input", default=None, help="'microphone' or a WAV file (pocketsphinx / vosk)")
    up.add_argument("--sink", default=None, help="speaker, wav, topic or none")
    up.add_argument("--wav-dir", default=None, help="folder for the wav sink")
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_assignment,
        help="any parameter, e.g. --set verifier.kind=exact (repeatable; routed to the node that declares it)",
    )
    _add_model_options(up)

    demo = sub.add_parser("demo", help="speak a robot conversation into the ROS 2 graph, once per policy; replies as WAV files")
    demo.add_argument(
        "--questions",
        type=Path,
        default=None,
        help="MT-Bench .jsonl or a text file, one utterance a line (default: the embedded robot conversation)",
    )
    demo.add_argument("--limit", type=int, default=8, help="utterances (default 8)")
    demo.add_argument(
        "--policies", type=_policy_list, default=["baseline", "predgen"], help="comma-separated (default baseline,predgen)"
    )
    demo.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    demo.add_argument(
        "--out", type=Path, default=Path("demo-out"), help="replies (WAV), node logs and reports.json go here (default demo-out)"
    )

    make_bag = sub.add_parser(
        "make-bag", help="questions spoken by Piper, heard by a streaming ASR, saved as an MCAP rosbag2 bag"
    )
    make_bag.add_argument(
        "--questions", type=Path, default=None, help="MT-Bench .jsonl or a text file of utterances (default: MT-Bench turn 1)"
    )
    make_bag.add_argument("--limit", type=int, default=None, help="only the first N questions")
    make_bag.add_argument(
        "--out", type=Path, default=None, help="bag folder to create (default: ~/.cache/predgen_ros/bags/mtbench-<N>)"
    )
    make_bag.add_argument("--vosk-model", default=None, help="use vosk with this model folder instead of pocketsphinx")
    make_bag.add_argument(
        "--endpoint-silence", type=float, default=0.5, help="trailing silence that ends an utterance, s (default 0.5)"
    )
    make_bag.add_argument("--gap", type=float, default=3.0, help="silence before each question, s (default 3)")
    make_bag.add_argument(
        "--final-from-partial",
        action="store_true",
        help="the final is the last partial, sent at the endpoint (skips the recognizer's slower closing re-decode)",
    )
    make_bag.add_argument(
        "--hesitations",
        type=float,
        default=0.0,
        metavar="P",
        help="a pause of 0.3-1.0 s at a word boundary inside P %% of the questions (default 0)",
    )
    make_bag.add_argument("--seed", type=int, default=0, help="which questions hesitate, where and how long (default 0)")

    info = sub.add_parser("bag-info", help="summary of a bag, like `ros2 bag info`")
    info.add_argument("bag", type=Path, help="bag folder (or its .mcap file)")

    ev = sub.add_parser("eval", help="replay a bag into the graph once per policy; report, summary.json, plots, recorded bags")
    ev.add_argument("--bag", type=Path, required=True, help="bag made by make-bag")
    ev.add_argument(
        "--policies", type=_policy_list, default=list(POLICIES), help="comma-separated (default baseline,preemptive,predgen)"
    )
    ev.add_argument("--out", type=Path, default=Path("eval-out"), help="output folder (default eval-out)")
    ev.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    ev.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", type=_assignment, help="any node parameter (repeatable)"
    )
    ev.add_argument("--max-new-tokens", type=int, default=0, help="reply length; 0 (default) stops after the first sentence")
    ev.add_argument("--limit", type=int, default=None, help="only the first N questions of the bag")
    ev.add_argument(
        "--keep-history", action="store_true", help="keep the conversation history across questions (default: reset before each)"
    )
    ev.add_argument(
        "--endpoint-policies",
        type=_comma_list(str),
        default=[],
        help="replay the bag's audio through a live asr_node, one run per endpoint policy: from fixed_<seconds>, "
        "smart_turn, llm, fused (the baseline runs once, with --baseline-endpoint)",
    )
    ev.add_argument(
        "--baseline-endpoint",
        default="fixed_0.35",
        help="with --endpoint-policies: the baseline's endpoint policy (default fixed_0.35)",
    )
    ev.add_argument(
        "--resume", action="store_true", help="keep the runs already recorded in --out/runs/ (split a long evaluation)"
    )
    ev.add_argument(
        "--reply-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for a question's reply before replaying the next one (default 120)",
    )

    ends = sub.add_parser(
        "endpoints", help="score endpoint policies offline on a bag's audio (ASR only, no graph): delay, false endpoints"
    )
    ends.add_argument("--bag", type=Path, required=True, help="bag made by make-bag (with --hesitations to see false endpoints)")
    ends.add_argument(
        "--policies",
        type=_comma_list(str),
        default=list(DEFAULT_ENDPOINT_POLICIES),
        help="comma-separated fixed_<seconds>, smart_turn, llm, fused (default fixed_0.35,fixed_0.8,smart_turn,llm,fused)",
    )
    ends.add_argument("--vad", choices=VADS, default="silero", help="voice activity detector (default silero)")
    ends.add_argument("--pause", type=float, default=0.15, help="the short pause that asks the estimates, s (default 0.15)")
    ends.add_argument(
        "--silence", type=float, default=0.35, help="fused: the pause when one estimate says complete, s (default 0.35)"
    )
    ends.add_argument("--max-silence", type=float, default=1.0, help="the longest wait, s (default 1.0)")
    ends.add_argument(
        "--audio-threshold", type=float, default=0.5, help="Smart Turn probability that means complete (default 0.5)"
    )
    ends.add_argument(
        "--text-threshold", type=float, default=0.001, help="LLM end-of-message probability that means complete (default 0.001)"
    )
    ends.add_argument("--limit", type=int, default=None, help="only the first N questions of the bag")
    ends.add_argument(
        "--sweep",
        action="store_true",
        help="instead of the policies: record every pause once, then score a grid of rules of all four policies",
    )
    ends.add_argument(
        "--target-delay",
        type=float,
        default=0.25,
        help="--sweep: the best rule per policy has a median endpoint delay of at most this, s (default 0.25)",
    )
    ends.add_argument(
        "--out", type=Path, default=Path("endpoints-out"), help="summary.json and endpoints.md go here (default endpoints-out)"
    )

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

    stress = sub.add_parser("stress", help="soak the ROS 2 graph with many turns, then inject faults; prints one summary line")
    stress.add_argument("--turns", type=int, default=300, help="utterances of the soak (default 300)")
    stress.add_argument(
        "--out", type=Path, default=Path("stress-out"), help="node logs and the utterances go here (default stress-out)"
    )
    stress.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    return parser


def _assignment(text: str) -> tuple[str, object]:
    import yaml

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), yaml.safe_load(value) if value.strip() else ""


def _bench_params(args: argparse.Namespace) -> dict:
    """Defaults, then the parameter file, then the options given on the command line."""
    from .engine.params import read_params_file

    params = read_params_file(args.params) if args.params else {}
    given = {
        "verifier.kind": args.verifier,
        "verifier.k": args.k,
        "verifier.max_gap": args.max_gap,
        "verifier.margin": args.margin,
        "verifier.min_p": args.min_p,
        "verifier.exact_head": args.exact_head,
        "verifier.copy_guard": args.copy_guard,
        "decoder.kind": args.decoder,
        "generation.history_tokens": getattr(args, "history_tokens", None),
        "generation.max_sentences": args.max_sentences,
        "generation.anticipate": getattr(args, "anticipate", None),
        "decoder.jacobi_block": args.jacobi_block,
        "decoder.copy_ban": args.copy_ban,
        "decoder.copy_ban_user": args.copy_ban_user,
        "decoder.copy_ban_opening": args.copy_ban_opening,
        "generation.history_turns": getattr(args, "history_turns", None),
        "endpoint_delay": args.endpoint_delay,
        "model.path": args.model,
        "model.backend": args.backend,
        "model.weights": args.weights,
        "model.threads": args.threads,
        "model.device": args.device,
        "model.dtype": args.dtype,
        "model.system_prompt": args.system_prompt,
    }
    params.update({name: value for name, value in given.items() if value is not None})
    params["generation.max_new_tokens"] = args.max_new_tokens  # the benchmark measures the first sentence
    return params


@dataclass
class BenchJob:
    """What bench and frontier share: the questions, the settings, the loaded model and voice."""

    questions: list
    config: object
    endpoint_delay: float
    model_params: object
    lm: object = None
    tts: object = None

    def load(self):
        from .audio.tts import PiperSynthesizer
        from .engine.models import load_language_model

        self.lm, self.tts = load_language_model(self.model_params), PiperSynthesizer()
        return self


def _bench_job(args: argparse.Namespace) -> BenchJob:
    """Questions and settings checked (one-line errors) before the model loads."""
    from .engine.params import engine_config

    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    if not set(args.turn) <= {1, 2} or len(set(args.turn)) < len(args.turn):
        raise ConfigError(f"--turn takes 1, 2 or 1,2, got {','.join(map(str, args.turn))}")
    if 2 in args.turn and args.conversation:
        raise ConfigError("--turn 2 asks each follow-up after its own turn 1; it cannot be combined with --conversation")
    questions = _questions_of_turns(args.questions, args.limit, args.turn)
    if args.max_chars is not None:
        questions = [q for q in questions if len(q.text) < args.max_chars]
        if not questions:
            raise ConfigError(f"no question is shorter than --max-chars {args.max_chars}")
    params = _bench_params(args)
    config, model_params = engine_config(params)
    return BenchJob(questions, config, float(params.get("endpoint_delay", 0.0)), model_params)


def _questions_of_turns(path, limit: int | None, turns: list[int]) -> list:
    """The questions of each MT-Bench turn asked; with both, a turn-2 id gets the suffix ".2"."""
    from .eval.questions import load_questions

    questions = []
    for turn in turns:
        loaded = load_questions(path, limit, turn)
        questions += loaded if len(turns) == 1 or turn == 1 else [replace(q, qid=f"{q.qid}.2") for q in loaded]
    return questions


def _run_variants(job: BenchJob, variants: dict, chars_per_minute: float, conversation: bool, desc: str = "bench"):
    """One benchmark run of `variants` (label -> config); records, summary, duration buckets, mismatches."""
    from tqdm import tqdm

    from .eval import bench
    from .eval.conversation import score_answers

    settings = bench.BenchSettings(variants, chars_per_minute / 60.0, job.endpoint_delay, conversation)
    labels = list(variants)
    with tqdm(total=len(job.questions) * len(labels), desc=desc, unit="turn") as bar:
        records = bench.run_bench(job.lm, job.tts, job.questions, settings, progress=lambda q, p: bar.update())
    with tqdm(total=len(job.questions), desc="relevance", unit="question") as bar:
        score_answers(records, {q.qid: q.text for q in job.questions}, job.lm, progress=bar.update)
    summary = bench.summarize(records, labels)
    by_duration = bench.summarize_by_duration(records, labels)
    ties = {label: bench.near_tie_report(records, job.lm, label) for label in labels if label != "baseline"}
    return records, summary, by_duration, ties


def _bench_meta(job: BenchJob, args: argparse.Namespace, **extra) -> dict:
    config = job.config
    return {
        "questions": len(job.questions),
        "verifier": config.verifier,
        "k": config.top_k,
        "max_gap": config.max_gap,
        "margin": config.margin,
        "min_p": config.min_p,
        "exact_head": config.exact_head,
        "copy_guard": config.copy_guard,
        "anticipate": config.anticipate,
        "anticipate_tokens": config.anticipate_tokens,
        "decoder": config.decoder,
        "jacobi_block": config.jacobi_block,
        "copy_ban": config.copy_ban,
        "copy_ban_user": config.copy_ban_user,
        "copy_ban_opening": config.copy_ban_opening,
        "history_turns": config.history_turns,
        "endpoint_delay_s": job.endpoint_delay,
        "conversation": args.conversation,
        "history_tokens": config.history_tokens,
        "max_new_tokens": config.max_new_tokens,
        "max_sentences": config.max_sentences,
        "turn": args.turn,
        "max_chars": args.max_chars,
        "model": job.model_params.path or "smollm2-135m-instruct",
        **job.lm.backend.describe(),
        "system_prompt": job.lm.system_prompt,
        **extra,
    }


def cmd_bench(args: argparse.Namespace) -> int:
    from .eval import bench

    job = _bench_job(args)
    policies = args.policies if "baseline" in args.policies else ["baseline"] + args.policies
    job.load()
    records, summary, by_duration, ties = _run_variants(
        job, bench.policy_variants(job.config, policies), args.chars_per_minute, args.conversation
    )
    config = job.config
    turns = f", at most {config.history_turns} turns" if config.history_turns else ""
    conversation = f" in one conversation (history {config.history_tokens} tokens{turns})" if args.conversation else ""
    turn = (
        f" (MT-Bench turns {','.join(map(str, args.turn))}; turn 2 after turn 1 and the model's reply)" if 2 in args.turn else ""
    )
    anticipate = ", anticipation" if config.anticipate else ""
    print(
        f"\n{len(job.questions)} questions{turn}{conversation}, verifier={describe_verifier(config)}{anticipate}, "
        f"decoder={config.decoder}, copy ban={config.copy_ban or 'off'}{' +user' if config.copy_ban_user else ''}, opening ban={config.copy_ban_opening or 'off'}, endpoint delay={job.endpoint_delay}s, {job.lm.describe()}"
    )
    print(bench.format_table(summary))
    print(bench.format_duration_table(by_duration))
    for policy, rows in ties.items() if config.verifier == "exact" else ():  # top-K differs by design
        _print_mismatches(policy, rows)
    if args.out:
        meta = _bench_meta(job, args, chars_per_minute=args.chars_per_minute)
        bench.write_outputs(args.out, records, summary, meta, ties, extra={"_by_duration": by_duration})
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
    from .eval import bench
    from .eval.frontier import format_frontier, frontier_variants, run_label, write_frontier

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
            records, summary, by_duration, ties = _run_variants(job, runs_variants, rate, args.conversation, desc=label)
            meta = _bench_meta(job, args, chars_per_minute=rate, settings=args.settings, **budget)
            bench.write_outputs(args.out / label, records, summary, meta, ties, extra={"_by_duration": by_duration})
            runs.append(
                {
                    "run": label,
                    "chars_per_minute": rate,
                    "history_tokens": history,
                    "summary": summary,
                    "by_duration": by_duration,
                }
            )
            print(f"\n{label}:\n{bench.format_table(summary)}\n{bench.format_duration_table(by_duration)}")
            for name, config in variants.items():
                if name != "baseline" and config.verifier == "exact":  # lossless: any difference is a bug or a near tie
                    _print_mismatches(name, ties[name])
    write_frontier(args.out, runs, _bench_meta(job, args, settings=args.settings, rates=args.rates, history=args.history))
    guards = f"max-gap={job.config.max_gap:g} (topk) exact-head={job.config.exact_head} copy-guard={job.config.copy_guard}"
    print(f"\n{len(job.questions)} questions; guards of the lossy verifiers: {guards}\n{format_frontier(runs)}")
    print(f"wrote {args.out}/frontier.md, frontier.json, frontier.png and one folder per run")
    return 0


def describe_verifier(config) -> str:
    rule = {
        "exact": "exact",
        "topk": f"topk K={config.top_k} max-gap={config.max_gap:g}",
        "margin": f"margin {config.margin:g} nats",
        "minp": f"minp p={config.min_p:g}",
    }[config.verifier]
    return rule if config.verifier == "exact" else f"{rule} exact-head={config.exact_head} copy-guard={config.copy_guard}"


def cmd_bringup(args: argparse.Namespace) -> int:
    from .nodes.bringup import bringup, default_params_file

    params_file = args.params or default_params_file()
    if not params_file.is_file():
        raise ConfigError(f"parameter file not found: {params_file} (give --params)")
    given = {
        "policy": args.policy,
        "model.path": args.model,
        "model.backend": args.backend,
        "model.weights": args.weights,
        "model.threads": args.threads,
        "model.device": args.device,
        "model.dtype": args.dtype,
        "model.system_prompt": args.system_prompt,
        "asr.backend": args.asr_backend,
        "asr.input": args.asr_input,
        "tts.sink": args.sink,
        "tts.wav_dir": args.wav_dir,
    }
    overrides = {name: value for name, value in given.items() if value is not None}
    overrides.update(dict(args.set))
    return bringup(params_file, overrides)


def cmd_demo(args: argparse.Namespace) -> int:
    from .audio.text_asr import load_questions, robot_conversation_file
    from .eval.graph_demo import DemoSettings, conversation_measures, latency_table, measures_table, reports_by_question, run_demo
    from .nodes.bringup import default_params_file

    if args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    params_file = args.params or default_params_file()
    if not params_file.is_file():
        raise ConfigError(f"parameter file not found: {params_file} (give --params)")
    source = args.questions or robot_conversation_file()
    questions = [q.text for q in load_questions(source, args.limit)]  # a bad file fails before the graph starts
    reports = run_demo(DemoSettings(params_file, args.out, source, tuple(args.policies), args.limit))
    answers = {policy: reports_by_question(questions, rows) for policy, rows in reports.items()}
    print(f"\naudio latency from the end of speech, {len(questions)} utterances at 600 chars/min through the ROS 2 graph:")
    print(latency_table(questions, answers))
    print("\nconversation (docs/results/conversations.md): repeated openings, history copy, first sentence as baseline's")
    print(measures_table(conversation_measures(answers, _tokenizer_encode())))
    last = list(answers)[-1]
    print(f"\n{last}'s answers:")
    for i, (question, report) in enumerate(zip(questions, answers[last]), 1):
        print(f"{i:>3}  {question}\n     -> {report['reply'] if report else '(no reply)'}")
    print(
        f"replies: {args.out}/<policy>/reply_NNN.wav; reports: {args.out}/reports.json; node logs: {args.out}/graph-<policy>.log"
    )
    unanswered = [(policy, i + 1) for policy, rows in answers.items() for i, report in enumerate(rows) if report is None]
    for policy, turn in unanswered:
        print(f"demo: question {turn} got no reply from {policy} (see {args.out}/graph-{policy}.log)", file=sys.stderr)
    return 1 if unanswered else 0


def cmd_stress(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .eval.stress import StressSettings, run_stress
    from .nodes.bringup import default_params_file

    settings = StressSettings(args.params or default_params_file(), args.out, turns=args.turns)
    if args.turns <= settings.rss_from_turn:
        raise ConfigError(
            f"--turns must be more than {settings.rss_from_turn} (memory growth is measured from that turn), got {args.turns}"
        )
    if not settings.params_file.is_file():
        raise ConfigError(f"parameter file not found: {settings.params_file} (give --params)")
    with tqdm(total=args.turns, desc="stress", unit="turn") as bar:
        result = run_stress(settings, progress=bar.update)
    print(result.line())
    return 0 if result.passed else 1


def _default_bag_folder(limit: int | None) -> Path:
    import os

    cache = Path(os.environ.get("PREDGEN_ROS_CACHE", Path.home() / ".cache" / "predgen_ros"))
    return cache / "bags" / f"mtbench-{limit or 'all'}"


def cmd_make_bag(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .audio.pcm import AsrError
    from .audio.text_asr import load_questions
    from .eval.make_bag import BagSettings, make_bag

    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    if not 0 <= args.hesitations <= 100:
        raise ConfigError(f"--hesitations is a percentage of the questions, 0 to 100; got {args.hesitations}")
    questions = load_questions(args.questions, args.limit)
    out = args.out or _default_bag_folder(args.limit)
    settings = BagSettings(
        "vosk" if args.vosk_model else "pocketsphinx",
        args.vosk_model or "",
        args.endpoint_silence,
        args.gap,
        redecode_final=not args.final_from_partial,
        hesitations=args.hesitations,
        seed=args.seed,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tqdm(total=len(questions), desc="make-bag", unit="utterance") as bar:
            counts = make_bag(out, questions, settings, progress=bar.update)
    except AsrError as err:
        raise ConfigError(str(err)) from None
    print(
        f"wrote {out}: {counts['questions']} questions, {counts['audio_s']:.1f} s of audio, "
        f"{counts['partials']} partials, {counts['finals']} finals ({settings.backend})"
    )
    return 0


def cmd_bag_info(args: argparse.Namespace) -> int:
    from .eval.bags import bag_summary

    print(bag_summary(args.bag))
    return 0


def _tokenizer_encode():
    """The embedded model's tokenizer (no weights), for the measures counted in tokens."""
    from .engine.models import embedded_tokenizer

    tokenizer = embedded_tokenizer()
    return lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]


def _embedded_lm():
    from .engine.models import load_language_model
    from .engine.params import ModelParams

    return load_language_model(ModelParams(None))


def cmd_endpoints(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from tqdm import tqdm

    from .audio.endpoint import EndpointConfig, EndpointError
    from .audio.pcm import AsrError
    from .eval import endpoints as ep

    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    try:
        base = EndpointConfig(
            silence_s=args.silence,
            pause_s=args.pause,
            max_silence_s=args.max_silence,
            audio_threshold=args.audio_threshold,
            text_threshold=args.text_threshold,
        )
        configs = {name: ep.endpoint_config(name, base) for name in args.policies}
    except (EndpointError, ep.BagError) as err:
        raise ConfigError(str(err)) from None
    audio, markers, t0_ns = ep.load_audio(args.bag, args.limit)
    text_estimate = ep.TextEstimator(_embedded_lm())
    smart_turn = None
    if args.sweep or any(c.uses_audio for c in configs.values()):
        from .audio.turn_models import SmartTurn

        smart_turn = SmartTurn()
    if args.sweep:
        return _endpoint_sweep(args, audio, markers, t0_ns, text_estimate, smart_turn)
    runs = {}
    summary = {
        "bag": str(args.bag),
        "questions": len(markers),
        "vad": args.vad,
        "settings": asdict(base),
        "endpoint_policies": {},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        with tqdm(total=len(audio) * len(configs), desc="endpoints", unit="chunk") as bar:
            for name, config in configs.items():
                bar.set_postfix_str(name)
                runs[name] = ep.run_policy(name, config, audio, args.vad, text_estimate, smart_turn, bar.update)
                summary["endpoint_policies"][name] = ep.summarize(name, config, ep.outcomes(runs[name], markers, t0_ns))
                ep.write_summary(args.out, summary)  # each policy as soon as it is scored
    except AsrError as err:
        raise ConfigError(str(err)) from None
    reference = runs.get("fixed_0.8") or next(iter(runs.values()))  # the fewest split questions
    summary["text_signal"] = ep.text_signal_auc(reference, markers, t0_ns, text_estimate)
    print(ep.write_summary(args.out, summary))
    print(f"wrote {args.out}/summary.json, endpoints.md")
    return 0


def _endpoint_sweep(args: argparse.Namespace, audio, markers, t0_ns: int, text_estimate, smart_turn) -> int:
    from tqdm import tqdm

    from .eval import endpoint_sweep as sw
    from .eval import endpoints as ep

    with tqdm(total=len(audio), desc="pauses", unit="chunk") as bar:
        pauses, heard = sw.observe_pauses(
            audio, args.vad, text_estimate, smart_turn, pause_s=0.1, observe_s=1.3, progress=bar.update
        )
    scored = [sw.score_rule(rule, pauses, markers, t0_ns) for rule in sw.sweep_rules()]
    reference = next(row for row in scored if row["rule"] == "fixed 0.8")
    best = sw.best_rules(scored, args.target_delay, reference["false_endpoint_rate"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep.json").write_text(
        json.dumps(
            {
                "bag": str(args.bag),
                "questions": len(markers),
                "vad": args.vad,
                "pauses": len(pauses),
                "target_delay_s": args.target_delay,
                "text_signal": ep.text_signal_auc(heard, markers, t0_ns, text_estimate),
                "best": best,
                "pareto": sw.pareto(scored),
            },
            indent=2,
        )
    )
    table = sw.format_sweep(scored, best)
    (args.out / "sweep.md").write_text(table + "\n")
    print(table)
    print(f"wrote {args.out}/sweep.json, sweep.md ({len(scored)} rules scored; sweep.json keeps the Pareto-optimal ones)")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .audio.endpoint import EndpointError
    from .eval.bags import BagError
    from .eval.bench import format_duration_table, format_table
    from .eval.endpoints import format_endpoint_table
    from .eval.evaluate import graph_runs, run_eval
    from .eval.live_asr import endpoint_overrides
    from .eval.replay import EvalSettings, load_replay
    from .nodes.bringup import default_params_file

    params_file = args.params or default_params_file()
    if not params_file.is_file():
        raise ConfigError(f"parameter file not found: {params_file} (give --params)")
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    _, markers = load_replay(args.bag, args.limit)  # a bad bag fails here, before any node starts
    overrides = {"generation.max_new_tokens": args.max_new_tokens, **dict(args.set)}
    if args.reply_timeout <= 0:
        raise ConfigError(f"--reply-timeout must be > 0 seconds, got {args.reply_timeout:g}")
    try:
        for name in [*args.endpoint_policies, args.baseline_endpoint]:
            endpoint_overrides(name)
    except (EndpointError, BagError) as err:
        raise ConfigError(f"--endpoint-policies: {err}") from None
    settings = EvalSettings(
        args.bag,
        args.out,
        params_file,
        tuple(args.policies),
        overrides,
        args.limit,
        args.keep_history,
        args.reply_timeout,
        tuple(args.endpoint_policies),
        args.baseline_endpoint,
        args.resume,
    )
    names = [run.name for run in graph_runs(settings)]
    with tqdm(total=len(markers) * len(names), desc="eval", unit="question") as bar:
        records, summary = run_eval(settings, progress=lambda name: (bar.set_postfix_str(name), bar.update()))
    print(f"\nASR revision rate {summary['revision_rate']:.1%}, word error rate {summary['wer']:.1%}")
    print(format_table({name: summary[name] for name in names}))
    print(format_duration_table(summary["_by_duration"]))
    if "endpoint_policies" in summary:
        print(format_endpoint_table(summary["endpoint_policies"]))
    print(f"wrote {args.out}/report.md, summary.json, turns.csv, latency.png, recorded_<policy>/")
    unanswered = [r for r in records if not r.answered]
    for r in unanswered:
        print(f"eval: question {r.qid} got no reply from {r.policy}: {r.no_reply}", file=sys.stderr)
    return 1 if unanswered else 0


def cmd_passes(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .eval import passes

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


COMMANDS = {
    "bench": cmd_bench,
    "passes": cmd_passes,
    "frontier": cmd_frontier,
    "bringup": cmd_bringup,
    "demo": cmd_demo,
    "make-bag": cmd_make_bag,
    "endpoints": cmd_endpoints,
    "bag-info": cmd_bag_info,
    "eval": cmd_eval,
    "stress": cmd_stress,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from .audio.tts import VoiceError
    from .eval.bags import BagError
    from .eval.questions import QuestionError
    from .nodes.bringup import GraphError

    try:
        return COMMANDS[args.command](args)
    except (ModelError, VoiceError, QuestionError, ConfigError, GraphError, BagError) as err:
        print(f"predgen-ros {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"predgen-ros {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
