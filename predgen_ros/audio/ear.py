"""The ear, built in one place: from its settings to the chain that turns microphone
chunks into words and voice events.

The chain: the echo front-end (echo/canceller.py; optional), whose EchoedChunk per chunk
is all the rest reads of it; the voice detector (guarded against the robot's echo while
the canceller runs: echo/double_talk.py); the streaming recognizer (recognition/asr.py
over the recognizer the registry names: recognition/recognizers.py) and the endpoint rule
(recognition/endpoint.py; Smart Turn loaded only when the rule asks for it).  asr_node
hears through it, and the offline tools that replay the node's hearing build the same
chain here, so what they measure is what the node hears."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .echo.canceller import ECHO_CANCELLERS, EchoCanceller
from .echo.double_talk import ONSET_SHARE, ONSET_WINDOW_S, TAIL_BELOW_PEAK_DB, VOICE_OVER_NOISE_DB, EchoGuardedVad
from .pcm import AsrError
from .recognition.asr import StreamingAsr
from .recognition.asr_events import AsrEvent, BackgroundRecognizer
from .recognition.endpoint import EndpointConfig, Endpointer
from .recognition.recognizers import DEFAULT_RECOGNIZER, RECOGNIZERS, make_recognizer
from .recognition.vad import make_vad
from .recognition.whisper import WhisperSettings


@dataclass(frozen=True)
class EarSettings:
    """asr_node's `asr.*` hearing parameters, by the same names."""

    recognizer: str = DEFAULT_RECOGNIZER  # asr.backend
    vosk_model_path: str = ""
    whisper: WhisperSettings = field(default_factory=WhisperSettings)
    echo_cancel: str = "webrtc"  # webrtc | none
    vad: str = "webrtc"
    vad_mode: int = 2
    onset_window_s: float = ONSET_WINDOW_S  # the guarded detector's (asr.echo.*)
    onset_share: float = ONSET_SHARE
    voice_over_noise_db: float = VOICE_OVER_NOISE_DB
    tail_below_peak_db: float | None = TAIL_BELOW_PEAK_DB  # the room's tail rule (no node parameter); None: off
    final_from_partial: bool = True
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)

    def __post_init__(self):
        if self.recognizer == "text":
            raise AsrError(
                "asr.backend: text is no recognizer: bringup and the launch file start the text_user node in asr_node's place"
            )
        if self.recognizer not in RECOGNIZERS:
            raise AsrError(f"asr.backend: unknown backend {self.recognizer!r} (choose one of {', '.join(RECOGNIZERS)})")
        if self.echo_cancel not in ECHO_CANCELLERS:
            raise AsrError(
                f"asr.echo_cancel: unknown canceller {self.echo_cancel!r} (choose one of {', '.join(ECHO_CANCELLERS)})"
            )


