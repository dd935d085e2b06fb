"""`serve-model`: an inference server with the embedded model on this machine; `fleet`:
robots sharing it (eval/served/)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from ..engine.config import ConfigError
from .options import add_out_option, comma_list


def register(sub) -> None:
    serve = sub.add_parser(
        "serve-model", help="llama-cpp-python's OpenAI-style server with a GGUF (the embedded model), until Ctrl-C"
    )
    serve.add_argument("--model", type=Path, default=None, help="a .gguf file (default: the embedded model, F16)")
    serve.add_argument("--port", type=int, default=8088, help="listen on 127.0.0.1:PORT (default 8088)")
    serve.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    serve.set_defaults(run=cmd_serve_model)

    fleet = sub.add_parser(
        "fleet", help="1, 2, 4 ... robots sharing one model server on the real clock: first audio per robot count"
    )
    fleet.add_argument("--robots", type=comma_list(int), default=[1, 2, 4], help="robot counts, one run each (default 1,2,4)")
    fleet.add_argument("--limit", type=int, default=10, help="requests of the robot conversation per robot (default 10)")
    fleet.add_argument("--port", type=int, default=8088, help="the server started for the runs listens here (default 8088)")
    add_out_option(fleet, "fleet-out", "fleet.json and the server's log")
    fleet.set_defaults(run=cmd_fleet)


def cmd_serve_model(args: argparse.Namespace) -> int:
    from ..engine.models import embedded_gguf
    from ..eval.served.model_server import ModelServer

    gguf = args.model or embedded_gguf("f16")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a stop request ends the server with it, as Ctrl-C does
    with ModelServer(gguf, args.port, threads=args.threads) as server:
        print(f"serving {gguf.name} on {server.url} (OpenAI-style; robots: model.backend openai, model.server.url {server.url}, "
              "model.server.token_ids false); Ctrl-C stops it", flush=True)  # fmt: skip
        while server.proc.poll() is None:
            time.sleep(1.0)
    return 1  # it ended by itself


def cmd_fleet(args: argparse.Namespace) -> int:
    from ..audio.recognition.text_asr import load_questions, robot_conversation_file
    from ..engine.backends.served import ServerSettings
    from ..engine.models import embedded_gguf, embedded_tokenizer
    from ..engine.params import engine_config, read_params_file
    from ..eval.served.fleet import fleet_row, run_fleet
    from ..eval.served.model_server import ModelServer
    from ..nodes.bringup import default_params_file

    if args.limit < 1 or min(args.robots) < 1:
        raise ConfigError("--limit and every --robots count must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    requests = [q.text for q in load_questions(robot_conversation_file(), limit=args.limit)]
    tokenizer, rows = embedded_tokenizer(), []
    config, _ = engine_config(read_params_file(default_params_file()))  # predgen_node's defaults
    with ModelServer(embedded_gguf("f16"), args.port, log=args.out / "server.log") as server:
        settings = ServerSettings(server.url, api="openai", token_ids=False)
        for robots in args.robots:
            runs = run_fleet(robots, settings, tokenizer, config, requests)
            rows.append(fleet_row(robots, runs) | {"first_sentences": [run.first_sentences for run in runs]})
            row = rows[-1]
            print(
                f"{robots} robot(s): {row['answers']} answers, {row['unanswered']} unanswered; first audio p50 "
                f"{row['first_audio_p50_s']:.3f} s, p90 {row['first_audio_p90_s']:.3f} s; a request at the server p50 "
                f"{row['request_p50_s']:.3f} s, p90 {row['request_p90_s']:.3f} s",
                flush=True,
            )
    (args.out / "fleet.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.out}/fleet.json")
    return 0 if all(row["unanswered"] == 0 for row in rows) else 1
