"""`endpoints`: end-of-turn policies scored offline on a bag's audio (no graph)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..audio.pcm import AUDIO_CHUNK_MS
from ..audio.recognition.endpoint import DEFAULT_ENDPOINT_POLICIES, EndpointConfig
from ..audio.recognition.vad import VADS
from ..engine.config import ConfigError
from .options import add_asr_backend_option, add_out_option, check_limit, comma_list

DEFAULTS = EndpointConfig()


# The endpoint rule's settings as options: (option, EndpointConfig field, help).
_RULE_OPTIONS = (
    ("--pause", "pause_s", "the short pause that asks the estimates, s"),
    ("--silence", "silence_s", "fixed: the silence that ends an utterance; fused: the pause when one estimate says complete, s"),
    ("--max-silence", "max_silence_s", "the longest wait, s"),
    ("--audio-threshold", "audio_threshold", "Smart Turn probability that means complete"),
    ("--text-threshold", "text_threshold", "LLM end-of-message probability that means complete"),
)


def register(sub) -> None:
    ends = sub.add_parser(
        "endpoints", help="score endpoint policies offline on a bag's audio (ASR only, no graph): delay, false endpoints"
    )
    ends.add_argument("--bag", type=Path, required=True, help="bag made by make-bag (with --hesitations to see false endpoints)")
    ends.add_argument(
        "--policies",
        type=comma_list(str),
        default=list(DEFAULT_ENDPOINT_POLICIES),
        help="comma-separated fixed_<seconds>, smart_turn, llm, fused (default fixed_0.35,fixed_0.8,smart_turn,llm,fused)",
    )
    ends.add_argument("--vad", choices=VADS, default="silero", help="voice activity detector (default silero)")
    add_asr_backend_option(ends)  # Whisper is waited for after each chunk, as if instant
    for option, name, text in _RULE_OPTIONS:
        default = getattr(DEFAULTS, name)
        ends.add_argument(option, type=float, default=default, dest=name, help=f"{text} (default {default})")
    ends.add_argument("--limit", type=int, default=None, help="only the first N questions of the bag")
    ends.add_argument(
        "--audio-chunk-ms",
        type=int,
        default=AUDIO_CHUNK_MS,
        help=f"the audio in chunks of at most this many ms, as a microphone sends it; the endpoint is decided per chunk "
        f"(default {AUDIO_CHUNK_MS}, as eval's replay)",
    )
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
    add_out_option(ends, "endpoints-out", "summary.json and endpoints.md")
    ends.set_defaults(run=cmd_endpoints)


def _embedded_lm():
    from ..engine.models import load_language_model
    from ..engine.params import ModelParams

    return load_language_model(ModelParams(None))


def cmd_endpoints(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from tqdm import tqdm

    from ..audio.pcm import AsrError
    from ..audio.recognition.endpoint import EndpointConfig, EndpointError
    from ..eval.hearing import endpoints as ep

    check_limit(args.limit)
    try:
        base = EndpointConfig(**{name: getattr(args, name) for _, name, _ in _RULE_OPTIONS})
        configs = {name: ep.endpoint_config(name, base) for name in args.policies}
    except (EndpointError, ep.BagError) as err:
        raise ConfigError(str(err)) from None
    if args.audio_chunk_ms <= 0:
        raise ConfigError(f"--audio-chunk-ms must be > 0, got {args.audio_chunk_ms}")
    audio, markers, t0_ns = ep.load_audio(args.bag, args.limit, args.audio_chunk_ms)
    text_estimate = ep.TextEstimator(_embedded_lm())
    smart_turn = None
    if args.sweep or any(c.uses_audio for c in configs.values()):
        from ..audio.recognition.turn_models import SmartTurn

        smart_turn = SmartTurn()
    if args.sweep:
        try:
            return _endpoint_sweep(args, audio, markers, t0_ns, text_estimate, smart_turn)
        except AsrError as err:
            raise ConfigError(str(err)) from None
    runs = {}
    summary = {
        "bag": str(args.bag),
        "questions": len(markers),
        "vad": args.vad,
        "recognizer": args.asr_backend,
        "settings": asdict(base),
        "endpoint_policies": {},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        with tqdm(total=len(audio) * len(configs), desc="endpoints", unit="chunk") as bar:
            for name, config in configs.items():
                bar.set_postfix_str(name)
                runs[name] = ep.run_policy(name, config, audio, args.vad, text_estimate, smart_turn, bar.update, args.asr_backend)
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

    from ..eval.hearing import endpoint_sweep as sw
    from ..eval.hearing import endpoints as ep

    with tqdm(total=len(audio), desc="pauses", unit="chunk") as bar:
        pauses, heard = sw.observe_pauses(
            audio,
            args.vad,
            text_estimate,
            smart_turn,
            pause_s=0.1,
            observe_s=1.3,
            progress=bar.update,
            recognizer=args.asr_backend,
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
                "recognizer": args.asr_backend,
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
