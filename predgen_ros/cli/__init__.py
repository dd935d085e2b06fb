"""The `predgen-ros` command: one module per command family, each with its parsers
and its runs side by side (bench.py, graph.py, bags.py, endpoints.py, interruptions.py, served.py)."""

from __future__ import annotations

import argparse
import logging
import sys

from ..engine.config import ConfigError, ModelError
from . import asr, bags, bench, endpoints, graph, interruptions, served, split
from .options import OneLineParser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="predgen-ros", description="Speculative LLM replies for ROS 2 voice dialogue.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for family in (bench, graph, bags, endpoints, interruptions, split, asr, served):
        family.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from ..audio.pcm import AsrError
    from ..audio.speech.tts import VoiceError
    from ..eval.bag_replay.bags import BagError
    from ..eval.benchmark.questions import QuestionError
    from ..nodes.bringup import GraphError

    try:
        return args.run(args)
    except (ModelError, VoiceError, QuestionError, ConfigError, GraphError, BagError, AsrError) as err:
        print(f"predgen-ros {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"predgen-ros {args.command}: interrupted", file=sys.stderr)
        return 130
