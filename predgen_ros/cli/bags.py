"""`make-bag`, `bag-info` and `eval`: evaluation bags made, read and replayed through the graph."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..audio.pcm import AUDIO_CHUNK_MS
from ..audio.recognition.endpoint import ENDPOINT_SILENCE_S
from ..cache import cache_dir
from ..engine.config import POLICIES, ConfigError
from .options import add_asr_backend_option, add_set_option, check_limit, comma_list, params_file_or_default, policy_list


def register(sub) -> None:
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
    add_asr_backend_option(make_bag)
    make_bag.add_argument("--vosk-model", default=None, help="with --asr-backend vosk: the vosk model folder")
    make_bag.add_argument(
        "--endpoint-silence",
        type=float,
        default=ENDPOINT_SILENCE_S,
        help=f"trailing silence that ends an utterance, s (default {ENDPOINT_SILENCE_S})",
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
    make_bag.set_defaults(run=cmd_make_bag)

    phases = sub.add_parser(
        "phases", help="where an eval's silence went: endpoint, LLM after the final, TTS after the commit (table and phases.png)"
    )
    phases.add_argument("folder", type=Path, help="an eval --out folder (its turns.csv and recorded_<run>/ bags)")
    phases.set_defaults(run=cmd_phases)

    info = sub.add_parser("bag-info", help="summary of a bag, like `ros2 bag info`")
    info.add_argument("bag", type=Path, help="bag folder (or its .mcap file)")
    info.set_defaults(run=cmd_bag_info)

    ev = sub.add_parser("eval", help="replay a bag into the graph once per policy; report, summary.json, plots, recorded bags")
    add_asr_backend_option(ev)
    ev.add_argument("--bag", type=Path, required=True, help="bag made by make-bag")
    ev.add_argument(
        "--policies", type=policy_list, default=list(POLICIES), help="comma-separated (default baseline,preemptive,predgen)"
    )
    ev.add_argument("--out", type=Path, default=Path("eval-out"), help="output folder (default eval-out)")
    ev.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    add_set_option(ev, "any node parameter (repeatable)")
    ev.add_argument("--max-new-tokens", type=int, default=0, help="reply length; 0 (default) stops after the first sentence")
    ev.add_argument("--limit", type=int, default=None, help="only the first N questions of the bag")
    ev.add_argument(
        "--keep-history", action="store_true", help="keep the conversation history across questions (default: reset before each)"
    )
    ev.add_argument(
        "--endpoint-policies",
        type=comma_list(str),
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
        "--audio-chunk-ms",
        type=int,
        default=AUDIO_CHUNK_MS,
        help=f"with --endpoint-policies: replay the bag's audio in chunks of at most this many ms, as a microphone "
        f"delivers them (default {AUDIO_CHUNK_MS}; a bag's chunks of 100 ms are split, never joined)",
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
    ev.set_defaults(run=cmd_eval)


def _default_bag_folder(limit: int | None) -> Path:
    return cache_dir() / "bags" / f"mtbench-{limit or 'all'}"


def cmd_make_bag(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..audio.pcm import AsrError
    from ..audio.recognition.text_asr import load_questions
    from ..eval.bag_replay.make_bag import BagSettings, make_bag

    check_limit(args.limit)
    if not 0 <= args.hesitations <= 100:
        raise ConfigError(f"--hesitations is a percentage of the questions, 0 to 100; got {args.hesitations}")
    questions = load_questions(args.questions, args.limit)
    out = args.out or _default_bag_folder(args.limit)
    settings = BagSettings(
        args.asr_backend,
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


def cmd_phases(args: argparse.Namespace) -> int:
    from ..eval.bag_replay.bags import BagError
    from ..eval.bag_replay.phases import format_phase_table, phase_summary, phases_of_eval_folder, plot_phases

    if not (args.folder / "turns.csv").is_file():
        raise BagError(f"{args.folder}: no turns.csv: give the --out folder of a finished `predgen-ros eval`")
    runs = phases_of_eval_folder(args.folder)
    print(format_phase_table(phase_summary(runs)))
    plot_phases(args.folder / "phases.png", runs)
    print(f"wrote {args.folder}/phases.png")
    return 0


def cmd_bag_info(args: argparse.Namespace) -> int:
    from ..eval.bag_replay.bags import bag_summary

    print(bag_summary(args.bag))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..audio.recognition.endpoint import EndpointError
    from ..eval.bag_replay.bags import BagError
    from ..eval.bag_replay.evaluate import graph_runs, run_eval
    from ..eval.bag_replay.live_asr import endpoint_overrides
    from ..eval.bag_replay.phases import format_phase_table
    from ..eval.bag_replay.replay import EvalSettings, load_replay
    from ..eval.hearing.endpoints import format_endpoint_table
    from ..eval.report import format_duration_table, format_table

    params_file = params_file_or_default(args.params)
    check_limit(args.limit)
    _, markers = load_replay(args.bag, args.limit)  # a bad bag fails here, before any node starts
    overrides = {"generation.max_new_tokens": args.max_new_tokens, **dict(args.set)}
    if not 1 <= args.audio_chunk_ms <= 1000:
        raise ConfigError(f"--audio-chunk-ms must lie in 1..1000 ms, got {args.audio_chunk_ms}")
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
        args.audio_chunk_ms,
        args.asr_backend,
    )
    names = [run.name for run in graph_runs(settings)]
    with tqdm(total=len(markers) * len(names), desc="eval", unit="question") as bar:
        records, summary = run_eval(settings, progress=lambda name: (bar.set_postfix_str(name), bar.update()))
    print(f"\nASR revision rate {summary['revision_rate']:.1%}, word error rate {summary['wer']:.1%}")
    print(format_table({name: summary[name] for name in names}))
    print(format_duration_table(summary["_by_duration"]))
    print(format_phase_table(summary["phases"]))
    if "endpoint_policies" in summary:
        print(format_endpoint_table(summary["endpoint_policies"]))
    print(f"wrote {args.out}/report.md, summary.json, turns.csv, latency.png, phases.png, recorded_<policy>/")
    unanswered = [r for r in records if not r.answered]
    for r in unanswered:
        print(f"eval: question {r.qid} got no reply from {r.policy}: {r.no_reply}", file=sys.stderr)
    return 1 if unanswered else 0
