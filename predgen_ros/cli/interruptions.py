"""`make-interruption-bag` and `eval-interruptions`: speech and noise over the robot, made and replayed."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cache import cache_dir
from ..engine.config import ConfigError
from .options import add_asr_backend_option, add_set_option, check_limit, comma_list, params_file_or_default


def _default_bag() -> Path:
    return cache_dir() / "bags" / "interruptions"


def register(sub) -> None:
    make = sub.add_parser(
        "make-interruption-bag",
        help="robot requests, each with an acknowledgement, a noise burst or a barge-in to come while the robot answers",
    )
    make.add_argument(
        "--per-kind", type=int, default=22, help="trials of each kind (default 22: about 20 of each come while the robot speaks)"
    )
    make.add_argument("--seed", type=int, default=0, help="which requests, events and times (default 0)")
    make.add_argument("--out", type=Path, default=None, help="bag folder (default ~/.cache/predgen_ros/bags/interruptions)")
    make.set_defaults(run=cmd_make)

    ev = sub.add_parser("eval-interruptions", help="replay the interruption bag through the live graph, once per policy")
    ev.add_argument("--bag", type=Path, default=None, help="bag made by make-interruption-bag (default: its default folder)")
    ev.add_argument("--policies", type=comma_list(str), default=["pause", "stop"], help="from pause, stop (default both)")
    ev.add_argument("--out", type=Path, default=Path("interruptions-out"), help="output folder (default interruptions-out)")
    ev.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    ev.add_argument("--limit", type=int, default=None, help="only the first N trials")
    ev.add_argument(
        "--robot-in-mic",
        type=int,
        default=None,
        metavar="ROOM_SEED",
        help="mix the robot's own voice into the microphone through rooms drawn from this seed (eval/hearing/echo_mic.py)",
    )
    ev.add_argument(
        "--hearing",
        type=comma_list(str),
        default=["echo"],
        help="with --robot-in-mic: from echo (the canceller, the default), mute (no canceller, muted while the robot "
        "speaks), open (neither); one run each (default echo)",
    )
    ev.add_argument(
        "--silent-trials", type=int, default=0, help="also N replies with nothing said over them, between the bag's trials"
    )
    ev.add_argument(
        "--keep-heard",
        action="store_true",
        help="save what asr_node heard, each utterance a WAV, under OUT/heard-<run> (asr.record_dir), "
        "and name each trial's in trials.json",
    )
    add_asr_backend_option(ev)
    add_set_option(ev, "any node parameter (repeatable)")
    ev.set_defaults(run=cmd_eval)


def cmd_make(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..audio.recognition.text_asr import load_questions
    from ..eval.barge_in.interruption_bag import KINDS, ROBOT_QUESTIONS, make_interruption_bag

    if args.per_kind < 1:
        raise ConfigError(f"--per-kind must be >= 1, got {args.per_kind}")
    out = args.out or _default_bag()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tqdm(total=args.per_kind * len(KINDS), desc="make-interruption-bag", unit="trial") as bar:
        trials = make_interruption_bag(
            out, [q.text for q in load_questions(ROBOT_QUESTIONS)], args.per_kind, args.seed, progress=bar.update
        )
    print(f"wrote {out}: {len(trials)} trials ({args.per_kind} each of {', '.join(KINDS)})")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..eval.barge_in.interruption_bag import read_interruption_bag
    from ..eval.barge_in.interruption_results import format_summary, summarize, write_results
    from ..eval.barge_in.interruptions import HEARING, POLICIES, interleave, run_policy, silent_trials

    unknown = [p for p in args.policies if p not in POLICIES]
    if unknown:
        raise ConfigError(f"--policies: unknown {', '.join(unknown)} (choose from {', '.join(POLICIES)})")
    unknown = [h for h in args.hearing if h not in HEARING]
    if unknown:
        raise ConfigError(f"--hearing: unknown {', '.join(unknown)} (choose from {', '.join(HEARING)})")
    if args.silent_trials < 0:
        raise ConfigError(f"--silent-trials must be >= 0, got {args.silent_trials}")
    check_limit(args.limit)
    params_file = params_file_or_default(args.params)
    trials = read_interruption_bag(args.bag or _default_bag(), args.limit)  # a bad bag fails before any node starts
    trials = interleave(silent_trials(trials, args.silent_trials), trials)
    hearings = args.hearing if args.robot_in_mic is not None else [None]
    runs = [(policy, hearing) for policy in args.policies for hearing in hearings]
    args.out.mkdir(parents=True, exist_ok=True)
    import rclpy

    results = []
    rclpy.init()
    try:
        with tqdm(total=len(trials) * len(runs), desc="eval-interruptions", unit="trial") as bar:
            for policy, hearing in runs:
                label = policy if hearing is None else f"{policy}-{hearing}"
                bar.set_postfix_str(label)
                extra = {"asr.backend": args.asr_backend, **HEARING.get(hearing, {}), **dict(args.set)}
                if args.keep_heard:
                    extra["asr.record_dir"] = str((args.out / f"heard-{label}").resolve())
                results += run_policy(policy, trials, params_file, args.out, extra, bar.update, args.robot_in_mic, label)
                summary = summarize(results)
                write_results(args.out, results, summary)  # after each run: a later run's failure keeps this one's
    finally:
        rclpy.try_shutdown()
    print(format_summary(summary))
    print(f"wrote {args.out}/report.md, summary.json, trials.json")
    return 0
