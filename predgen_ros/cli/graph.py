"""`bringup`, `demo` and `stress`: the three nodes as processes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..audio.recognition.recognizers import DEFAULT_RECOGNIZER, RECOGNIZERS
from ..engine.config import POLICIES, ConfigError
from .options import (
    MODEL_OPTIONS,
    add_out_option,
    add_param_options,
    add_set_option,
    check_limit,
    given_params,
    params_file_or_default,
    policy_list,
)


def register(sub) -> None:
    up = sub.add_parser(
        "bringup", help="start asr_node, predgen_node and tts_node as processes (pip-only stand-in for ros2 launch)"
    )
    up.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    up.add_argument("--policy", choices=POLICIES, default=None, help="predgen_node policy")
    up.add_argument(
        "--asr-backend",
        dest="asr.backend",
        default=None,
        help="whisper, pocketsphinx, vosk, or text (a simulated user types its texts in asr_node's place: text_user)",
    )
    up.add_argument("--asr-input", dest="asr.input", default=None, help="'microphone' or a WAV file (pocketsphinx / vosk)")
    up.add_argument("--sink", dest="tts.sink", default=None, help="speaker, wav, topic or none")
    up.add_argument("--wav-dir", dest="tts.wav_dir", default=None, help="folder for the wav sink")
    up.add_argument(
        "--half",
        choices=("robot", "workstation"),
        default=None,
        help="start one side of a two-host graph: robot (asr_node, tts_node) or workstation (predgen_node)",
    )
    add_set_option(up, "any parameter, e.g. --set verifier.kind=exact (repeatable; routed to the node that declares it)")
    add_param_options(up, MODEL_OPTIONS)
    up.set_defaults(run=cmd_bringup)

    demo = sub.add_parser("demo", help="speak a robot conversation into the ROS 2 graph, once per policy; replies as WAV files")
    demo.add_argument(
        "--questions",
        type=Path,
        default=None,
        help="MT-Bench .jsonl or a text file, one utterance a line (default: the embedded robot conversation)",
    )
    demo.add_argument("--limit", type=int, default=8, help="utterances (default 8)")
    demo.add_argument(
        "--asr-backend",
        choices=[*RECOGNIZERS, "text"],
        default=DEFAULT_RECOGNIZER,
        help=f"the recognizer that hears Piper speak (default {DEFAULT_RECOGNIZER}); text: typed, no audio",
    )
    demo.add_argument(
        "--policies", type=policy_list, default=["baseline", "predgen"], help="comma-separated (default baseline,predgen)"
    )
    demo.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    add_out_option(demo, "demo-out", "replies (WAV), node logs and reports.json")
    demo.set_defaults(run=cmd_demo)

    cpu = sub.add_parser(
        "budget",
        help="the demo's conversation once, every node thread's CPU sampled: CPU per stage while the user speaks and "
        "on the critical path, and one turn's timeline",
    )
    cpu.add_argument("--limit", type=int, default=8, help="utterances of the embedded robot conversation (default 8)")
    cpu.add_argument("--policy", choices=POLICIES, default="predgen", help="predgen_node's policy (default predgen)")
    cpu.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    add_out_option(cpu, "budget-out", "budget.json, budget.md, timeline.png and node logs")
    cpu.set_defaults(run=cmd_budget)

    stress = sub.add_parser("stress", help="soak the ROS 2 graph with many turns, then inject faults; prints one summary line")
    stress.add_argument(
        "--ear",
        choices=("text", "spoken"),
        default="text",
        help="text: the text user in asr_node's place, 300 fast turns, then graph faults (default); spoken: turns spoken "
        "into asr_node's microphone in a room that hears the robot, with the audio path's faults (eval/graph/spoken_soak.py)",
    )
    stress.add_argument("--turns", type=int, default=None, help="turns of the soak (default 300 text, 1000 spoken)")
    stress.add_argument("--seed", type=int, default=0, help="spoken: the user's plan (pauses, rates, barge-ins)")
    add_out_option(stress, "stress-out", "node logs, the utterances and (spoken) requests.csv, resources.csv, soak.png")
    stress.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    stress.set_defaults(run=cmd_stress)


BRINGUP_OPTIONS = {name: name for name in ("policy", "asr.backend", "asr.input", "tts.sink", "tts.wav_dir")}


def cmd_bringup(args: argparse.Namespace) -> int:
    from ..nodes.bringup import HALVES, NODES, bringup, in_place_of_the_ear

    params_file = params_file_or_default(args.params)
    overrides = given_params(args, {**BRINGUP_OPTIONS, **MODEL_OPTIONS})
    overrides.update(dict(args.set))
    backend = overrides.pop("asr.backend") if overrides.get("asr.backend") == "text" else None
    return bringup(params_file, overrides, in_place_of_the_ear(HALVES[args.half] if args.half else NODES, backend))


def _tokenizer_encode():
    """The embedded model's tokenizer (no weights), for the measures counted in tokens."""
    from ..engine.models import embedded_tokenizer

    tokenizer = embedded_tokenizer()
    return lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]


