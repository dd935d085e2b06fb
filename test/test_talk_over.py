"""What an early start costs the user (eval/bag_replay/talk_over.py), and the live replay's per-question record of it."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from std_msgs.msg import Bool, Header, String

from predgen_ros.eval.bag_replay.live_asr import LivePlayer, endpoint_summary
from predgen_ros.eval.bag_replay.replay import GraphRun, load_replay
from predgen_ros.eval.bag_replay.talk_over import speaking_spans, talk_over_s, words_lost
from predgen_ros.nodes.common import stamp

SAMPLE = Path(str(files("predgen_ros") / "data" / "bags" / "sample"))
S = 1_000_000_000


def speaking(*changes):
    return [("robot_speaking", t, Bool(data=on)) for t, on in changes]


def test_the_robot_speaking_spans_and_their_overlap_with_the_users_speech():
    spans = speaking_spans(speaking((1 * S, True), (2 * S, True), (3 * S, False), (5 * S, True)))
    assert spans == [(1 * S, 3 * S), (5 * S, float("inf"))]  # a repeated true is one span; the last never ended
    assert talk_over_s(spans, 0, 10 * S) == pytest.approx(2 + 5)
    assert talk_over_s(spans, int(2.5 * S), 4 * S) == pytest.approx(0.5)
    assert talk_over_s(spans, 3 * S, 5 * S) == 0.0  # it spoke only before and after


def interruption(what, t_ns):
    return ("tts/interruption", t_ns + S // 10, Header(stamp=stamp(t_ns / 1e9), frame_id=what))  # received after its stamp


def test_the_voice_counts_only_while_it_sounds_not_while_a_reply_is_paused():
    recorded = [
        *speaking((1 * S, True)),
        interruption("pause", 2 * S),
        interruption("resume", 4 * S),
        interruption("stop", 5 * S),
        *speaking((6 * S, False), (8 * S, True)),
        interruption("pause", 9 * S),
    ]
    spans = speaking_spans(sorted(recorded, key=lambda m: m[1]))
    assert spans == [(1 * S, 2 * S), (4 * S, 5 * S), (8 * S, 9 * S)]  # paused still counts as robot_speaking
    assert talk_over_s(spans, 0, 10 * S) == pytest.approx(3)


def test_words_are_lost_unless_the_early_final_was_resumed_and_the_last_carries_it():
    whole = ("What is the capital of France?", "confirmed")
    assert not words_lost([whole], closed=True)
    assert not words_lost([("What is the capital", "resumed"), whole], closed=True)  # answered whole
    assert words_lost([("What is the capital", "confirmed"), ("of France?", "confirmed")], closed=True)  # a turn of its own
    assert words_lost([("What is the capital", "resumed"), ("of France?", "confirmed")], closed=True)  # not carried
    assert words_lost([("What is the capital", None), whole], closed=True)  # the contract never spoke of it
    assert words_lost([("What is the capital", "confirmed")], closed=False)  # nothing after the speech ended
    assert words_lost([], closed=False)


def voice(kind, t_ns):
    return ("asr/voice", 0, Header(stamp=stamp(t_ns / 1e9), frame_id=kind))


def diagnostics(t_ns, node, **values):
    status = DiagnosticStatus(name=f"/{node}", values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])
    return ("/diagnostics", t_ns, DiagnosticArray(status=[status]))


def test_a_reply_begun_inside_a_pause_is_talk_over_and_the_work_is_counted_per_question():
    _, markers = load_replay(SAMPLE)
    first, second = markers[0], markers[1]
    middle = (first.t_start_ns + first.t_end_ns) // 2
    player = LivePlayer.__new__(LivePlayer)  # only its bookkeeping: no node needed
    player.recorded = [
        diagnostics(first.t_start_ns - S, "predgen_node", forward_passes=100),
        diagnostics(first.t_start_ns - S, "tts_node", synthesized_s=1.0),
        ("asr/speech_end", 0, Header(stamp=stamp(middle / 1e9))),  # an early final at a pause ...
        ("asr/final", 0, String(data="Tell me")),
        voice("resumed", middle + S // 4),
        *speaking((middle + S // 5, True), (middle + S // 2, False)),  # ... answered, stopped when the user went on
        ("asr/speech_end", 0, Header(stamp=stamp(first.t_end_ns / 1e9))),
        ("asr/final", 0, String(data="Tell me the rest")),
        voice("confirmed", first.t_end_ns + S),
        *speaking((first.t_end_ns + S // 3, True), (first.t_end_ns + 2 * S, False)),
        diagnostics(second.t_start_ns - S, "predgen_node", forward_passes=130),
        diagnostics(second.t_start_ns - S, "tts_node", synthesized_s=4.0),
        ("asr/speech_end", 0, Header(stamp=stamp(second.t_end_ns / 1e9))),
        ("asr/final", 0, String(data="Another question")),
        voice("resumed", second.t_end_ns + S // 3),  # a cough after it: held, then it stands
        voice("confirmed", second.t_end_ns + S // 2),
        diagnostics(markers[2].t_start_ns - S // 2, "predgen_node", forward_passes=150),
        diagnostics(markers[2].t_start_ns - S // 2, "tts_node", synthesized_s=6.0),
        ("asr/speech_end", 0, Header(stamp=stamp(markers[2].t_end_ns / 1e9))),
        ("asr/final", 0, String(data="And a third")),
        diagnostics(markers[2].t_end_ns + S, "predgen_node", forward_passes=150),  # the third cost nothing
    ]
    records = player.records("predgen@fused", markers[:3], [(0, "")] * 3)
    assert [r.talk_over_s for r in records] == [pytest.approx(0.3), 0.0, 0.0]
    assert [r.words_lost for r in records] == [False, False, False]
    assert [r.withdrawn for r in records] == [1, 1, 0]
    assert [r.unconfirmed for r in records] == [0, 0, 1]  # the third's final: answered whole, but the contract broken
    assert [r.llm_passes for r in records] == [30, 20, 0]  # the sum is the run's 50
    assert [r.synthesized_s for r in records] == [3.0, 2.0, 0.0]
    for r in records:
        r.no_reply, r.audio_latency_s = "", 0.5
    summary = endpoint_summary(
        records, {"predgen@fused": {"speedup_vs_baseline_p50": None}}, [GraphRun("predgen@fused", "predgen")]
    )["fused"]
    assert summary["talk_over_rate"] == pytest.approx(1 / 3) and summary["talk_over_p90_s"] == pytest.approx(0.3)
    assert summary["words_lost"] == [] and summary["llm_passes_per_question"] == pytest.approx(50 / 3)
    assert summary["replies_withdrawn"] == 2 and summary["finals_without_contract"] == 1
    assert summary["synthesized_s_per_question"] == pytest.approx(5 / 3)
