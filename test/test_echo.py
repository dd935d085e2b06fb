"""The echo canceller's reference time line (no audio device, no ROS)."""

from __future__ import annotations

import numpy as np
import pytest

from predgen_ros.audio.echo.canceller import EchoedChunk, ReferenceTimeline
from predgen_ros.audio.echo.double_talk import EchoGuardedVad
from predgen_ros.audio.pcm import SAMPLE_RATE


def tone(n: int, value: int) -> bytes:
    return np.full(n, value, dtype=np.int16).tobytes()


def test_the_reference_is_read_by_play_time_and_silence_where_nothing_played():
    line = ReferenceTimeline()
    line.played(10.0, tone(160, 7))  # 10 ms from t = 10 s
    line.played(10.06, tone(160, 9))  # a 50 ms gap, then more
    got = line.read(9.99, 1280)
    assert (got[:160] == 0).all()  # before anything played
    assert (got[160:320] == 7).all()
    assert (got[320:1120] == 0).all()  # the gap (a lost chunk reads as silence)
    assert (got[1120:1280] == 9).all()


def test_chunks_stamped_a_little_off_play_back_to_back():
    line = ReferenceTimeline()
    line.played(1.0, tone(800, 5))  # 50 ms
    line.played(1.054, tone(800, 6))  # its stamp 4 ms late: it still follows at 1.05
    got = line.read(1.0, 1600)
    assert (got[:800] == 5).all() and (got[800:] == 6).all()


def test_a_chunk_older_than_what_the_microphone_has_read_is_late_and_dropped():
    line = ReferenceTimeline()
    line.played(1.0, tone(160, 1))
    line.read(1.0, 3200)  # the microphone is at 1.2 s
    line.played(1.05, tone(160, 500))
    assert line.late_chunks == 1
    line.played(1.19, tone(320, 300))  # reaches past 1.2 s: kept
    assert line.late_chunks == 1
    assert line.late_s == pytest.approx(0.01 + 0.01)  # the whole late chunk, the first 10 ms of the other


def test_a_resent_chunk_overwrites_and_old_history_is_forgotten():
    line = ReferenceTimeline()
    line.played(0.0, tone(160, 2))
    line.played(0.0, tone(160, 2))
    assert (line.read(0.0, 160) == 2).all()  # not doubled
    line.played(20.0, tone(160, 4))
    assert (line.read(20.0, 160) == 4).all()
    assert line.start_s >= 20.0 - 5.0 - 1 / SAMPLE_RATE  # only HISTORY_S kept before the microphone


def test_the_loudspeaker_sounds_until_its_last_loud_chunk_and_a_tail_after_it():
    line = ReferenceTimeline()
    assert not line.sounding(0.0, 0.5)  # nothing played yet
    line.played(1.0, tone(1600, 3000))  # 0.1 s of sound
    line.played(1.1, tone(1600, 10))  # then silence (quieter than SILENCE_PEAK)
    assert line.sounding(1.05, 0.5)
    assert line.sounding(1.55, 0.5)  # the room's tail
    assert not line.sounding(1.65, 0.5)


class Scripted:
    """A voice detector that answers from a list, one frame at a time."""

    frame_bytes = 960  # 30 ms, like WebRTC's
    voice_run_s = 0.0  # it counts every voice at once

    def __init__(self, answers):
        self.answers = iter(answers)

    def is_speech(self, frame) -> bool:
        return next(self.answers)


ROOM_NOISE = np.full(480, 40, dtype=np.int16).tobytes()  # a 30 ms frame at the room's noise level (about -58 dBFS)


def tell(vad, echo_present=False, utterance_open=False, for_voice=b""):
    """The chunk's EchoedChunk, as the ear gives it to the guarded detector."""
    vad.take(EchoedChunk(for_voice, for_voice, echo_present, False), utterance_open)


def run(vad, n, echo_present, utterance_open=False):
    tell(vad, echo_present, utterance_open)
    return [vad.is_speech(ROOM_NOISE) for _ in range(n)]


