"""Bags: make-bag output reads back identically; damaged bags give one clear line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

from predgen_ros.audio.recognition.text_asr import Question
from predgen_ros.eval.bag_replay.bags import BagError, read_bag, write_bag
from predgen_ros.eval.bag_replay.make_bag import BagSettings, bag_messages

pytestmark = pytest.mark.e2e

SAMPLE = Path(str(files("predgen_ros") / "data" / "bags" / "sample"))


def test_a_made_bag_reads_back_with_identical_messages_and_times(tmp_path):
    questions = [Question("1", "What is the capital of France?"), Question("2", "Tell me a joke about robots.")]
    messages, audio_s = bag_messages(questions, BagSettings(gap_s=1.5))
    write_bag(tmp_path / "bag", messages)
    back = read_bag(tmp_path / "bag")
    key = lambda m: (m.t_ns, m.topic)  # noqa: E731
    assert sorted(back, key=key) == sorted(messages, key=key)
    topics = {m.topic for m in back}
    assert topics == {"asr/voice", "asr/partial", "asr/final", "asr/speech_end", "audio/user", "eval/turn"}
    assert [m.topic for m in back].count("asr/final") == 2
    first_voice, first_words = (next(m.t_ns for m in back if m.topic == t) for t in ("asr/voice", "asr/partial"))
    assert first_voice <= first_words  # the voice's start is published before its words, as asr_node does
    assert abs(sum(m.topic == "audio/user" for m in back) * 0.1 - audio_s) < 0.11  # 100 ms chunks cover the audio
    assert (tmp_path / "bag" / "metadata.yaml").is_file() and list((tmp_path / "bag").glob("*.mcap"))


def test_the_true_end_of_speech_precedes_the_final():
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Header

    messages = read_bag(SAMPLE, ["asr/speech_end", "asr/final"])
    ends = [m for m in messages if m.topic == "asr/speech_end"]
    finals = [m for m in messages if m.topic == "asr/final"]
    assert len(ends) == len(finals) == 3
    for end, final in zip(ends, finals):
        stamp = deserialize_message(end.raw, Header).stamp
        assert stamp.sec * 10**9 + stamp.nanosec + 0.5e9 <= final.t_ns  # at least the endpoint silence later


def cli(*args):
    return subprocess.run([sys.executable, "-m", "predgen_ros.cli", *args], capture_output=True, text=True, timeout=120)


def damaged_bags(tmp_path):
    missing = tmp_path / "missing"
    no_metadata = tmp_path / "no_metadata"
    no_metadata.mkdir()
    truncated = tmp_path / "truncated"
    shutil.copytree(SAMPLE, truncated)
    mcap = next(truncated.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 3])
    corrupt = tmp_path / "corrupt"
    shutil.copytree(SAMPLE, corrupt)
    next(corrupt.glob("*.mcap")).write_bytes(b"\x89MCAP0\r\n" + bytes(range(256)) * 40)
    return {"missing": missing, "no_metadata": no_metadata, "truncated": truncated, "corrupt": corrupt}


@pytest.mark.parametrize("kind", ["missing", "no_metadata", "truncated", "corrupt"])
def test_damaged_bags_give_one_clear_line(tmp_path, kind):
    bag = damaged_bags(tmp_path)[kind]
    for command in (["bag-info", str(bag)], ["eval", "--bag", str(bag), "--out", str(tmp_path / "out")]):
        result = cli(*command)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
        assert "Traceback" not in result.stderr and str(bag) in lines[0], lines[0]
    with pytest.raises(BagError):
        read_bag(bag)
