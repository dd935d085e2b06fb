"""Each node on its own: declared parameters, startup errors, asr_node over DDS."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import Bool, Header, String

from predgen_ros.audio.pcm import read_wav, to_pcm16k
from predgen_ros.audio.speech.tts import PiperSynthesizer
from predgen_ros.engine.params import node_section
from predgen_ros.nodes.bringup import MODULES, TEXT_USER, default_params_file
from predgen_ros.nodes.common import TEXT_QOS
from predgen_ros.nodes.messages import turn_event_of
from predgen_ros.nodes.probe import GraphProbe

pytestmark = [pytest.mark.graph, pytest.mark.e2e]  # the nodes load the real models

NODES = ("asr_node", "predgen_node", "tts_node")
# What each node needs on this machine, which has no microphone or speaker.
NO_DEVICES = {"asr_node": ["-p", "asr.input:=topic"], "tts_node": ["-p", "tts.sink:=none"], "predgen_node": [], TEXT_USER: []}


def flatten(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def yaml_parameters(node):
    tree = yaml.safe_load(default_params_file().read_text())
    return dict(flatten(node_section(tree, node)))


def node_module(node):
    return MODULES.get(node, f"predgen_ros.nodes.{node}")


def node_class(node):
    module = __import__(node_module(node), fromlist=["x"])
    return {
        "asr_node": module.__dict__.get("AsrNode"),
        "predgen_node": module.__dict__.get("PredgenNode"),
        "tts_node": module.__dict__.get("TtsNode"),
        TEXT_USER: module.__dict__.get("TextUserNode"),
    }[node]


@pytest.mark.parametrize("node", [*NODES, TEXT_USER])
def test_every_yaml_parameter_is_declared_by_its_node(node):
    """The real node, started in-process with the YAML, declares every name in its section."""
    rclpy.init(args=["--ros-args", "--params-file", str(default_params_file()), *NO_DEVICES[node]])
    try:
        instance = node_class(node)()
        try:
            for name in yaml_parameters(node):
                assert instance.has_parameter(name), f"{node}: {name} in config/predgen.yaml is not declared"
                descriptor = instance.describe_parameter(name)
                assert descriptor.description, f"{node}: {name} has no description"
        finally:
            instance.close()
            instance.destroy_node()
    finally:
        rclpy.try_shutdown()


def run_node(node, *ros_args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", node_module(node), "--ros-args", *ros_args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_startup_error(result, *needles):
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    for needle in needles:
        assert needle in errors[0], errors[0]


def test_a_misspelt_parameter_stops_the_node():
    assert_startup_error(run_node("tts_node", "-p", "tts.sink:=none", "-p", "tts.snk:=wav"), "unknown parameter tts.snk")


def test_a_parameter_of_the_wrong_type_stops_the_node_with_a_hint():
    out = run_node("tts_node", "-p", "tts.sink:=none", "-p", "tts.chunk_ms:=fast")
    assert_startup_error(out, "tts.chunk_ms: expected an integer like 20, got 'fast'")
    out = run_node(TEXT_USER, "-p", "text.gap_s:=2")
    assert_startup_error(out, "text.gap_s: expected a decimal number like 1.0, got 2 (write 2.0)")


def test_a_parameter_outside_its_range_stops_the_node():
    out = run_node("tts_node", "-p", "tts.sink:=none", "-p", "tts.first_words:=-1")
    assert_startup_error(out, "tts.first_words: -1 lies outside its range 0 to 64")


def test_missing_model_path(tmp_path):
    missing = tmp_path / "no-model"
    assert_startup_error(run_node("predgen_node", "-p", f"model.path:={missing}"), "model.path", str(missing))


def test_missing_voice_path(tmp_path):
    missing = tmp_path / "voice.onnx"
    assert_startup_error(
        run_node("tts_node", "-p", "tts.sink:=none", "-p", f"tts.voice_path:={missing}"), "tts.voice_path", str(missing)
    )


def test_missing_vosk_model(tmp_path):
    missing = tmp_path / "vosk-model"
    result = run_node("asr_node", "-p", "asr.backend:=vosk", "-p", f"asr.vosk.model_path:={missing}", "-p", "asr.input:=x.wav")
    assert_startup_error(result, "asr.vosk.model_path", str(missing))


def test_unknown_whisper_model():
    result = run_node("asr_node", "-p", "asr.whisper.model:=small", "-p", "asr.input:=x.wav")
    assert_startup_error(result, "asr.whisper.model", "'small'")


def test_a_record_folder_that_cannot_be_made_stops_the_node(tmp_path):
    (tmp_path / "file").write_text("")
    result = run_node("asr_node", "-p", f"asr.record_dir:={tmp_path / 'file' / 'heard'}", "-p", "asr.input:=x.wav")
    assert_startup_error(result, "asr.record_dir", "cannot make")


def test_missing_wav_input(tmp_path):
    missing = tmp_path / "speech.wav"
    assert_startup_error(run_node("asr_node", "-p", f"asr.input:={missing}"), "asr.input", str(missing))


def audio_devices(channels_key):
    """Devices with `channels_key` channels; none where the PortAudio library is missing."""
    try:
        import sounddevice
    except OSError:
        return []
    return [d for d in sounddevice.query_devices() if d[channels_key] > 0]


def test_microphone_without_capture_device():
    if audio_devices("max_input_channels"):
        pytest.skip("this machine has a capture device")
    assert_startup_error(run_node("asr_node", "-p", "asr.input:=microphone"), "asr.input", "no audio capture")


def test_speaker_without_output_device():
    if audio_devices("max_output_channels"):
        pytest.skip("this machine has an output device")
    assert_startup_error(run_node("tts_node", "-p", "tts.sink:=speaker"), "no audio output")


def test_unknown_asr_backend():
    assert_startup_error(run_node("asr_node", "-p", "asr.backend:=nemo"), "asr.backend", "nemo")


def test_a_bad_recognizer_fails_before_the_echo_canceller_loads():
    """livekit's native runtime once aborted a node at exit (code -6, not the error's 2): a
    node whose recognizer setting is wrong never loads it."""
    code = (
        "import sys; from predgen_ros.nodes import asr_node; "
        "rc = asr_node.main(['--ros-args', '-p', 'asr.backend:=nemo']); print('livekit' in sys.modules, rc)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["False", "2"], result.stderr[-2000:]


def write_user_speech(path, texts, gap_s):
    """`texts` spoken by the Piper voice, `gap_s` of silence after each, as a 16 kHz WAV;
    returns the true end of each utterance (its last loud sample), in seconds."""
    import wave

    import numpy as np

    synth = PiperSynthesizer(reproducible=True)  # the same audio every run: the words checked must not vary
    pcm, ends = b"\0" * 8000, []
    for text in texts:
        speech = synth.synthesize(text)
        voiced = np.flatnonzero(np.abs(np.frombuffer(to_pcm16k(speech.samples, speech.sample_rate), dtype=np.int16)) > 300)
        ends.append(len(pcm) / 32000 + (voiced[-1] + 1) / 16000)
        pcm += to_pcm16k(speech.samples, speech.sample_rate) + b"\0" * int(32000 * gap_s)
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(16000), f.writeframes(pcm)
    return ends


@pytest.fixture
def user_speech_wav(tmp_path):
    """Two questions spoken by the Piper voice, a second of silence after each, as 16 kHz WAV."""
    path = tmp_path / "user.wav"
    write_user_speech(path, ("What is the capital of France?", "Tell me a joke about robots."), gap_s=1.0)
    return path


class AsrNodeOnWav:
    """asr_node as a process playing `wav`, and an in-process rclpy node to talk to it."""

    def __init__(self, wav, name, *params):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "predgen_ros.nodes.asr_node", "--ros-args", "-p", f"asr.input:={wav}", *params],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        rclpy.init()
        self.probe = GraphProbe(name)
        self.node = self.probe.node
        self.output = ""

    def spin_while(self, condition, step=lambda: None, timeout=60.0):
        def done():
            step()
            return not condition() or self.proc.poll() is not None

        self.probe.wait_for(done, timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.node.destroy_node()
        rclpy.try_shutdown()
        self.proc.terminate()
        self.output = self.proc.communicate(timeout=20)[0]


def test_asr_node_streams_pocketsphinx_partials_and_finals(user_speech_wav):
    """asr_node over DDS: partials only on change and never empty, one final per utterance,
    and the same as one numbered turn stream."""
    partials, finals, ends, turns = [], [], [], []
    with AsrNodeOnWav(user_speech_wav, "test_listener", "-p", "asr.backend:=pocketsphinx") as asr:
        asr.node.create_subscription(String, "turn/events", lambda m: turns.append(turn_event_of(m)), TEXT_QOS)
        asr.node.create_subscription(String, "asr/partial", lambda m: partials.append(m.data), TEXT_QOS)
        asr.node.create_subscription(String, "asr/final", lambda m: finals.append((m.data, len(partials))), TEXT_QOS)
        asr.node.create_subscription(
            Header, "asr/speech_end", lambda m: ends.append(m.stamp.sec + m.stamp.nanosec * 1e-9), TEXT_QOS
        )
        asr.spin_while(lambda: len(finals) < 2 or len(ends) < 2)
    assert len(finals) == 2, asr.output[-2000:]
    assert len(ends) == 2 and ends[0] < ends[1] <= time.time()
    # the fixed endpoint ends each turn for good: opened, its words as the partials went, ended at its speech's end
    expected = [("opened", 1, "")] + [("text", 1, p) for p in partials[: finals[0][1]]] + [("ended", 1, finals[0][0])]
    expected += [("opened", 2, "")] + [("text", 2, p) for p in partials[finals[0][1] :]] + [("ended", 2, finals[1][0])]
    assert [(e.kind.value, e.utterance, e.text) for e in turns] == expected
    assert [e.stamp for e in turns if e.kind == "ended"] == pytest.approx(ends, abs=1e-6)
    assert all(p.strip() == p and p for p in partials)
    assert all(a != b for a, b in zip(partials, partials[1:])), "a partial repeated the previous one"
    assert "capital" in finals[0][0] and "robot" in finals[1][0], finals
    assert finals[0][1] >= 3, "several partials came before the first final"
    # asr.final_from_partial (default): the final is the last partial, the words PredGen already answered
    assert all(text == partials[seen - 1] for text, seen in finals), (finals, partials)


def test_asr_node_hears_the_requests_word_for_word_with_whisper(user_speech_wav, tmp_path):
    """The whisper backend in asr_node: partials grow towards the utterance, and each
    final is the request as spoken (its words; Whisper adds capitals and punctuation),
    saved with its audio to asr.record_dir."""
    from predgen_ros.eval.hearing.asr_quality import reference_words, word_errors

    partials, finals = [], []
    heard = tmp_path / "heard"
    with AsrNodeOnWav(user_speech_wav, "test_whisper", "-p", "asr.backend:=whisper", "-p", f"asr.record_dir:={heard}") as asr:
        asr.node.create_subscription(String, "asr/partial", lambda m: partials.append(m.data), TEXT_QOS)
        asr.node.create_subscription(String, "asr/final", lambda m: finals.append(m.data), TEXT_QOS)
        asr.node.create_subscription(String, "turn/events", lambda m: None, TEXT_QOS)  # asr_node waits for a listener
        asr.spin_while(lambda: len(finals) < 2)
    said = ["What is the capital of France?", "Tell me a joke about robots."]
    assert len(finals) == 2, asr.output[-2000:]
    for final, text in zip(finals, said):  # this voice's noise differs per run: a word may go astray
        assert word_errors(reference_words(text), reference_words(final)) <= 1, (final, text)
    first = partials[: partials.index(finals[0]) + 1]
    assert len(first) >= 2 and len(first[0].split()) < len(first[-1].split())
    saved = [json.loads(line) for line in (heard / "heard.jsonl").read_text().splitlines()]
    assert [line["final"] for line in saved] == finals
    assert all(len(read_wav(heard / line["file"])) == round(32000 * line["seconds"]) for line in saved)


def test_asr_node_is_deaf_while_the_robot_speaks(user_speech_wav):
    """With asr.mute_while_robot_speaks, audio heard while robot_speaking is true is dropped."""

    heard, states = [], []
    with AsrNodeOnWav(user_speech_wav, "test_robot") as asr:
        speaking = asr.node.create_publisher(Bool, "robot_speaking", TEXT_QOS)
        asr.node.create_subscription(String, "asr/partial", lambda m: heard.append(m.data), TEXT_QOS)
        asr.node.create_subscription(String, "asr/final", lambda m: heard.append(m.data), TEXT_QOS)
        asr.node.create_subscription(String, "turn/events", lambda m: None, TEXT_QOS)  # it starts once they are heard
        asr.node.create_subscription(
            DiagnosticArray,
            "/diagnostics",
            lambda m: states.extend(
                {kv.key: kv.value for kv in s.values}["state"] for s in m.status if s.name == "/predgen_ros/asr_node"
            ),
            10,
        )
        # the robot talks through the whole recording
        asr.spin_while(lambda: "input finished" not in states, step=lambda: speaking.publish(Bool(data=True)))
    assert "muted" in states and "input finished" in states, (states, asr.output[-2000:])
    assert heard == []


def test_the_speech_clock_runs_on_while_the_robot_speaks(tmp_path):
    """Muted audio still moves asr_node's stream time: after a robot reply between two
    utterances, the second asr/speech_end stamp is at the true end of the second one
    (measured from the first stamp, so asr_node's own start time cancels out)."""
    wav = tmp_path / "two.wav"
    true_ends = write_user_speech(wav, ("What is the capital of France?", "Tell me a joke about robots."), gap_s=6.0)
    finals, ends, states = [], [], []
    with AsrNodeOnWav(wav, "test_robot_reply") as asr:
        speaking = asr.node.create_publisher(Bool, "robot_speaking", TEXT_QOS)
        asr.node.create_subscription(String, "turn/events", lambda m: None, TEXT_QOS)  # asr_node starts once it is heard
        asr.node.create_subscription(String, "asr/final", lambda m: finals.append(m.data), TEXT_QOS)
        asr.node.create_subscription(
            Header, "asr/speech_end", lambda m: ends.append(m.stamp.sec + m.stamp.nanosec * 1e-9), TEXT_QOS
        )
        asr.node.create_subscription(
            DiagnosticArray,
            "/diagnostics",
            lambda m: states.extend(
                {kv.key: kv.value for kv in s.values}["state"] for s in m.status if s.name == "/predgen_ros/asr_node"
            ),
            10,
        )
        asr.spin_while(lambda: not finals)
        speaking.publish(Bool(data=True))  # the robot answers the first utterance for 2 s
        asr.spin_while(lambda: "muted" not in states)  # asr_node heard that it must not listen (a second or so muted)
        speaking.publish(Bool(data=False))  # before the second utterance, whatever this machine's speed
        asr.spin_while(lambda: len(finals) < 2 or len(ends) < 2)
    assert len(finals) == 2 and len(ends) == 2, (finals, asr.output[-2000:])
    assert "robot" in finals[1]
    error = (ends[1] - ends[0]) - (true_ends[1] - true_ends[0])
    print(
        f"second asr/speech_end {error:+.3f} s from the true end of speech (after {true_ends[1] - true_ends[0]:.2f} s, 2 s of it muted)"
    )
    assert abs(error) < 0.15, f"second end of speech off by {error:+.3f} s"