def test_over_the_echo_only_sustained_voice_counts():
    # 0.3 s window of 30 ms frames = 10 frames, 60 % = 6 voiced
    residue = [True, False, False, True, False, False, False, True, False, False] * 2
    guarded = EchoGuardedVad(Scripted(residue), window_s=0.3, share=0.6)
    assert run(guarded, 20, echo_present=True) == [False] * 20  # the echo's scattered frames: no voice
    assert guarded.held_frames == 6

    speech = [True] * 10
    guarded = EchoGuardedVad(Scripted(speech), window_s=0.3, share=0.6)
    assert run(guarded, 10, echo_present=True) == [False] * 5 + [True] * 5  # voice from its 6th frame on

    guarded = EchoGuardedVad(Scripted(residue), window_s=0.3, share=0.6)
    assert run(guarded, 20, echo_present=False) == residue  # no echo: the detector as it is


def test_once_an_utterance_is_open_the_users_voice_over_the_echo_counts_frame_by_frame():
    """The onset rule guards the opening; inside an utterance, the frames it would hold
    are the user's words (AEC3 takes some of them out), and holding them as silence once
    ended a question at its second word."""
    residue = [True, False, False, True, False, False, False, True, False, False]
    guarded = EchoGuardedVad(Scripted(residue), window_s=0.3, share=0.6)
    assert run(guarded, 10, echo_present=True, utterance_open=True) == residue


def test_the_voice_run_says_how_long_ago_the_detector_first_heard_a_voice():
    answers = [False] * 4 + [True, True, False, False, False, True, True, True] + [False] * 8
    guarded = EchoGuardedVad(Scripted(answers), window_s=0.3, share=0.6)
    tell(guarded, echo_present=True)
    runs = []
    for _ in answers:
        guarded.is_speech(ROOM_NOISE)
        runs.append(round(guarded.voice_run_s, 2))
    assert runs[3] == 0.0 and runs[4] == 0.03  # the first voiced frame
    assert runs[11] == 0.24  # a gap of 0.09 s is inside one run: 8 frames since it began
    assert runs[14] == 0.33 and runs[19] == 0.0  # it lasts RUN_GAP_S after the last voiced frame, then ends


def test_the_cancellers_digital_silence_never_reaches_the_voice_detector():
    """The suppressor's zeros would teach the detector a noise floor far below the room's,
    whose noise it then took for voice whenever the robot paused."""
    answers = [True] * 10
    guarded = EchoGuardedVad(Scripted(answers), window_s=0.3, share=0.6)
    tell(guarded, echo_present=True)
    assert [guarded.is_speech(b"\0" * guarded.frame_bytes) for _ in range(10)] == [False] * 10
    assert guarded.suppressed_frames == 10 and guarded.held_frames == 0
    assert run(guarded, 10, echo_present=True) == [False] * 5 + [True] * 5  # the detector's answers were all kept for sound


