"""Bad input gets one clear error line and exit code 2, never a traceback."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "predgen_ros.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def assert_one_line_error(result, *needles):
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_missing_model_directory(tmp_path):
    result = run_cli("bench", "--limit", "1", "--model", str(tmp_path / "nowhere"))
    assert_one_line_error(result, "model not found", "nowhere")


def test_empty_question_file(tmp_path):
    empty = tmp_path / "q.jsonl"
    empty.write_text("\n")
    assert_one_line_error(run_cli("bench", "--questions", str(empty)), "holds no questions")


def test_malformed_question_file(tmp_path):
    bad = tmp_path / "q.jsonl"
    bad.write_text(json.dumps({"question_id": 1, "turns": ["ok?"]}) + "\n{not json\n")
    assert_one_line_error(run_cli("bench", "--questions", str(bad)), "q.jsonl:2")


@pytest.mark.parametrize(
    "args, needle",
    [(["--policies", "baseline,fastest"], "fastest"), (["--verifier", "fuzzy"], "fuzzy"), (["--decoder", "beam"], "beam")],
)
def test_unknown_policy_verifier_or_decoder(args, needle):
    assert_one_line_error(run_cli("bench", *args), needle)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--settings", "exact,fuzzy"], "fuzzy"),
        (["--settings", "exact", "--rates", "600,fast"], "--rates"),
        (["--settings", "exact", "--history", "0,512"], "--conversation"),
        (["--settings", "exact", "--turn", "3"], "--turn"),
        (["--settings", "exact", "--max-chars", "5"], "shorter than"),
    ],
)
def test_a_bad_frontier_option_is_one_line(args, needle):
    assert_one_line_error(run_cli("frontier", *args), needle)


@pytest.mark.parametrize("args", [["bag-info", "predgen_ros/data/bags/sample"], ["bringup", "--help"]])
def test_light_commands_do_not_import_the_inference_stack(args):
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "predgen_ros.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "predgen_ros.engine.config" in imported  # -X importtime did report
    assert not imported & {"torch", "transformers"}
