import numpy as np
import scripts.echo_choice as E
from predgen_ros.eval.far_field import RoomSettings
from predgen_ros.audio.tts import PiperSynthesizer
from predgen_ros.audio.whisper import WhisperTranscriber
from speexdsp_aec import SpeexAec
synth=PiperSynthesizer(reproducible=True); w=WhisperTranscriber()
for rt in [(0.2,0.25),(0.3,0.35),(0.5,0.6)]:
    rng=np.random.default_rng(1)
    paths=E.echo_paths(rng, RoomSettings(rt60_s=rt))
    b=E.BARGE_INS[1]
    mic,ref,ro,us=E.trial_audio(synth,rng,paths,b,0.0)
    for name in ['none','webrtc']:
        clean=E.CANCELLERS[name]().run(mic,ref); said=clean[us[0]:us[1]]
        print(rt, name, round(E.dbfs(clean[ro[0]:ro[1]]),1), round(E.vad_share(E.make_vad('webrtc',2), clean[ro[0]:ro[1]]),2), repr(w.transcribe(said.tobytes()).text))
    for tail in [200,500]:
        a=SpeexAec(16000,20,tail); clean=np.frombuffer(a.process(mic,ref),dtype=np.int16)
        print(rt,'speex',tail, round(E.dbfs(clean[ro[0]:ro[1]]),1), round(E.dbfs(clean[ro[1]-16000:ro[1]]),1))