class Ear:
    """One built chain: each captured chunk through the echo front-end (when it runs), whose
    EchoedChunk the voice detector and the recognizer read, into `asr`."""

    def __init__(self, asr: StreamingAsr, echo: EchoCanceller | None = None, guarded_vad: EchoGuardedVad | None = None):
        self.asr = asr
        self.echo = echo
        self.guarded_vad = guarded_vad
        self.over_echo = False  # the last chunk may hold the robot's voice

    def _front_end(self, pcm: bytes, captured_s: float) -> bytes:
        """The chunk captured at `captured_s` (the reference's clock) as the recognizer reads
        it: less the robot's voice, the guarded detector given its own copy."""
        if self.echo is None:
            return pcm
        chunk = self.echo.process(pcm, captured_s)
        self.guarded_vad.take(chunk, utterance_open=self.asr.in_utterance)
        self.over_echo = chunk.echo_present
        return chunk.audio

    def feed(self, pcm: bytes, captured_s: float = 0.0) -> list[AsrEvent]:
        """Hear one microphone chunk: the recognizer's events."""
        return self.asr.feed(self._front_end(pcm, captured_s), over_echo=self.over_echo)

    def skip(self, pcm: bytes, captured_s: float = 0.0) -> list[AsrEvent]:
        """One chunk not listened to (the microphone muted while the robot speaks): the
        canceller still hears it, the recognizer only counts its time."""
        events = self.asr.skip(self._front_end(pcm, captured_s))
        if self.guarded_vad is not None:
            self.guarded_vad.forget()  # the recognizer dropped what it held: so does the detector
        return events

    def voice_began(self, t: float) -> float:
        """When an utterance opened at stream time `t` began: over the echo, where the
        detector first heard its voice (it is counted late there)."""
        if not self.over_echo:
            return t
        return min(t, self.asr.stream_time - self.guarded_vad.voice_run_s)

    def close(self) -> None:
        self.asr.close()

    def echo_figures(self) -> dict:
        """The canceller's and the guarded detector's counters (asr_node's diagnostics)."""
        echo, guarded = self.echo, self.guarded_vad
        if echo is None:
            return {}
        return {
            "echo_learning": echo.learning,  # the first seconds of the robot's voice: no voice is heard over it
            "echo_reference_late_chunks": echo.reference.late_chunks,
            "echo_reference_late_s": round(echo.reference.late_s, 3),
            "echo_voice_frames_held": guarded.held_frames,
            "echo_suppressed_frames": guarded.suppressed_frames,
            "echo_faint_frames": guarded.faint_frames,
            "voice_tail_frames": guarded.tail_frames,
            "echo_leak_frames_silenced": echo.leaks.silenced_frames,
            "echo_microphone_clock_jumps": echo.clock.jumps,
        }

    def recognizer_load(self) -> dict:
        """A background recognizer's lag (audio in -> its words out) and call cost, p50/p90 (s)."""
        recognizer = self.asr.recognizer
        if not isinstance(recognizer, BackgroundRecognizer) or not recognizer.lags:
            return {}
        lags, calls = list(recognizer.lags), list(recognizer.calls)
        pick = lambda values, q: round(float(np.quantile(values, q)), 3)  # noqa: E731
        return {
            "recognizer_lag_p50_s": pick(lags, 0.5),
            "recognizer_lag_p90_s": pick(lags, 0.9),
            "recognizer_call_p90_s": pick(calls, 0.9),
            "recognizer_failures": recognizer.failures,
        }


def build_ear(
    settings: EarSettings,
    recognizer=None,
    on_utterance: Callable[[bytes, str, float], None] | None = None,
) -> Ear:
    """The chain `settings` describe; `recognizer` replaces the one they name (a replay
    that needs no words).  AsrError, EndpointError or ValueError name a bad setting."""
    recognizer = recognizer or make_recognizer(settings.recognizer, settings.vosk_model_path, settings.whisper)
    # the canceller only once the recognizer is known good: its native runtime (livekit's) can
    # abort the process at exit instead of the one-line error's exit code 2
    echo = EchoCanceller() if settings.echo_cancel == "webrtc" else None
    vad, guarded = make_vad(settings.vad, settings.vad_mode), None
    if echo is not None:
        vad = guarded = EchoGuardedVad(
            vad, settings.onset_window_s, settings.onset_share, settings.voice_over_noise_db, settings.tail_below_peak_db
        )
    asr = StreamingAsr(recognizer, redecode_final=not settings.final_from_partial, vad=vad, on_utterance=on_utterance)
    asr.endpointer = _endpointer(settings.endpoint, asr)
    return Ear(asr, echo, guarded)


def _endpointer(config: EndpointConfig, asr: StreamingAsr) -> Endpointer:
    if not config.uses_audio:
        return Endpointer(config)
    from .recognition.turn_models import SmartTurn

    smart_turn = SmartTurn()
    return Endpointer(config, lambda: smart_turn.probability(asr.utterance_audio))
