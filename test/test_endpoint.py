"""Endpoint policies on crafted timelines: when does a pause end the utterance?"""

import pytest

from predgen_ros.audio.recognition.endpoint import EndpointConfig, Endpointer, EndpointError

CHUNK = 0.05


def first_end(policy, audio_p=None, text_p=None, **config):
    """Seconds of silence after which the policy ends the utterance (chunk by chunk),
    and how often it asked Smart Turn; the silence is 0.35 s unless given."""
    config.setdefault("silence_s", 0.35)
    asked = []

    def audio():
        asked.append(1)
        return audio_p

    endpointer = Endpointer(EndpointConfig(policy=policy, **config), audio if audio_p is not None else None)
    endpointer.speech()
    for n in range(1, 200):
        if endpointer.ends(round(n * CHUNK, 3), text_p):
            return round(n * CHUNK, 3), len(asked)
    raise AssertionError("never ended")


def test_fixed_waits_its_silence_whatever_the_estimates_say():
    assert first_end("fixed", text_p=0.9)[0] == 0.35
    assert first_end("fixed", silence_s=0.8)[0] == 0.8


@pytest.mark.parametrize(
    "policy, audio_p, text_p, expected",
    [
        ("smart_turn", 0.9, None, 0.15),  # complete: the short pause
        ("smart_turn", 0.1, 0.9, 1.0),  # incomplete audio: the long silence; the text is not its signal
        ("llm", None, 0.01, 0.15),
        ("llm", None, 1e-6, 1.0),
        ("llm", None, None, 1.0),  # no estimate yet: not complete
        ("fused", 0.9, 0.01, 0.15),  # both complete
        ("fused", 0.9, 1e-6, 0.35),  # one of them
        ("fused", 0.1, 0.01, 0.35),
        ("fused", 0.1, 1e-6, 1.0),  # neither
        ("fused", 0.1, None, 1.0),
    ],
)
def test_the_pause_a_policy_waits_follows_its_estimates(policy, audio_p, text_p, expected):
    assert first_end(policy, audio_p, text_p)[0] == expected


def test_smart_turn_is_asked_once_per_pause():
    assert first_end("smart_turn", 0.1)[1] == 1
    endpointer = Endpointer(EndpointConfig(policy="smart_turn"), lambda: 0.9)
    scores = iter([0.1, 0.9])
    endpointer.audio_estimate = lambda: next(scores)
    assert not endpointer.ends(0.2)  # first pause: incomplete
    endpointer.speech()  # the user goes on
    assert endpointer.ends(0.2)  # second pause: asked anew, complete


