"""A short soak of the real graph and every fault scenario of `predgen-ros stress`."""

from __future__ import annotations

import re

import pytest

from predgen_ros.eval.graph.stress import FAULTS, StressSettings, run_stress, soak_utterances
from predgen_ros.nodes.bringup import TEXT_USER, default_params_file


def test_the_soak_mixes_awkward_utterances_into_the_questions():
    utterances = soak_utterances(300)
    assert len(utterances) == 300
    assert "hi" in utterances and any("🤖" in u for u in utterances)
    assert all("\n" not in u and u.strip() for u in utterances)


@pytest.mark.graph
@pytest.mark.e2e  # the nodes load the real models
def test_a_short_soak_answers_every_turn_and_survives_every_fault(tmp_path):
    settings = StressSettings(default_params_file(), tmp_path, turns=8, rss_from_turn=3, turn_timeout_s=60)
    result = run_stress(settings)
    assert (result.sent, result.answered, result.crashes, result.stuck) == (8, 8, 0, 0), result
    assert result.faults == {name: "ok" for name in FAULTS}
    assert [answered for answered, _ in result.rss_samples][-1] == 8  # sampled up to the last answer
    nodes = {TEXT_USER, "predgen_node", "tts_node"}  # the simulated user speaks in asr_node's place
    assert all(set(sample) == nodes for _, sample in result.rss_samples)
    assert set(result.growth_by_node_mb) == set(result.late_growth_by_node_mb) == nodes
    assert result.rss_growth_mb == sum(result.growth_by_node_mb.values())
    rows = (tmp_path / "rss.csv").read_text().splitlines()
    assert rows[0] == "answered,predgen_node,text_user,tts_node" and rows[-1].startswith("8,")
    assert re.fullmatch(
        r"stress: sent=8 answered=8 faults=3 crashes=0 stuck=0 max_rss_mb=\d+\.\d rss_growth_mb=-?\d+\.\d late_growth_mb=-?\d+\.\d",
        result.line(),
    )
    assert result.passed