def cmd_demo(args: argparse.Namespace) -> int:
    from ..audio.recognition.text_asr import load_questions, robot_conversation_file
    from ..eval.bag_replay.phases import TurnPhases, format_phase_table, phase_summary, plot_phases
    from ..eval.graph.graph_demo import DemoSettings, conversation_measures, heard_table, latency_table, measures_table, run_demo

    check_limit(args.limit)
    params_file = params_file_or_default(args.params)
    source = args.questions or robot_conversation_file()
    questions = [q.text for q in load_questions(source, args.limit)]  # a bad file fails before the graph starts
    spoken = args.asr_backend != "text"
    settings = DemoSettings(params_file, args.out, source, tuple(args.policies), args.limit, spoken=spoken)
    if spoken:
        settings.asr_backend = args.asr_backend
    answers = run_demo(settings)
    how = f"spoken by Piper, heard by {args.asr_backend}" if spoken else "typed at 600 chars/min (text backend)"
    since = "the true end of speech (the last voiced sample)" if spoken else "the end of speech"
    print(f"\naudio latency from {since}, {len(questions)} utterances {how}, through the ROS 2 graph:")
    print(latency_table(questions, answers))
    print("\nconversation (docs/results/conversations.md): repeated openings, history copy, first sentence as baseline's")
    print(measures_table(conversation_measures(answers, _tokenizer_encode())))
    phases = {
        policy: [TurnPhases.of_report(str(i), r, _true_end(r)) for i, r in enumerate(rows, 1) if r is not None]
        for policy, rows in answers.items()
    }
    print(
        "\nwhere the silence goes (detector lag: the voice detector's end of speech after the true end; endpoint: the final "
        "after the detector's end; LLM: the commit after the final; TTS: the first audio after the commit):"
    )
    print(format_phase_table(phase_summary(phases)))
    plot_phases(args.out / "phases.png", phases)
    print(f"\n{list(answers)[-1]}'s answers:")
    print(heard_table(questions, answers))
    print(
        f"replies: {args.out}/<policy>/reply_NNN.wav; reports: {args.out}/reports.json; phases: {args.out}/phases.png; "
        f"node logs: {args.out}/graph-<policy>.log"
    )
    unanswered = [(policy, i + 1) for policy, rows in answers.items() for i, report in enumerate(rows) if report is None]
    for policy, turn in unanswered:
        print(f"demo: question {turn} got no reply from {policy} (see {args.out}/graph-{policy}.log)", file=sys.stderr)
    return 1 if unanswered else 0


def cmd_budget(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..audio.recognition.text_asr import robot_conversation_file
    from ..eval.graph.cpu_budget import format_budget, run_budget
    from ..eval.graph.graph_demo import DemoSettings

    check_limit(args.limit)
    settings = DemoSettings(params_file_or_default(args.params), args.out, robot_conversation_file(), (args.policy,), args.limit)
    with tqdm(total=args.limit, desc="budget", unit="turn") as bar:
        result = run_budget(settings, args.policy, progress=bar.update)
    print(format_budget(result))
    print(f"wrote {args.out}/budget.json, budget.md, timeline.png; node logs: {args.out}/graph-{args.policy}.log")
    return 0 if result["turns"] == args.limit else 1


def _true_end(report: dict[str, str]) -> float | None:
    """The true end of speech the spoken demo knows (the text backend's reports have none)."""
    return float(report["t_true_end"]) if "t_true_end" in report else None


def cmd_stress(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    if args.ear == "spoken":
        return _spoken_soak(args)
    from ..eval.graph.stress import StressSettings, run_stress

    turns = args.turns or 300
    settings = StressSettings(params_file_or_default(args.params), args.out, turns=turns)
    if turns <= settings.rss_from_turn:
        raise ConfigError(
            f"--turns must be more than {settings.rss_from_turn} (memory growth is measured from that turn), got {turns}"
        )
    with tqdm(total=turns, desc="stress", unit="turn") as bar:
        result = run_stress(settings, progress=bar.update)
    print(result.line())
    return 0 if result.passed else 1


def _spoken_soak(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..eval.graph.soak_faults import FAULTS
    from ..eval.graph.spoken_soak import SoakSettings, run_spoken_soak

    turns = args.turns or 1000
    if turns <= len(FAULTS):
        raise ConfigError(f"--turns must be more than {len(FAULTS)} (one fault before each of as many turns), got {turns}")
    settings = SoakSettings(params_file_or_default(args.params), args.out, turns=turns, seed=args.seed)
    with tqdm(total=turns, desc="soak", unit="turn") as bar:

        def progress(turn, rows) -> None:
            heard = rows[0].heard or "(no answer)"
            bar.set_postfix_str(f"{rows[0].first_audio_s:.2f} s, heard {heard[:30]!r}", refresh=False)
            bar.update()

        result = run_spoken_soak(settings, progress)
    print(f"wrote {args.out}/requests.csv, resources.csv, soak.png, soak.json; node logs: {args.out}/graph.log")
    print(result.line())
    return 0 if result.passed else 1
