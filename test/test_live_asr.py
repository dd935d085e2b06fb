"""eval --endpoint-policies: the sample bag's audio through a live asr_node, predgen_node and tts_node."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest

from predgen_ros.eval.bag_replay.bags import BagError, read_bag
from predgen_ros.eval.bag_replay.evaluate import run_eval
from predgen_ros.eval.bag_replay.live_asr import CLOSING_TOLERANCE_S, LivePlayer, endpoint_overrides, load_audio_replay
from predgen_ros.eval.bag_replay.replay import EvalSettings, load_replay
from predgen_ros.nodes.bringup import default_params_file
from predgen_ros.nodes.common import stamp

SAMPLE = Path(str(files("predgen_ros") / "data" / "bags" / "sample"))


def test_endpoint_policy_names_become_asr_node_parameters():
    assert endpoint_overrides("fixed_0.8") == {"asr.endpoint.policy": "fixed", "asr.endpoint_silence_s": 0.8}
    assert endpoint_overrides("fused") == {"asr.endpoint.policy": "fused"}
    with pytest.raises(BagError, match="fixed_<seconds>"):
        endpoint_overrides("fixed_soon")


def test_the_audio_of_the_first_questions_only():
    _, markers = load_replay(SAMPLE)
    audio = load_audio_replay(SAMPLE, limit=2)
    assert audio and all(m.topic == "audio/user" for m in audio)
    assert max(m.t_ns for m in audio) < markers[2].t_start_ns
    assert len(load_audio_replay(SAMPLE, None)) > len(audio)


def test_the_replay_splits_the_bags_audio_into_microphone_chunks():
    """A 100 ms chunk of the bag becomes five 20 ms ones, each sent when its last sample
    would have arrived; the audio and the last stamp are the bag's."""
    import numpy as np
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Int16MultiArray

    def samples(messages):
        return np.concatenate([deserialize_message(m.raw, Int16MultiArray).data for m in messages])

    whole = load_audio_replay(SAMPLE, limit=1, chunk_ms=1000)
    split = load_audio_replay(SAMPLE, limit=1, chunk_ms=20)
    assert len(split) == 5 * len(whole)
    assert np.array_equal(samples(split), samples(whole))
    assert [m.t_ns for m in split[4::5]] == [m.t_ns for m in whole]
    assert all(b.t_ns - a.t_ns == 20_000_000 for a, b in zip(split, split[1:]))
    assert all(deserialize_message(m.raw, Int16MultiArray).layout.dim[0].label == "mono_16000hz" for m in split)


def test_a_final_whose_speech_ended_before_the_question_did_cut_it_off():
    from std_msgs.msg import Header

    _, markers = load_replay(SAMPLE)
    first = markers[0]
    player = LivePlayer.__new__(LivePlayer)  # only its bookkeeping: no node needed
    player.recorded = [
        ("asr/speech_end", 0, Header(stamp=stamp(t_ns / 1e9)))
        for t_ns in (
            (first.t_start_ns + first.t_end_ns) // 2,  # a hesitation ended the turn mid-question
            first.t_end_ns - int(CLOSING_TOLERANCE_S * 1e9 / 2),  # the closing final, its end a VAD frame early
            markers[1].t_end_ns,
        )
    ]
    records = player.records("predgen@fused", markers, [(0, ""), (0, ""), (0, "")])
    assert [r.early_finals for r in records] == [1, 0, 0]


@pytest.mark.graph
@pytest.mark.e2e  # the nodes load the real models
def test_the_sample_audio_through_a_live_asr_node_answers_every_question(tmp_path):
    settings = EvalSettings(
        SAMPLE, tmp_path, default_params_file(), ("predgen",), {"generation.max_new_tokens": 0}, endpoint_policies=("llm",)
    )
    records, summary = run_eval(settings)
    assert [r.policy for r in records] == ["predgen@llm"] * 3
    assert all(r.answered for r in records), [(r.qid, r.no_reply) for r in records if not r.answered]
    assert all(r.audio_latency_s > 0 for r in records)  # the reply came after the user stopped speaking
    heard = read_bag(tmp_path / "recorded_predgen@llm", ["asr/final", "asr/speech_end"])
    assert sum(m.topic == "asr/final" for m in heard) >= 3  # asr_node itself heard the audio
    written = json.loads((tmp_path / "summary.json").read_text())["endpoint_policies"]
    assert set(written) == {"llm"}
    assert {"audio_latency_p50_s", "audio_latency_p90_s", "false_endpoint_rate"} <= set(written["llm"])
    assert written["llm"]["answered"] == 3

    again, _ = run_eval(
        EvalSettings(
            SAMPLE,
            tmp_path,
            default_params_file(),
            ("predgen",),
            {"generation.max_new_tokens": 0},
            endpoint_policies=("llm",),
            resume=True,
        )
    )  # the recorded run is kept, not repeated
    assert [(r.qid, r.audio_latency_s) for r in again] == [(r.qid, r.audio_latency_s) for r in records]
