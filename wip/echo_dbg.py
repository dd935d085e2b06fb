import numpy as np, sys
sys.argv=['x']
import scripts.echo_choice as E
from predgen_ros.audio.tts import PiperSynthesizer
from predgen_ros.audio.whisper import WhisperTranscriber
synth=PiperSynthesizer(reproducible=True); w=WhisperTranscriber()
rng=np.random.default_rng(0)
for trial in range(4):
    paths=E.echo_paths(rng)
    if trial%2==0: continue
    b=E.BARGE_INS[trial%4]
    mic,ref,ro,us=E.trial_audio(synth,rng,paths,b,0.0)
    print(trial, paths.room, 'peak', np.abs(mic).max(), 'clipped', np.mean(np.abs(mic)>=32767))
    for name in ['none','webrtc']:
        clean=E.CANCELLERS[name]().run(mic,ref)
        said=clean[us[0]:us[1]]
        print(name, E.dbfs(clean[ro[0]:ro[1]]), E.dbfs(said), repr(w.transcribe(said.tobytes()).text))
