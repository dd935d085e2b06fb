import numpy as np
import scripts.echo_choice as E
from predgen_ros.audio.tts import PiperSynthesizer
from predgen_ros.audio.whisper import WhisperTranscriber
from predgen_ros.audio.pcm import to_pcm16k
synth=PiperSynthesizer(reproducible=True); w=WhisperTranscriber()
rng=np.random.default_rng(0)
for trial in range(4):
    paths=E.echo_paths(rng)
    if trial%2==0: continue
    b=E.BARGE_INS[trial%4]
    # same rng draws as trial_audio: replicate by computing components directly
    reply=synth.synthesize(E.REPLY); robot=np.frombuffer(to_pcm16k(reply.samples,reply.sample_rate),dtype=np.int16).astype(float)
    said=synth.synthesize(b); user=np.frombuffer(to_pcm16k(said.samples,said.sample_rate),dtype=np.int16).astype(float)
    echo=np.convolve(robot,paths.robot); heard=np.convolve(user,paths.user)
    at=int(3*16000); seg=echo[at:at+len(user)]
    print(trial, 'robot echo in user span', round(E.dbfs(seg/ 32768*32768),1), 'user', round(E.dbfs(heard[:len(user)]),1), 'ratio dB', round(10*np.log10(np.mean(seg**2)/np.mean(heard[:len(user)]**2)),1))
    mix=heard[:len(user)]; mix=np.round(mix*16000/np.abs(mix).max()).astype(np.int16)
    print('  user alone, whisper:', repr(w.transcribe(mix.tobytes()).text))
