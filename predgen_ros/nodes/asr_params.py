"""asr_node's parameters: their defaults and descriptions, and the ear they describe.

Every `asr.*` name is declared here once (`ASR_PARAMS`, with the turn owner's `turn.*`);
`ear_settings` turns a node's values into the hearing chain's settings (audio/ear.py).
"""

from __future__ import annotations

from ..audio.ear import EarSettings
from ..audio.echo.canceller import ECHO_CANCELLERS
from ..audio.echo.double_talk import ONSET_SHARE, ONSET_WINDOW_S, VOICE_OVER_NOISE_DB
from ..audio.pcm import AUDIO_CHUNK_MS
from ..audio.recognition.endpoint import POLICIES, EndpointConfig
from ..audio.recognition.recognizers import DEFAULT_RECOGNIZER, RECOGNIZERS
from ..audio.recognition.vad import VADS
from ..audio.recognition.whisper import COMPUTE_TYPES, DEVICES, WhisperSettings
from ..audio.recognition.whisper_models import EMBEDDED_MODELS
from ..turn_taking import TURN_PARAMS

ASR_PARAMS = {
    "asr.backend": (DEFAULT_RECOGNIZER, f"the recognizer: {' | '.join(RECOGNIZERS)}"),
    "asr.input": ("microphone", "audio backends: 'microphone' (PortAudio), 'topic' (audio/user) or a WAV file path"),
    "asr.device": ("", "capture device name or index for 'microphone'; empty = system default"),
    "asr.chunk_ms": (
        AUDIO_CHUNK_MS,
        "audio read from the microphone or WAV file per step (ms); the utterance ends within one chunk of the endpoint's silence",
    ),
    "asr.endpoint_silence_s": (
        EndpointConfig.silence_s,
        "policy fixed: trailing silence that ends an utterance; fused: the pause when one estimate says complete (s)",
    ),
    "asr.endpoint.policy": (
        EndpointConfig.policy,
        f"when an utterance ends: {' | '.join(POLICIES)} (docs/guide.md#end-of-turn-when-the-user-is-done)",
    ),
    "asr.endpoint.pause_s": (
        EndpointConfig.pause_s,
        "smart_turn, llm, fused: a pause this long asks whether the turn is complete (s)",
    ),
    "asr.endpoint.max_silence_s": (
        EndpointConfig.max_silence_s,
        "smart_turn, llm, fused: end after this much silence whatever the estimates (s)",
    ),
    "asr.endpoint.audio_threshold": (
        EndpointConfig.audio_threshold,
        "Smart Turn probability at or above which the turn is complete",
    ),
    "asr.endpoint.text_threshold": (
        EndpointConfig.text_threshold,
        "LLM end-of-message probability at or above which the turn is complete",
    ),
    "asr.final_from_partial": (
        True,
        "the final is the last partial, sent at the endpoint; false: the recognizer's closing re-decode (slower, rewrites the partial)",
    ),
    "asr.vad": ("webrtc", f"voice activity detector: {' | '.join(VADS)}"),
    "asr.vad_mode": (2, "webrtc VAD aggressiveness, 0 (loose) to 3 (strict)"),
    "asr.whisper.model": (
        WhisperSettings.model,
        f"the embedded Whisper model: {' | '.join(EMBEDDED_MODELS)} (used when asr.whisper.model_path is empty)",
    ),
    "asr.whisper.model_path": (
        "",
        "a CTranslate2 Whisper folder (small, distil, large-v3-turbo); wins over asr.whisper.model",
    ),
    "asr.whisper.device": (WhisperSettings.device, f"where Whisper runs: {' | '.join(DEVICES)}"),
    "asr.whisper.compute_type": (WhisperSettings.compute_type, f"Whisper's weights and arithmetic: {' | '.join(COMPUTE_TYPES)}"),
    "asr.whisper.threads": (
        WhisperSettings.threads,
        "Whisper's CPU threads (0: CTranslate2's default); the LLM keeps the others",
    ),
    "asr.whisper.beam": (WhisperSettings.beam, "Whisper's beam width (1: greedy, fastest)"),
    "asr.whisper.language": (WhisperSettings.language, "the language a multilingual Whisper model hears"),
    "asr.vosk.model_path": ("", "vosk model folder (e.g. vosk-model-small-en-us-0.15); needed for backend vosk"),
    "asr.mute_while_robot_speaks": (
        True,
        "ignore audio while robot_speaking is true (no echo of the robot's voice); "
        "only while no tts/reference reaches the echo canceller",
    ),
    "asr.echo_cancel": (
        "webrtc",
        f"{' | '.join(ECHO_CANCELLERS)}: take the robot's voice (tts/reference) out of the microphone's audio and listen "
        "while it speaks, so the user can interrupt it (audio/echo/canceller.py; docs/results/echo.md); none: the mute decides",
    ),
    "asr.echo.onset_window_s": (
        ONSET_WINDOW_S,
        "while the robot's echo may be at the microphone, a voice opens an utterance once this window of it is "
        "mostly voiced (audio/echo/double_talk.py)",
    ),
    "asr.echo.onset_share": (ONSET_SHARE, "the share of that window's voice-detector frames that must be voiced, (0, 1]"),
    "asr.echo.voice_over_noise_db": (
        VOICE_OVER_NOISE_DB,
        "and only frames this far above the room's noise (learned while the robot is silent) count as voice (dB)",
    ),
    "asr.record_dir": (
        "",
        "save each utterance as the recognizer read it (after the echo canceller) to NNNN.wav here, with its final "
        "in heard.jsonl, to listen to what the robot heard, and with the echo canceller its two inputs to "
        "canceller-inputs.wav (audio/heard_audio.py); empty = off",
    ),
    **TURN_PARAMS,
}


def ear_settings(p: dict) -> EarSettings:
    """The hearing chain's settings from asr_node's parameter values `p`."""
    whisper = {name: p[f"asr.whisper.{name}"] for name in WHISPER_FIELDS}
    endpoint = {name: p[f"asr.endpoint.{name}"] for name in ENDPOINT_FIELDS}
    return EarSettings(
        recognizer=p["asr.backend"],
        vosk_model_path=p["asr.vosk.model_path"],
        whisper=WhisperSettings(**whisper),
        echo_cancel=p["asr.echo_cancel"],
        vad=p["asr.vad"],
        vad_mode=p["asr.vad_mode"],
        onset_window_s=p["asr.echo.onset_window_s"],
        onset_share=p["asr.echo.onset_share"],
        voice_over_noise_db=p["asr.echo.voice_over_noise_db"],
        final_from_partial=p["asr.final_from_partial"],
        endpoint=EndpointConfig(silence_s=p["asr.endpoint_silence_s"], **endpoint),
    )


# the fields named asr.whisper.<field> and asr.endpoint.<field>
WHISPER_FIELDS = ("model", "model_path", "device", "compute_type", "threads", "beam", "language")
ENDPOINT_FIELDS = ("policy", "pause_s", "max_silence_s", "audio_threshold", "text_threshold")
