"""`asr-wer`: the recognizers compared offline on the same Piper speech (no graph);
`far-field`: a bag's speech heard from across a simulated room."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..audio.recognition.endpoint import ENDPOINT_SILENCE_S
from ..audio.recognition.recognizers import RECOGNIZERS
from .options import comma_list


def register(sub) -> None:
    wer = sub.add_parser("asr-wer", help="word error rate and CPU cost of each recognizer on the same spoken questions")
    wer.add_argument(
        "--questions", type=Path, default=None, help="MT-Bench .jsonl or a text file of utterances (default: MT-Bench turn 1)"
    )
    wer.add_argument("--bag", type=Path, default=None, help="hear a bag's audio/user instead (make-bag, far-field)")
    wer.add_argument("--limit", type=int, default=None, help="only the first N questions")
    wer.add_argument(
        "--backends",
        type=comma_list(str),
        default=["pocketsphinx", "whisper"],
        help=f"comma-separated, of {', '.join(RECOGNIZERS)}, whisper-raw (no LocalAgreement-2) (default pocketsphinx,whisper)",
    )
    wer.add_argument("--hesitations", type=float, default=0.0, metavar="P", help="a pause inside P %% of the questions")
    wer.add_argument("--seed", type=int, default=0, help="which questions hesitate, where and how long (default 0)")
    wer.add_argument("--gap", type=float, default=3.0, help="silence before each question, s (default 3)")
    wer.add_argument("--vad", default="silero", help="voice activity detector: webrtc or silero (default silero)")
    wer.add_argument("--endpoint-silence", type=float, default=ENDPOINT_SILENCE_S, help="fixed endpoint, s")
    wer.add_argument(
        "--whisper-model",
        default="tiny.en",
        help="the whisper backends' model: tiny.en, base (embedded) or a CTranslate2 Whisper folder (default tiny.en)",
    )
    wer.add_argument("--whisper-beam", type=int, default=1, help="the whisper backends' beam size (default 1)")
    wer.add_argument("--out", type=Path, default=None, help="folder for summary.json (each question's words as heard)")
    wer.set_defaults(run=cmd_asr_wer)

    far = sub.add_parser("far-field", help="a bag's user audio played 1-2 m from the microphone in simulated rooms (new bag)")
    far.add_argument("--bag", type=Path, required=True, help="a bag made by make-bag")
    far.add_argument("--out", type=Path, required=True, help="the far-field bag folder to create")
    far.add_argument("--seed", type=int, default=0, help="rooms, distances and noise (default 0)")
    far.set_defaults(run=cmd_far_field)


def cmd_far_field(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..eval.bag_replay.bags import question_markers, read_bag
    from ..eval.hearing.far_field import RoomSettings, reverberate

    if args.out.exists():
        raise SystemExit(f"predgen-ros far-field: error: {args.out} exists: remove it or choose another --out")
    questions = len(question_markers(read_bag(args.bag, ["eval/turn"])))
    with tqdm(total=questions, desc="far-field", unit="question") as bar:
        rooms = reverberate(args.bag, args.out, RoomSettings(seed=args.seed), progress=bar.update)
    (args.out / "rooms.json").write_text(json.dumps(rooms, indent=1))
    rt60 = sorted(r["rt60_s"] for r in rooms)
    distance = sorted(r["distance_m"] for r in rooms)
    print(
        f"{args.out}: {len(rooms)} questions, RT60 {rt60[0]:.2f}-{rt60[-1]:.2f} s, distance {distance[0]:.1f}-{distance[-1]:.1f} m, "
        f"SNR {rooms[0]['snr_db']} dB"
    )
    return 0


def cmd_asr_wer(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..audio.recognition.whisper import WhisperSettings
    from ..audio.recognition.whisper_models import EMBEDDED_MODELS
    from ..audio.speech.tts import PiperSynthesizer
    from ..eval.bag_replay.make_bag import speak_questions
    from ..eval.benchmark.questions import load_questions
    from ..eval.hearing.asr_offline import bag_speech, hear, table

    known = (*RECOGNIZERS, "whisper-raw")
    unknown = [b for b in args.backends if b not in known]
    if unknown:
        raise SystemExit(f"predgen-ros asr-wer: error: unknown backend {unknown[0]!r} (choose from {', '.join(known)})")
    if args.bag:
        audio, turns = bag_speech(args.bag, args.limit)
    else:
        questions = load_questions(args.questions, args.limit)
        audio, turns = speak_questions(questions, PiperSynthesizer(reproducible=True), args.gap, args.hesitations, args.seed)
    audio_s = len(audio) / 16000
    embedded = args.whisper_model in EMBEDDED_MODELS
    whisper = WhisperSettings(
        model=args.whisper_model if embedded else "tiny.en",
        model_path="" if embedded else args.whisper_model,
        beam=args.whisper_beam,
    )
    results = []
    for backend in args.backends:
        with tqdm(total=len(turns), desc=backend, unit="question") as bar:
            results.append(hear(backend, audio, turns, args.vad, args.endpoint_silence, bar.update, whisper))
    print(table(results, audio_s))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "run"}
        (args.out / "summary.json").write_text(
            json.dumps({"settings": settings, "audio_s": audio_s, "results": results}, indent=1)
        )
    return 0