def test_the_voice_detector_judges_its_own_copy_with_the_leaks_silenced():
    """The recognizer's audio keeps the user's words; the detector's copy of the same
    samples has the canceller's leaks silenced, and is what it judges."""
    guarded = EchoGuardedVad(Scripted([True] * 4), window_s=0.3, share=0.6)
    loud = np.full(guarded.frame_bytes // 2, 3000, dtype=np.int16).tobytes()
    tell(guarded, for_voice=b"\0" * guarded.frame_bytes + loud)  # the first frame was a leak
    assert [guarded.is_speech(loud), guarded.is_speech(loud)] == [False, True]
    assert guarded.suppressed_frames == 1
    tell(guarded, for_voice=b"\0" * guarded.frame_bytes)
    guarded.forget()  # skipped by the recognizer: never judged
    assert guarded.is_speech(loud)  # judged as given, nothing heard for it


class Counting(Scripted):
    """Says voice on every frame, and counts the frames it was shown."""

    def __init__(self):
        self.shown = 0

    def is_speech(self, frame) -> bool:
        self.shown += 1
        return True


def test_over_the_echo_a_voice_near_the_rooms_noise_is_no_voice():
    """WebRTC's detector judges a spectrum, not a level: the canceller's residue at the
    room's noise level looked like voice to it.  A user's voice is far above that noise."""
    detector = Counting()
    guarded = EchoGuardedVad(detector, window_s=0.3, share=0.6, voice_over_noise_db=10.0)
    assert run(guarded, 5, echo_present=False) == [True] * 5  # no echo: the noise is learned, the detector as it is
    faint = (np.frombuffer(ROOM_NOISE, dtype=np.int16) * 3).tobytes()  # 9.5 dB above the noise
    tell(guarded, echo_present=True)
    assert [guarded.is_speech(faint) for _ in range(10)] == [False] * 10
    assert guarded.faint_frames == 10 and detector.shown == 15  # still shown: the detector adapts to what it hears
    loud = (np.frombuffer(ROOM_NOISE, dtype=np.int16) * 4).tobytes()  # 12 dB above
    assert [guarded.is_speech(loud) for _ in range(6)] == [False] * 5 + [True]  # a voice, once sustained


def test_the_noise_is_learned_from_the_quietest_frames_and_climbs_slowly():
    guarded = EchoGuardedVad(Counting(), window_s=0.03, share=1.0, voice_over_noise_db=10.0)
    run(guarded, 1, echo_present=False)
    loud = (np.frombuffer(ROOM_NOISE, dtype=np.int16) * 4).tobytes()
    tell(guarded, echo_present=False)
    for _ in range(20):  # 0.6 s of the user speaking with the robot silent: the estimate climbs 0.6 dB
        guarded.is_speech(loud)
    tell(guarded, echo_present=True)
    assert guarded.is_speech(loud)  # still 11 dB above what the noise is taken for


def scaled(factor: int) -> bytes:
    """A frame `factor` times the room's noise in amplitude (20·log10(factor) dB above it)."""
    return (np.frombuffer(ROOM_NOISE, dtype=np.int16) * factor).tobytes()


def test_an_open_utterances_frames_near_the_noise_and_far_under_its_peak_are_the_rooms_tail():
    """After the last word a reverberant room keeps WebRTC's detector voiced until the tail
    sinks into the noise; with no echo present those frames end the voice."""
    guarded = EchoGuardedVad(Counting(), window_s=0.03, share=1.0, voice_over_noise_db=10.0)
    run(guarded, 5, echo_present=False)  # the noise is learned
    tell(guarded, utterance_open=True)
    voice, tail = scaled(30), scaled(2)  # 29.5 dB above the noise; 6 dB above it, 23.5 dB under the voice
    assert [guarded.is_speech(f) for f in (voice, voice, tail, tail)] == [True, True, False, False]
    assert guarded.tail_frames == 2
    assert guarded.is_speech(scaled(4))  # 12 dB above the noise: still the voice

    tell(guarded, utterance_open=False)  # the next utterance is a quiet voice: its peak is its own
    assert guarded.is_speech(scaled(4))
    tell(guarded, utterance_open=True)
    assert [guarded.is_speech(f) for f in (scaled(4), tail)] == [True, True]  # near the noise itself: every frame counts

    untouched = EchoGuardedVad(Counting(), window_s=0.03, share=1.0, tail_below_peak_db=None)
    run(untouched, 5, echo_present=False)
    tell(untouched, utterance_open=True)
    assert [untouched.is_speech(f) for f in (voice, tail)] == [True, True]


@pytest.mark.parametrize(
    "window, share, named", [(0.3, 0.0, "onset_share"), (0.3, 1.5, "onset_share"), (0.0, 0.6, "onset_window_s")]
)
def test_guard_settings_out_of_range_are_named(window, share, named):
    with pytest.raises(ValueError, match=named):
        EchoGuardedVad(Scripted([]), window_s=window, share=share)
    with pytest.raises(ValueError, match="voice_over_noise_db"):
        EchoGuardedVad(Scripted([]), voice_over_noise_db=-1.0)


def test_the_simulated_loudspeaker_plays_its_queue_back_to_back_and_late_chunks_after_a_gap():
    """eval's room: a chunk handed over while the card still plays goes right after the one
    before; one handed over after the card ran dry plays OUTPUT_LATENCY_S after it came."""
    from predgen_ros.eval.hearing.echo_mic import OUTPUT_LATENCY_S, RoomMicrophone
    from predgen_ros.eval.hearing.echo_room import EchoPaths

    room = RoomMicrophone(np.ones(10))
    room.paths, room.gain = EchoPaths(None, np.array([1.0]), np.array([1.0])), 1.0  # a dry room
    room.start(100.0)
    chunk = np.full(800, 1000, dtype=np.int16)  # 50 ms
    room.robot_played(chunk, SAMPLE_RATE, 100.0)
    room.robot_played(chunk * 2, SAMPLE_RATE, 100.02)  # handed over early: queued
    room.robot_played(chunk * 3, SAMPLE_RATE, 100.2)  # after the queue ran dry at 130 ms
    heard = room.next_chunk(np.zeros(6400))  # 0.4 s
    latency = round(OUTPUT_LATENCY_S * SAMPLE_RATE)
    assert (heard[:latency] == 0).all()
    assert (heard[latency : latency + 800] == 1000).all()
    assert (heard[latency + 800 : latency + 1600] == 2000).all()  # back to back, not at 20 ms + latency
    third = round(0.2 * SAMPLE_RATE) + latency
    assert (heard[latency + 1600 : third] == 0).all()  # the card ran dry: a gap, as the reference's stamps have
    assert (heard[third : third + 800] == 3000).all()


def test_a_chunk_whose_message_came_after_its_time_loses_only_its_overdue_part():
    """eval's room: tts/reference reaching the evaluation after the microphone passed the
    chunk's play time drops the samples already due; the rest of the reply stays on its
    stamps, as a sound card on the robot would have played it."""
    from predgen_ros.eval.hearing.echo_mic import OUTPUT_LATENCY_S, RoomMicrophone
    from predgen_ros.eval.hearing.echo_room import EchoPaths

    room = RoomMicrophone(np.ones(10))
    room.paths, room.gain = EchoPaths(None, np.array([1.0]), np.array([1.0])), 1.0  # a dry room
    room.start(100.0)
    latency = round(OUTPUT_LATENCY_S * SAMPLE_RATE)
    heard = room.next_chunk(np.zeros(latency + 320))  # the microphone is 20 ms into the first chunk's time
    chunk = np.full(800, 1000, dtype=np.int16)  # 50 ms
    room.robot_played(chunk, SAMPLE_RATE, 100.0)  # came 20 ms late
    room.robot_played(chunk * 2, SAMPLE_RATE, 100.05)  # on time, queued behind it
    assert room.late_chunks == 1
    heard = np.concatenate([heard, room.next_chunk(np.zeros(1600))])
    assert (heard[: latency + 320] == 0).all()  # the overdue 20 ms: never heard
    assert (heard[latency + 320 : latency + 800] == 1000).all()  # the rest of the late chunk, on its stamp
    assert (heard[latency + 800 : latency + 1600] == 2000).all()  # the next chunk not shifted behind it


def speech_like(level: float, n: int = 160, seed: int = 0) -> np.ndarray:
    return np.clip(np.random.default_rng(seed).standard_normal(n) * level, -32768, 32767).astype(np.int16)


def taught_gate():
    """An EchoLeakGate that heard the robot speak: the echo at the microphone 6 dB under the reference."""
    from predgen_ros.audio.echo.echo_leak import EchoLeakGate

    gate = EchoLeakGate()
    for i in range(50):
        reference = speech_like(4000, seed=i)
        gate.gate((reference // 2).astype(np.int16), reference, speech_like(40, seed=i))  # well cancelled
    return gate


def test_a_well_cancelled_frame_and_one_before_the_robot_spoke_pass_as_they_are():
    from predgen_ros.audio.echo.echo_leak import EchoLeakGate

    fresh = EchoLeakGate()
    out = speech_like(500)
    assert fresh.gate(speech_like(2000), np.zeros(160, np.int16), out) is out  # nothing to predict an echo from
    gate = taught_gate()
    assert gate.silenced_frames == 0  # the robot's voice, taken 34 dB down by the canceller, is no leak


def test_the_rooms_tail_let_through_after_the_robot_fell_silent_is_silenced():
    gate = taught_gate()
    silence = np.zeros(160, np.int16)
    tail = speech_like(1000, seed=99)  # 6 dB under the echo, 30 ms after the reference ended
    for _ in range(3):
        gate.gate(silence, silence, silence)
    assert not gate.gate(tail, silence, tail).any()  # the canceller let it through whole
    assert gate.silenced_frames == 1


def test_the_users_voice_over_the_robot_or_after_it_is_kept():
    gate = taught_gate()
    reference = speech_like(4000, seed=7)
    user = speech_like(600, seed=8)
    mic = (reference // 2 + user).astype(np.int16)
    assert gate.gate(mic, reference, user) is user  # over the robot: the canceller took the echo, 10 dB and more
    silence = np.zeros(160, np.int16)
    loud = speech_like(6000, seed=9)  # after the robot: louder than the echo's tail can be
    assert gate.gate(loud, silence, loud) is loud
    assert gate.silenced_frames == 0


def test_the_recognizer_hears_a_user_over_the_robot_and_the_voice_detector_hears_little_of_the_robot():
    """Real Piper speech in a simulated reverberant room (RT60 0.58 s): the user 7 dB under
    the robot's echo at the microphone. Speex's linear filter (the recognizer's audio) takes
    the echo down and keeps the user; AEC3's suppressor (the voice detector's) takes the
    user out with the echo, which is why the recognizer does not hear it."""
    from predgen_ros.audio.echo.canceller import EchoCanceller
    from predgen_ros.audio.pcm import to_pcm16k
    from predgen_ros.audio.speech.tts import PiperSynthesizer
    from predgen_ros.eval.hearing.echo_room import echo_paths

    synth = PiperSynthesizer(reproducible=True)

    def speech(text: str) -> np.ndarray:
        said = synth.synthesize(text)
        return np.frombuffer(to_pcm16k(said.samples, said.sample_rate), dtype=np.int16).astype(np.float64)

    robot = speech("Sure. I set a timer for ten minutes, and I will tell you when it is done. The oven is hot.")
    user = speech("Wait, what time does the store close?")
    paths = echo_paths(np.random.default_rng(1))
    at = 4 * SAMPLE_RATE
    n = max(len(robot), at + len(user)) + SAMPLE_RATE // 2
    echo, heard = np.zeros(n), np.zeros(n)
    reverberant = np.convolve(robot, paths.robot)[:n]
    echo[: len(reverberant)] = reverberant
    heard[at : at + len(user)] = np.convolve(user, paths.user)[: len(user)]
    gain = 16000 / np.max(np.abs(echo + heard))
    echo, heard = echo * gain, heard * gain
    canceller = EchoCanceller()
    canceller.played(0.0, robot.astype(np.int16).tobytes())
    mic = np.round(echo + heard).astype(np.int16)
    words, voice = bytearray(), bytearray()
    for i in range(0, n, 320):  # 20 ms chunks, as asr_node reads them
        out = canceller.process(mic[i : i + 320].tobytes(), i / SAMPLE_RATE)
        words, voice = words + out.audio, voice + out.for_voice
    span = slice(at, at + len(user))

    def user_over_rest_db(x: bytes | np.ndarray) -> float:
        x = np.frombuffer(x, dtype=np.int16).astype(np.float64) if isinstance(x, bytes) else x.astype(np.float64)
        return 10 * np.log10(np.sum(heard[span] ** 2) / np.sum((x[span] - heard[span]) ** 2))

    def level_db(x: np.ndarray, where: slice) -> float:
        return 10 * np.log10(np.mean(x[where].astype(np.float64) ** 2))

    at_mic = user_over_rest_db(mic)
    assert at_mic < -5  # the robot is louder than the user at the microphone
    assert user_over_rest_db(bytes(words)) > at_mic + 12  # the echo taken down, the user kept
    assert user_over_rest_db(bytes(voice)) < user_over_rest_db(bytes(words)) - 5  # the suppressor took the user too
    robot_only = slice(2 * SAMPLE_RATE, at)
    assert level_db(np.frombuffer(bytes(voice), np.int16), robot_only) < level_db(mic, robot_only) - 30


def test_without_libspeexdsp_the_canceller_says_how_to_get_it(monkeypatch):
    from predgen_ros.audio.echo import linear_echo
    from predgen_ros.audio.echo.canceller import EchoCanceller
    from predgen_ros.audio.pcm import AsrError

    monkeypatch.setattr(linear_echo, "_library_candidates", lambda: ["/nonexistent/libspeexdsp.so.1"])
    with pytest.raises(AsrError, match=r"make venv.*libspeexdsp1.*asr.echo_cancel to none"):
        EchoCanceller()


class Listening:
    """A recognizer that keeps the audio it is given."""

    def __init__(self):
        self.heard = bytearray()

    def start(self) -> None:
        self.heard.clear()

    def accept(self, pcm: bytes) -> str:
        self.heard += pcm
        return ""

    def finish(self) -> str:
        return ""


@pytest.mark.parametrize(
    "over_echo, voice_run_s, pre_roll_s", [(False, 0.0, 0.2), (True, 0.0, 0.6), (True, 0.6, 0.8), (False, 0.6, 0.2)]
)
def test_an_utterance_opened_late_over_the_echo_reads_back_to_where_its_voice_began(over_echo, voice_run_s, pre_roll_s):
    """Over the robot's echo the voice detector counts a voice late (the onset window, the
    suppressor): the recognizer reads back at least 0.6 s, and as far as the detector has
    held the voice uncounted, plus the usual 0.2 s; with no echo, the usual 0.2 s."""
    from predgen_ros.audio.recognition.asr import StreamingAsr

    frames_before = 40  # 1.2 s of audio before the first counted frame
    detector = Scripted([False] * frames_before + [True] * 20)
    asr = StreamingAsr(Listening(), vad=detector)
    before = b"".join(np.full(480, i, dtype=np.int16).tobytes() for i in range(frames_before))  # each frame numbered
    asr.feed(before)
    detector.voice_run_s = voice_run_s  # as the detector stands before the chunk that opens the utterance
    voiced = np.full(480, 1000, dtype=np.int16).tobytes()
    asr.feed(voiced * 4, over_echo=over_echo)  # 120 ms: at least RECOGNIZER_STEP_S, so the recognizer reads it
    heard = np.frombuffer(bytes(asr.recognizer.heard), dtype=np.int16)
    kept = round(pre_roll_s * SAMPLE_RATE)
    assert len(heard) == kept + 4 * 480
    latest = np.frombuffer(before, dtype=np.int16)[len(before) // 2 - kept :]
    assert (heard[:kept] == latest[:kept]).all()  # the latest audio before the voice, in order


class EchoAlways:
    """A canceller stand-in: the robot always sounding, nothing taken out, nothing to learn."""

    learning = False

    class reference:  # noqa: N801 (the canceller's attribute)
        @staticmethod
        def sounding(t_s: float, tail_s: float) -> bool:
            return True

    def process(self, mic: bytes, t_s: float) -> EchoedChunk:
        return EchoedChunk(mic, mic, echo_present=True, learning=False)


def test_the_hearing_reads_back_and_dates_a_voice_to_where_the_detector_first_heard_it():
    """Over the echo a voice the detector hears on every other frame for 0.6 s is held
    (the onset rule), then counted: the recognizer reads back to its first frame, and
    the voice's start is dated there, not 0.6 s later where it was counted."""
    from predgen_ros.audio.ear import Ear
    from predgen_ros.audio.recognition.asr import PRE_ROLL_S, StreamingAsr

    answers = [False] * 10 + [True, False] * 10 + [True] * 20  # 30 ms frames; the voice from 0.3 s
    guarded = EchoGuardedVad(Scripted(answers), window_s=0.3, share=0.6)
    asr = StreamingAsr(Listening(), vad=guarded)
    ear = Ear(asr, EchoAlways(), guarded)
    began = None
    for i in range(len(answers)):
        frame = np.full(480, 1000 + i, dtype=np.int16).tobytes()  # each frame numbered
        ear.feed(frame, i * 0.03)
        starts = [t for what, t in asr.voice_changes() if what == "start"]
        if starts:
            began, opened_at = ear.voice_began(starts[0]), asr.stream_time
    assert opened_at > 0.85  # counted once the voice was sustained
    assert abs(began - 0.3) <= 0.03  # dated to its first frame
    first_read = int(np.frombuffer(bytes(asr.recognizer.heard[:2]), dtype=np.int16)[0]) - 1000
    assert first_read <= 10 - round(PRE_ROLL_S / 0.03) + 1  # the recognizer read it from before its first frame


def test_the_cancellers_inputs_are_kept_as_paired_and_show_where_the_echo_lay(tmp_path):
    """asr.record_dir with the canceller: canceller-inputs.wav holds the microphone and the
    reference as paired, readable while it grows; scripts/canceller_lag.py finds the echo
    30 ms after its reference in it."""
    import importlib.util
    import wave
    from pathlib import Path

    from predgen_ros.audio.echo.canceller import EchoCanceller
    from predgen_ros.audio.heard_audio import CANCELLER_INPUTS, CancellerInputs

    script = Path(__file__).resolve().parents[1] / "scripts" / "canceller_lag.py"
    spec = importlib.util.spec_from_file_location("canceller_lag", script)
    canceller_lag = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(canceller_lag)

    rng = np.random.default_rng(0)
    reply = np.clip(rng.standard_normal(3 * SAMPLE_RATE) * 4000, -32768, 32767).astype(np.int16)
    lag = int(0.03 * SAMPLE_RATE)
    mic = np.zeros(5 * SAMPLE_RATE)
    mic[SAMPLE_RATE + lag : SAMPLE_RATE + lag + len(reply)] = reply * 0.5
    mic = (mic + rng.standard_normal(len(mic)) * 30).astype(np.int16)
    canceller = EchoCanceller()
    inputs = CancellerInputs(tmp_path, flush_s=0.5)
    canceller.tap = inputs.frame
    canceller.played(1.0, reply.tobytes())
    chunk = SAMPLE_RATE // 50
    for start in range(0, len(mic), chunk):
        canceller.process(mic[start : start + chunk].tobytes(), start / SAMPLE_RATE)
        if start == 2 * SAMPLE_RATE:
            with wave.open(str(tmp_path / CANCELLER_INPUTS)) as growing:
                assert growing.getnframes() == 2 * SAMPLE_RATE  # flushed each 0.5 s, its header up to date
    inputs.close()
    inputs.frame(mic[:160], mic[:160])  # after the node cleaned up: dropped
    kept_mic, kept_reference = canceller_lag.read_inputs(tmp_path / CANCELLER_INPUTS)
    assert (kept_mic == mic).all()
    assert (kept_reference[:SAMPLE_RATE] == 0).all() and (kept_reference[SAMPLE_RATE : 4 * SAMPLE_RATE] == reply).all()
    found = canceller_lag.lags(kept_mic, kept_reference)
    assert len(found) >= 3 and all(abs(at - 0.03) < 1e-3 for _, at in found)
    assert canceller_lag.replayed_voice_starts(kept_mic, kept_reference) == []  # the robot alone: no voice of the user
    log = tmp_path / "graph.log"
    log.write_text(
        "[asr_node] [INFO] [1000.030] [asr_node]: turn: pause (voice start)\n"
        "[asr_node] [INFO] [1004.040] [asr_node]: turn: resume ('Okay.')\n"
        "[asr_node] [INFO] [1009.500] [asr_node]: turn: pause (voice start)\n"
    )
    assert "1 of the graph's 2 pauses at a voice start are replayed decisions (2 replayed)" in canceller_lag.match_graph(
        [2.0, 6.0], log
    )


def test_each_frame_meets_the_reference_of_its_capture_time_across_odd_chunks_and_jumps():
    """A microphone whose chunks are no whole number of 10 ms frames, and whose clock jumps
    (a 5 s stop, chunks lost): every frame is paired with what played when it was captured.
    Sample values name their position, so a frame paired right equals its reference."""
    from predgen_ros.audio.echo.canceller import EchoCanceller

    canceller, pairs = EchoCanceller(), []
    canceller.tap = lambda mic, reference: pairs.append(np.array_equal(mic, reference))
    t0, signal = 1000.0, (np.arange(30 * SAMPLE_RATE) % 20000 + 1).astype(np.int16)
    canceller.played(t0, signal.tobytes())
    position, judged = 0, []
    chunks = [(320, 0), (7, 0), (333, 0), (1, 0), (9600, 0), (320, 0), (1024, 5 * SAMPLE_RATE), (1024, 0), (320, 0)]
    chunks += [(330, 160), (320, 0), (1024, 0), (320, 0)]
    for n, skipped in chunks:
        position += skipped
        before = len(pairs)
        canceller.process(signal[position : position + n].tobytes(), t0 + position / SAMPLE_RATE)
        position += n
        # after a jump, the first frame holds the remainder from before it: the one frame not judged
        judged += pairs[before + (skipped > 0) :]
    assert len(judged) > 85 and all(judged)