@pytest.mark.parametrize(
    "config, message",
    [
        (dict(policy="vad"), "asr.endpoint.policy: unknown policy 'vad'"),
        (dict(policy="llm", pause_s=2.0), "asr.endpoint.pause_s (2.0) must not exceed max_silence_s"),
        (dict(silence_s=0), "asr.endpoint.silence_s must be > 0 s"),
        (dict(text_threshold=2), "asr.endpoint.text_threshold must lie in (0, 1]"),
    ],
)
def test_bad_settings_name_the_parameter(config, message):
    with pytest.raises(EndpointError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        EndpointConfig(**config)


def test_smart_turn_policies_need_the_model():
    with pytest.raises(EndpointError, match="needs the Smart Turn model"):
        Endpointer(EndpointConfig(policy="fused"))


def test_roc_auc_counts_ties_half_and_needs_both_classes():
    from predgen_ros.eval.hearing.endpoints import roc_auc

    assert roc_auc([0.9, 0.8], [0.1, 0.8]) == 0.875  # 3 pairs ordered, 1 tie
    assert roc_auc([0.1], [0.9]) == 0.0
    assert roc_auc([0.5], []) is None


def test_the_sweep_replays_a_rule_on_recorded_pauses():
    from predgen_ros.eval.bag_replay.bags import QuestionMarker
    from predgen_ros.eval.hearing.endpoint_sweep import Pause, Rule, score_rule

    def pause(t_voice_end, audio, text, longest):
        steps = [(round(0.1 * n, 1), text) for n in range(1, int(round(longest * 10)) + 1)]
        return Pause(t_voice_end, {0.1: audio}, steps)

    # one question, 0-5 s: a 0.6 s hesitation at 2 s that sounds final but reads unfinished, then the real end
    question = QuestionMarker("q", "text", 0, 5_000_000_000)
    pauses = [pause(2.0, 0.9, 0.01, 0.6), pause(5.0, 0.9, 0.5, 1.3)]

    def outcome(rule):
        scored = score_rule(rule, pauses, [question], t0_ns=0)
        return scored["endpoint_delay_p50_s"], scored["cut_off"]

    assert outcome(Rule("fixed", silence_s=0.35)) == (pytest.approx(0.4), ["q"])  # the hesitation is longer
    assert outcome(Rule("fixed", silence_s=0.8)) == (pytest.approx(0.8), [])
    assert outcome(Rule("smart_turn", pause_s=0.1, audio_threshold=0.5)) == (pytest.approx(0.1), ["q"])
    assert outcome(Rule("llm", pause_s=0.1, text_threshold=0.1)) == (pytest.approx(0.1), [])  # the words were unfinished
    assert outcome(Rule("fused", pause_s=0.1, silence_s=0.35, text_threshold=0.1)) == (
        pytest.approx(0.1),
        ["q"],
    )  # one estimate: 0.35 s
    assert outcome(Rule("fused", pause_s=0.1, silence_s=0.65, text_threshold=0.1)) == (pytest.approx(0.1), [])


def test_the_offline_tools_read_a_bags_audio_in_microphone_chunks():
    """`endpoints` decides per chunk, as asr_node does: the bag's 100 ms chunks are split
    into 20 ms ones, each stamped at its end, the audio unchanged."""
    from importlib.resources import files
    from pathlib import Path

    from predgen_ros.eval.hearing.endpoints import load_audio

    sample = Path(str(files("predgen_ros") / "data" / "bags" / "sample"))
    whole, markers, t0 = load_audio(sample, chunk_ms=100)
    split, markers_split, t0_split = load_audio(sample, chunk_ms=20)
    assert (markers, t0) == (markers_split, t0_split)
    assert b"".join(pcm for _, pcm in split) == b"".join(pcm for _, pcm in whole)
    assert max(len(pcm) for _, pcm in split) == 640 and len(split) > 4 * len(whole)
    ends = [t for t, _ in split]
    assert all(b - a == pytest.approx(0.02) for a, b in zip(ends, ends[1:5]))
    assert {round(t, 6) for t, _ in whole} <= {round(t, 6) for t in ends}  # a 100 ms chunk's end is its last piece's


def test_the_sweep_asks_smart_turn_at_each_rules_own_pause():
    """A policy asks Smart Turn when the pause reaches its pause_s, with that much silence
    in the model's window: the sweep records the score at each grid pause and a rule reads
    its own (it read the 0.1 s score for every pause once)."""
    from predgen_ros.eval.hearing.endpoint_sweep import PAUSES_S, PauseRecorder, Rule

    asked = []
    recorder = PauseRecorder(
        EndpointConfig(policy="fused", pause_s=0.1, max_silence_s=1.3),
        lambda: asked.append(1) or 0.5 + len(asked) / 10,
        lambda: 9.0,
    )
    for n in range(1, 14):
        recorder.ends(round(0.1 * n, 2) + 0.02)
    (pause,) = recorder.pauses
    assert sorted(pause.audio) == list(PAUSES_S) and len(asked) == len(PAUSES_S)  # once per grid pause
    assert Rule("smart_turn", pause_s=0.1, audio_threshold=0.7).fires(pause) == pytest.approx(1.02)  # 0.6 at 0.1 s: max
    assert Rule("smart_turn", pause_s=0.3, audio_threshold=0.7).fires(pause) == pytest.approx(0.32)  # later scores rose
