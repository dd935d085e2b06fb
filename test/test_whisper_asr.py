"""The Whisper recognizer (embedded tiny.en) streaming on real Piper speech."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from predgen_ros.audio.heard_audio import HeardAudio
from predgen_ros.audio.pcm import AsrError, chunks, read_wav, to_pcm16k
from predgen_ros.audio.recognition.asr import StreamingAsr
from predgen_ros.audio.recognition.recognizers import make_recognizer
from predgen_ros.audio.recognition.whisper import WhisperSettings, WhisperTranscriber, without_doubling, without_loops
from predgen_ros.audio.recognition.whisper_stream import WhisperStreamingRecognizer, agreed_prefix
from predgen_ros.audio.speech.tts import PiperSynthesizer
from predgen_ros.eval.barge_in.interruption_bag import burst
from predgen_ros.eval.hearing.asr_quality import reference_words

pytestmark = pytest.mark.e2e

SILENCE_1S = b"\0" * 32000


@pytest.fixture(scope="module")
def synth():
    return PiperSynthesizer(reproducible=True)


@pytest.fixture(scope="module")
def transcriber():
    return WhisperTranscriber()


def spoken(synth, text: str) -> bytes:
    speech = synth.synthesize(text)
    return to_pcm16k(speech.samples, speech.sample_rate)


def stream(asr: StreamingAsr, pcm: bytes, wait_for_each_step: bool = True):
    """Feed `pcm` in 20 ms chunks.  `wait_for_each_step`: let the recognizer finish what it
    is doing before the next chunk (as if the CPU were fast), so the run is reproducible."""
    events = []
    for chunk in chunks(pcm, 0.02):
        events += asr.feed(chunk)
        if wait_for_each_step:
            asr.recognizer.idle(timeout=30)
    events += asr.finish_stream(timeout=60)
    asr.close()
    return events


def test_partials_grow_and_the_final_is_the_spoken_request(synth, transcriber):
    text = "Can you bring me the red cup from the kitchen?"
    asr = StreamingAsr(WhisperStreamingRecognizer(transcriber), endpoint_silence=0.5)
    events = stream(asr, SILENCE_1S + spoken(synth, text) + SILENCE_1S)
    partials = [e.text for e in events if e.kind == "partial"]
    finals = [e for e in events if e.kind == "final"]
    assert len(finals) == 1 and reference_words(finals[0].text) == reference_words(text)
    assert len(partials) >= 3 and len(partials[-1].split()) > len(partials[0].split())
    assert partials[-1] == finals[0].text  # the voice's end published the final's words first


def test_the_offline_endpoint_tool_hears_through_whisper_and_estimates_each_partial(synth, transcriber):
    """`predgen-ros endpoints --asr-backend whisper`: the recognizer is waited for after each
    chunk, every partial gets its text estimate, and the final is the question."""
    from predgen_ros.eval.hearing.endpoints import hear

    text = "How many legs does a spider have?"
    audio = [(0.0, chunk) for chunk in chunks(SILENCE_1S + spoken(synth, text) + SILENCE_1S, 0.02)]
    asr = StreamingAsr(WhisperStreamingRecognizer(transcriber), endpoint_silence=0.5)
    estimated = []
    run = hear("fixed_0.5", asr, audio, text_estimate=lambda heard: estimated.append(heard) or 0.5)
    assert len(run.finals) == 1 and reference_words(run.finals[0].text) == reference_words(text)
    assert run.partials and estimated == [p.text for p in run.partials]
    assert run.partials[-1].text == run.finals[0].text


def test_silence_and_a_cough_give_no_words(synth, transcriber):
    cough = burst("cough", np.random.default_rng(0)).tobytes()
    asr = StreamingAsr(WhisperStreamingRecognizer(transcriber), endpoint_silence=0.5)
    events = stream(asr, SILENCE_1S * 2 + cough + SILENCE_1S + cough + SILENCE_1S * 2)
    assert events == []
    assert transcriber.transcribe(SILENCE_1S * 3).text == ""


def test_an_utterance_over_30_s_keeps_every_word(synth, transcriber):
    sentences = [
        "The robot drove into the kitchen and looked for the red cup on the table.",
        "Then it picked up the cup, turned around slowly and carried it to the living room.",
        "There it waited for the children, who were playing a loud game in the garden.",
        "When they came back in, it offered them some water and a plate of apples.",
        "Afterwards it cleaned the floor, charged its battery and told everybody a short story.",
        "The story was about a small boat that sailed across the ocean to find a lost island.",
        "On the island there lived a friendly dragon who loved music and baked bread every morning.",
        "At the end everybody laughed, said good night and went upstairs to sleep.",
    ]
    pause = b"\0" * (2 * 16000 * 3 // 10)  # 0.3 s between sentences: one utterance
    pcm = pause.join(spoken(synth, s) for s in sentences)
    assert len(pcm) / 32000 > 30
    asr = StreamingAsr(WhisperStreamingRecognizer(transcriber), endpoint_silence=1.2)  # Piper ends sentences with silence
    finals = [e.text for e in stream(asr, SILENCE_1S + pcm + SILENCE_1S * 2) if e.kind == "final"]
    assert len(finals) == 1
    said, heard = reference_words(" ".join(sentences)), reference_words(finals[0])
    missing = [w for w in set(said) if w not in heard]
    assert len(heard) >= 0.95 * len(said) and len(missing) <= 3, (missing, finals[0])


class SlowTranscriber:
    """The real transcriber, held back until the test lets each call go."""

    def __init__(self, transcriber):
        self.transcriber = transcriber
        self.release = threading.Event()
        self.audio_seconds = []

    def transcribe(self, pcm: bytes, prompt: str = ""):
        self.release.wait()
        self.audio_seconds.append(len(pcm) / 32000)
        return self.transcriber.transcribe(pcm, prompt)


def test_a_stalled_recognizer_neither_delays_the_endpoint_nor_loses_audio(synth, transcriber):
    """The recognizer is stalled for the whole utterance: the voice detector and the
    endpoint still decide on every chunk, and once it runs, the final has every word."""
    text = "What is the capital of France?"
    speech = spoken(synth, text)
    slow = SlowTranscriber(transcriber)
    asr = StreamingAsr(WhisperStreamingRecognizer(slow), endpoint_silence=0.5)
    closed_at, voice = None, []
    for chunk in chunks(SILENCE_1S + speech + SILENCE_1S, 0.02):
        assert asr.feed(chunk) == []  # nothing transcribed yet: no partial, no final
        voice += asr.voice_changes()
        if closed_at is None and voice and not asr.in_utterance:
            closed_at = asr.stream_time
    speech_end = [t for what, t in voice if what == "end"][-1]
    assert closed_at is not None and 0.5 <= closed_at - speech_end <= 0.5 + 0.02 + 1e-6
    slow.release.set()
    finals = [e for e in asr.finish_stream(timeout=60) if e.kind == "final"]
    asr.close()
    assert [reference_words(f.text) for f in finals] == [reference_words(text)]
    assert finals[0].t_speech_end == pytest.approx(speech_end)
    assert max(slow.audio_seconds) >= len(speech) / 32000  # the whole utterance reached Whisper


class StallingTranscriber:
    """The real transcriber, each call made at least `stall_s` long (a busy CPU)."""

    def __init__(self, transcriber, stall_s: float):
        self.transcriber, self.stall_s = transcriber, stall_s

    def transcribe(self, pcm: bytes, prompt: str = ""):
        threading.Event().wait(self.stall_s)
        return self.transcriber.transcribe(pcm, prompt)


def test_a_long_stall_widens_the_cadence(transcriber, synth):
    """Calls of at least 0.5 s: the next partial waits for twice that much new audio (1 s),
    not the 0.3 s step, so the recognizer falls no further behind."""
    recognizer = WhisperStreamingRecognizer(StallingTranscriber(transcriber, 0.5), step_s=0.3)
    recognizer.start()
    recognizer.accept(spoken(synth, "Please open the door."))
    assert recognizer.idle(timeout=60)
    assert min(recognizer.calls) >= 0.5
    assert recognizer.cadence_s >= 1.0
    recognizer.stop()


def test_a_missing_or_wrong_model_folder_is_named(tmp_path):
    with pytest.raises(AsrError, match=r"asr.whisper.model_path: no such folder: .*nowhere"):
        make_recognizer("whisper", whisper=WhisperSettings(model_path=str(tmp_path / "nowhere")))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(AsrError, match=r"not a CTranslate2 Whisper folder \(missing model.bin, tokenizer.json\)"):
        make_recognizer("whisper", whisper=WhisperSettings(model_path=str(tmp_path)))
    with pytest.raises(AsrError, match="asr.whisper.beam must lie in 1..10"):
        WhisperSettings(beam=0)
    with pytest.raises(AsrError, match=r"asr.whisper.model: unknown model 'small' \(choose one of tiny.en, base"):
        WhisperSettings(model="small")


def test_the_embedded_base_model_is_joined_once_and_hears(tmp_path, monkeypatch, synth):
    monkeypatch.setenv("PREDGEN_ROS_CACHE", str(tmp_path))
    base = WhisperTranscriber(WhisperSettings(model="base"))
    joined = tmp_path / "whisper-base" / "model.bin"
    assert base.path == joined.parent and base._model.is_multilingual
    first_join = joined.stat().st_mtime_ns
    assert WhisperTranscriber(WhisperSettings(model="base")).path == joined.parent
    assert joined.stat().st_mtime_ns == first_join  # loaded, not joined again
    text = base.transcribe(spoken(synth, "Please open the door.")).text
    assert reference_words(text) == ["please", "open", "the", "door"]


def test_loops_are_kept_once_and_agreement_is_the_common_prefix():
    assert without_loops("Thank you. Thank you. Thank you. Thank you.") == "Thank you."
    assert without_loops("go go go now") == "go now"
    assert without_loops("a very very good idea") == "a very very good idea"  # twice is speech
    assert without_doubling("Where did I leave my keys? Where did I leave") == "Where did I leave my keys?"
    assert without_doubling("Thanks, is it going to rain? Thanks, is it going to rain?") == "Thanks, is it going to rain?"
    assert without_doubling("Stop. Stop.") == "Stop. Stop."  # too short to call a doubling
    assert without_doubling("Where is it? Where is the key?") == "Where is it? Where is the key?"
    assert agreed_prefix("What is the capitol", "What is the capital of France?") == "What is the"
    assert agreed_prefix("", "Hello") == ""


class FailingOnce:
    """The real transcriber, whose first call fails as CTranslate2 would."""

    def __init__(self, transcriber):
        self.transcriber = transcriber
        self.failed = False

    def transcribe(self, pcm: bytes, prompt: str = ""):
        if not self.failed:
            self.failed = True
            raise RuntimeError("out of memory")
        return self.transcriber.transcribe(pcm, prompt)


def test_a_failed_transcription_loses_no_final(synth, transcriber):
    text = "Please open the door."
    recognizer = WhisperStreamingRecognizer(FailingOnce(transcriber))
    events = stream(StreamingAsr(recognizer, endpoint_silence=0.5), SILENCE_1S + spoken(synth, text) + SILENCE_1S)
    assert recognizer.failures == 1
    assert [reference_words(e.text) for e in events if e.kind == "final"] == [reference_words(text)]


def test_each_utterance_is_saved_as_the_recognizer_read_it(tmp_path, synth, transcriber):
    """asr.record_dir: a cough (no word) and a question, each a WAV with its final."""
    cough = burst("cough", np.random.default_rng(0)).tobytes()
    text = "How many legs does a spider have?"
    heard = HeardAudio(tmp_path / "heard")
    asr = StreamingAsr(WhisperStreamingRecognizer(transcriber), endpoint_silence=0.5, on_utterance=heard.utterance)
    events = stream(asr, SILENCE_1S + cough + SILENCE_1S + spoken(synth, text) + SILENCE_1S)
    lines = [json.loads(line) for line in (tmp_path / "heard" / "heard.jsonl").read_text().splitlines()]
    assert [line["final"] for line in lines] == ["", events[-1].text]
    assert reference_words(events[-1].text) == reference_words(text)
    for line in lines:
        assert len(read_wav(tmp_path / "heard" / line["file"])) / 32000 == pytest.approx(line["seconds"])
    question = read_wav(tmp_path / "heard" / lines[1]["file"])
    assert reference_words(transcriber.transcribe(question).text) == reference_words(text)  # what it read is what it heard
    assert lines[1]["speech_end"] == pytest.approx(events[-1].t_speech_end, abs=1e-3)


def test_a_record_folder_that_cannot_be_made_is_named(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(AsrError, match=r"^asr.record_dir: cannot make .*file/heard: "):
        HeardAudio(tmp_path / "file" / "heard")


def test_a_voice_back_before_the_eager_final_is_transcribed_continues_it(synth, transcriber):
    """The audio comes faster than Whisper transcribes (no waiting between chunks): the voice
    comes back while the eager final of "What is the capital" is still being transcribed.
    asr_node waits for that final, publishes it, then "resumed", and the words after it extend
    it (before, the voice was a new utterance and the question was split in two turns).
    Whisper hears the continuation after the early final's audio."""
    from test_turn_models import contract, published

    from predgen_ros.audio.recognition.endpoint import EndpointConfig, Endpointer

    config = EndpointConfig(policy="smart_turn", pause_s=0.15, max_silence_s=1.0)
    asr = StreamingAsr(WhisperStreamingRecognizer(transcriber), endpointer=Endpointer(config, lambda: 1.0))
    pause = SILENCE_1S[: 2 * 16000 * 6 // 10]
    out = published(asr, SILENCE_1S + spoken(synth, "What is the capital") + pause + spoken(synth, "of France?") + SILENCE_1S * 2)
    asr.close()
    pairs, _ = contract(out)
    assert [kind for _, kind in pairs] == ["resumed", "confirmed"], out
    first, whole = pairs[0][0], pairs[1][0]
    # heard after the early final's audio (alone, "of France?" is "A friend?" to Whisper tiny.en)
    assert whole.startswith(first + " ") and "france" in reference_words(whole), out


def test_a_cough_after_an_eager_final_resumes_then_confirms_it(synth, transcriber):
    """The voice comes back after an eager final but makes no word (a cough; Whisper writes
    "."): asr_node says "resumed", then "confirmed" once that voice's utterance closed
    wordless, and no second final: the reply held at "resumed" goes on."""
    from predgen_ros.audio.recognition.asr_events import AsrEvent, in_order
    from predgen_ros.audio.recognition.endpoint import EndpointConfig, Endpointer

    config = EndpointConfig(policy="smart_turn", pause_s=0.15, max_silence_s=1.0)
    asr = StreamingAsr(WhisperStreamingRecognizer(transcriber), endpointer=Endpointer(config, lambda: 1.0))
    cough = burst("cough", np.random.default_rng(0)).astype(np.int16).tobytes()
    out = []
    for chunk in chunks(
        SILENCE_1S + spoken(synth, "What is the capital of France?") + SILENCE_1S[:12800] + cough + SILENCE_1S * 2, 0.02
    ):
        out += in_order(asr.feed(chunk), asr.voice_changes())
        asr.recognizer.idle(timeout=30)
    out += in_order(asr.finish_stream(timeout=60), asr.voice_changes())
    asr.close()
    finals = [item.text for item in out if isinstance(item, AsrEvent) and item.kind == "final"]
    contract = [item[0] for item in out if not isinstance(item, AsrEvent) and item[0] in ("resumed", "confirmed")]
    assert len(finals) == 1 and "france" in reference_words(finals[0]), out
    assert contract == ["resumed", "confirmed"], out
