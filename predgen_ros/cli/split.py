"""`predgen-ros split`: the robot/workstation split on this machine (two network namespaces)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..engine.config import ConfigError


def register(sub) -> None:
    split = sub.add_parser(
        "split",
        help="asr_node and tts_node in a `robot` namespace, predgen_node in `workstation`: link faults or the latency table (root)",
    )
    split.add_argument("what", choices=["faults", "latency"], help="faults: the three link faults, as JSON; latency: the table")
    split.add_argument("--out", type=Path, default=Path("split-out"), help="output folder (default split-out)")
    split.add_argument("--limit", type=int, default=10, help="latency: the first N robot questions (default 10)")
    split.add_argument("--params", type=Path, default=None, help="ROS 2 parameter file (default: config/predgen.yaml)")
    split.set_defaults(run=cmd_split)


def cmd_split(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..eval.graph.split import POLICIES, SETUPS, format_latency_table, run_faults, run_latency
    from ..nodes.two_hosts import TwoHostsError

    try:
        if args.what == "faults":
            print(json.dumps(run_faults(args.out, args.params)))
            return 0
        if args.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {args.limit}")
        with tqdm(total=args.limit * len(SETUPS) * len(POLICIES), desc="split latency", unit="question") as bar:
            table = run_latency(args.out, args.limit, args.params, progress=bar.update)
    except TwoHostsError as err:
        raise ConfigError(f"the two-host harness cannot run here: {err}") from None
    print(format_latency_table(table))
    print(f"wrote {args.out / 'latency.json'}")
    return 0
