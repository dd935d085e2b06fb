"""The `predgen-ros` command."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .engine.models import ModelError
from .engine.session import DECODERS, POLICIES, VERIFIERS, ConfigError


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


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="local Hugging Face model folder (default: embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--device", default=None, help="auto, cpu or cuda[:N] (default: auto)")
    parser.add_argument("--dtype", default=None, help="auto (float32 on CPU, float16 on CUDA), float32, float16, bfloat16")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="predgen-ros", description="Speculative LLM replies for ROS 2 voice dialogue.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)

    bench = sub.add_parser("bench", help="side-by-side latency benchmark of the policies on MT-Bench (virtual clock)")
    bench.add_argument("--questions", type=Path, default=None, help="MT-Bench .jsonl or a text file, one question a line (default: MT-Bench turn 1)")
    bench.add_argument("--limit", type=int, default=None, help="only the first N questions")
    bench.add_argument("--turn", type=int, choices=(1, 2), default=1,
                       help="MT-Bench turn; 2 asks each follow-up after turn 1 and the model's own reply to it (default 1)")
    bench.add_argument("--policies", type=_policy_list, default=list(POLICIES), help="comma-separated, from baseline,preemptive,predgen")
    bench.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file whose predgen_node section sets the defaults (e.g. config/predgen.yaml)")
    bench.add_argument("--verifier", choices=VERIFIERS, default=None,
                       help="exact (default, lossless), topk (the paper's setting), margin or minp")
    bench.add_argument("--k", type=int, default=None, help="K of the top-K verifier (default 3)")
    bench.add_argument("--max-gap", type=float, default=None, help="top-K: a kept token lies at most this many nats below the most likely one")
    bench.add_argument("--margin", type=float, default=None, help="margin: a kept token lies at most this many nats below the top one (default 0.25)")
    bench.add_argument("--min-p", type=float, default=None, help="minp: a kept token has at least this share of the top token's probability (default 0.5)")
    bench.add_argument("--exact-head", type=int, default=None, help="all but exact: the reply's first N tokens must be the most likely one")
    bench.add_argument("--copy-guard", action=argparse.BooleanOptionalAction, default=None,
                       help="all but exact: a runner-up token may not copy an earlier reply")
    bench.add_argument("--decoder", choices=DECODERS, default=None, help="ar (default) or jacobi")
    bench.add_argument("--jacobi-block", type=int, default=None, help="tokens per Jacobi iteration (default 8)")
    bench.add_argument("--endpoint-delay", type=float, default=None, help="seconds from the final transcript to the end of turn (default 0)")
    bench.add_argument("--chars-per-minute", type=float, default=600.0, help="speaking rate of the simulated user (default 600)")
    bench.add_argument("--max-new-tokens", type=int, default=0, help="reply length; 0 (default) stops after the first sentence")
    bench.add_argument("--conversation", action="store_true",
                       help="ask the questions in one conversation, history kept (default: independent questions, history reset)")
    bench.add_argument("--history-tokens", type=int, default=None,
                       help="history kept in the prompt, in tokens (default 1024)")
    bench.add_argument("--out", type=Path, default=None, help="write summary.json, turns.csv and latency.png here")
    _add_model_options(bench)

    up = sub.add_parser("bringup", help="start asr_node, predgen_node and tts_node as processes (pip-only stand-in for ros2 launch)")
    up.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    up.add_argument("--policy", choices=POLICIES, default=None, help="predgen_node policy")
    up.add_argument("--asr-backend", default=None, help="pocketsphinx, vosk or text")
    up.add_argument("--asr-input", default=None, help="'microphone' or a WAV file (pocketsphinx / vosk)")
    up.add_argument("--sink", default=None, help="speaker, wav, topic or none")
    up.add_argument("--wav-dir", default=None, help="folder for the wav sink")
    up.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=_assignment,
                    help="any parameter, e.g. --set verifier.kind=exact (repeatable; routed to the node that declares it)")
    _add_model_options(up)

    demo = sub.add_parser("demo", help="speak MT-Bench questions into the ROS 2 graph, once per policy; replies as WAV files")
    demo.add_argument("--limit", type=int, default=3, help="questions (default 3)")
    demo.add_argument("--policies", type=_policy_list, default=["baseline", "predgen"], help="comma-separated (default baseline,predgen)")
    demo.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    demo.add_argument("--out", type=Path, default=Path("demo-out"), help="replies (WAV), node logs and reports.json go here (default demo-out)")

    make_bag = sub.add_parser("make-bag", help="questions spoken by Piper, heard by a streaming ASR, saved as an MCAP rosbag2 bag")
    make_bag.add_argument("--questions", type=Path, default=None, help="MT-Bench .jsonl or a text file of utterances (default: MT-Bench turn 1)")
    make_bag.add_argument("--limit", type=int, default=None, help="only the first N questions")
    make_bag.add_argument("--out", type=Path, default=None, help="bag folder to create (default: ~/.cache/predgen_ros/bags/mtbench-<N>)")
    make_bag.add_argument("--vosk-model", default=None, help="use vosk with this model folder instead of pocketsphinx")
    make_bag.add_argument("--endpoint-silence", type=float, default=0.5, help="trailing silence that ends an utterance, s (default 0.5)")
    make_bag.add_argument("--gap", type=float, default=3.0, help="silence before each question, s (default 3)")
    make_bag.add_argument("--final-from-partial", action="store_true",
                          help="the final is the last partial, sent at the endpoint (skips the recognizer's slower closing re-decode)")

    info = sub.add_parser("bag-info", help="summary of a bag, like `ros2 bag info`")
    info.add_argument("bag", type=Path, help="bag folder (or its .mcap file)")

    ev = sub.add_parser("eval", help="replay a bag into the graph once per policy; report, summary.json, plots, recorded bags")
    ev.add_argument("--bag", type=Path, required=True, help="bag made by make-bag")
    ev.add_argument("--policies", type=_policy_list, default=list(POLICIES), help="comma-separated (default baseline,preemptive,predgen)")
    ev.add_argument("--out", type=Path, default=Path("eval-out"), help="output folder (default eval-out)")
    ev.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    ev.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=_assignment, help="any node parameter (repeatable)")
    ev.add_argument("--max-new-tokens", type=int, default=0, help="reply length; 0 (default) stops after the first sentence")
    ev.add_argument("--limit", type=int, default=None, help="only the first N questions of the bag")
    ev.add_argument("--keep-history", action="store_true", help="keep the conversation history across questions (default: reset before each)")
    ev.add_argument("--reply-timeout", type=float, default=120.0,
                    help="seconds to wait for a question's reply before replaying the next one (default 120)")

    stress = sub.add_parser("stress", help="soak the ROS 2 graph with many turns, then inject faults; prints one summary line")
    stress.add_argument("--turns", type=int, default=300, help="utterances of the soak (default 300)")
    stress.add_argument("--out", type=Path, default=Path("stress-out"), help="node logs and the utterances go here (default stress-out)")
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
        "verifier.kind": args.verifier, "verifier.k": args.k, "verifier.max_gap": args.max_gap, "verifier.margin": args.margin, "verifier.min_p": args.min_p,
        "verifier.exact_head": args.exact_head, "verifier.copy_guard": args.copy_guard,
        "decoder.kind": args.decoder, "generation.history_tokens": args.history_tokens,
        "decoder.jacobi_block": args.jacobi_block, "endpoint_delay": args.endpoint_delay, "model.path": args.model, "model.device": args.device, "model.dtype": args.dtype,
    }
    params.update({name: value for name, value in given.items() if value is not None})
    params["generation.max_new_tokens"] = args.max_new_tokens  # the benchmark measures the first sentence
    return params


def cmd_bench(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .audio.tts import PiperSynthesizer
    from .engine.lm import LanguageModel
    from .engine.models import load_pretrained
    from .engine.params import engine_config
    from .eval import bench
    from .eval.conversation import score_answers
    from .eval.questions import load_questions

    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    if args.turn > 1 and args.conversation:
        raise ConfigError("--turn 2 asks each follow-up after its own turn 1; it cannot be combined with --conversation")
    questions = load_questions(args.questions, args.limit, args.turn)
    params = _bench_params(args)
    config, model_params = engine_config(params)
    endpoint_delay = float(params.get("endpoint_delay", 0.0))
    policies = args.policies if "baseline" in args.policies else ["baseline"] + args.policies
    model, tokenizer = load_pretrained(model_params.path, model_params.device, model_params.dtype)
    lm = LanguageModel(model, tokenizer)
    tts = PiperSynthesizer()
    settings = bench.BenchSettings(policies, config, args.chars_per_minute / 60.0, endpoint_delay, args.conversation)
    with tqdm(total=len(questions) * len(policies), desc="bench", unit="turn") as bar:
        records = bench.run_bench(lm, tts, questions, settings, progress=lambda q, p: bar.update())
    with tqdm(total=len(questions), desc="relevance", unit="question") as bar:
        score_answers(records, {q.qid: q.text for q in questions}, lm, progress=bar.update)
    summary = bench.summarize(records, policies)
    by_duration = bench.summarize_by_duration(records, policies)
    ties = {p: bench.near_tie_report(records, lm, p) for p in policies if p != "baseline"}
    meta = {
        "questions": len(questions), "verifier": config.verifier, "k": config.top_k, "max_gap": config.max_gap, "margin": config.margin, "min_p": config.min_p, "exact_head": config.exact_head, "copy_guard": config.copy_guard, "decoder": config.decoder,
        "jacobi_block": config.jacobi_block, "endpoint_delay_s": endpoint_delay, "chars_per_minute": args.chars_per_minute,
        "conversation": args.conversation, "history_tokens": config.history_tokens, "turn": args.turn,
        "model": model_params.path or "smollm2-135m-instruct", "device": str(lm.device), "dtype": str(model.dtype),
    }
    conversation = f" in one conversation (history {config.history_tokens} tokens)" if args.conversation else ""
    turn = f" (MT-Bench turn {args.turn}, after turn 1 and the model's reply)" if args.turn > 1 else ""
    print(f"\n{len(questions)} questions{turn}{conversation}, verifier={describe_verifier(config)}, "
          f"decoder={config.decoder}, endpoint delay={endpoint_delay}s, device={lm.device}")
    print(bench.format_table(summary))
    print(bench.format_duration_table(by_duration))
    for policy, rows in ties.items() if config.verifier == "exact" else ():  # top-K differs by design
        for row in rows:
            gap = f"logit gap {row['logit_gap']:.4f} ({row['tokens'][0]!r} vs baseline {row['tokens'][1]!r})" if "logit_gap" in row else "length differs"
            print(f"  {policy} q{row['qid']}: first sentence differs at token {row['position']}: {gap}")
    if args.out:
        bench.write_outputs(args.out, records, summary, meta, ties, extra={"_by_duration": by_duration})
        print(f"wrote {args.out}/summary.json, turns.csv, latency.png")
    return 0


def describe_verifier(config) -> str:
    rule = {"exact": "exact", "topk": f"topk K={config.top_k} max-gap={config.max_gap:g}",
            "margin": f"margin {config.margin:g} nats", "minp": f"minp p={config.min_p:g}"}[config.verifier]
    return rule if config.verifier == "exact" else f"{rule} exact-head={config.exact_head} copy-guard={config.copy_guard}"


def cmd_bringup(args: argparse.Namespace) -> int:
    from .nodes.bringup import bringup, default_params_file

    params_file = args.params or default_params_file()
    if not params_file.is_file():
        raise ConfigError(f"parameter file not found: {params_file} (give --params)")
    given = {
        "policy": args.policy, "model.path": args.model, "model.device": args.device, "model.dtype": args.dtype,
        "asr.backend": args.asr_backend, "asr.input": args.asr_input, "tts.sink": args.sink, "tts.wav_dir": args.wav_dir,
    }
    overrides = {name: value for name, value in given.items() if value is not None}
    overrides.update(dict(args.set))
    return bringup(params_file, overrides)


def cmd_demo(args: argparse.Namespace) -> int:
    from .audio.text_asr import load_questions
    from .eval.graph_demo import DemoSettings, latency_table, reports_by_question, run_demo
    from .nodes.bringup import default_params_file

    if args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    params_file = args.params or default_params_file()
    if not params_file.is_file():
        raise ConfigError(f"parameter file not found: {params_file} (give --params)")
    reports = run_demo(DemoSettings(params_file, args.out, tuple(args.policies), args.limit))
    questions = [q.text for q in load_questions(None, args.limit)]
    answers = {policy: reports_by_question(questions, rows) for policy, rows in reports.items()}
    print(f"\naudio latency from the end of speech, {args.limit} MT-Bench questions at 600 chars/min through the ROS 2 graph:")
    print(latency_table(questions, answers))
    print(f"replies: {args.out}/<policy>/reply_NNN.wav; reports: {args.out}/reports.json; node logs: {args.out}/graph-<policy>.log")
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
        raise ConfigError(f"--turns must be more than {settings.rss_from_turn} (memory growth is measured from that turn), got {args.turns}")
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

    from .audio.asr import AsrError
    from .audio.text_asr import load_questions
    from .eval.make_bag import BagSettings, make_bag

    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    questions = load_questions(args.questions, args.limit)
    out = args.out or _default_bag_folder(args.limit)
    settings = BagSettings("vosk" if args.vosk_model else "pocketsphinx", args.vosk_model or "", args.endpoint_silence, args.gap,
                           redecode_final=not args.final_from_partial)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tqdm(total=len(questions), desc="make-bag", unit="utterance") as bar:
            counts = make_bag(out, questions, settings, progress=bar.update)
    except AsrError as err:
        raise ConfigError(str(err)) from None
    print(f"wrote {out}: {counts['questions']} questions, {counts['audio_s']:.1f} s of audio, "
          f"{counts['partials']} partials, {counts['finals']} finals ({settings.backend})")
    return 0


def cmd_bag_info(args: argparse.Namespace) -> int:
    from .eval.bags import bag_summary

    print(bag_summary(args.bag))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .eval.bench import format_duration_table, format_table
    from .eval.replay import EvalSettings, load_replay, run_eval
    from .nodes.bringup import default_params_file

    params_file = args.params or default_params_file()
    if not params_file.is_file():
        raise ConfigError(f"parameter file not found: {params_file} (give --params)")
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    messages, _ = load_replay(args.bag, args.limit)  # a bad bag fails here, before any node starts
    finals = sum(m.topic == "asr/final" for m in messages)
    overrides = {"generation.max_new_tokens": args.max_new_tokens, **dict(args.set)}
    if args.reply_timeout <= 0:
        raise ConfigError(f"--reply-timeout must be > 0 seconds, got {args.reply_timeout:g}")
    settings = EvalSettings(args.bag, args.out, params_file, tuple(args.policies), overrides, args.limit, args.keep_history,
                            args.reply_timeout)
    with tqdm(total=finals * len(args.policies), desc="eval", unit="utterance") as bar:
        records, summary = run_eval(settings, progress=lambda policy: (bar.set_postfix_str(policy), bar.update()))
    print(f"\nASR revision rate {summary['revision_rate']:.1%}, word error rate {summary['wer']:.1%}")
    print(format_table({p: summary[p] for p in args.policies}))
    print(format_duration_table(summary["_by_duration"]))
    print(f"wrote {args.out}/report.md, summary.json, turns.csv, latency.png, recorded_<policy>/")
    unanswered = [r for r in records if not r.answered]
    for r in unanswered:
        print(f"eval: question {r.qid} got no reply from {r.policy}: {r.no_reply}", file=sys.stderr)
    return 1 if unanswered else 0


COMMANDS = {"bench": cmd_bench, "bringup": cmd_bringup, "demo": cmd_demo, "make-bag": cmd_make_bag, "bag-info": cmd_bag_info, "eval": cmd_eval, "stress": cmd_stress}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from .audio.tts import VoiceError
    from .eval.bags import BagError
    from .nodes.bringup import GraphError
    from .eval.questions import QuestionError

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
