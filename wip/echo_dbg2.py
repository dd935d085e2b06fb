import numpy as np, sys
import scripts.echo_choice as E
from predgen_ros.audio.tts import PiperSynthesizer
from predgen_ros.audio.whisper import WhisperTranscriber
from predgen_ros.audio.pcm import to_pcm16k
from livekit.rtc import AudioFrame, AudioProcessingModule
synth=PiperSynthesizer(reproducible=True); w=WhisperTranscriber()
def run(mic, ref, **kw):
    apm=AudioProcessingModule(**kw); out=bytearray()
    for i in range(0,len(mic)-159,160):
        f=AudioFrame(ref[i:i+160].tobytes(),16000,1,160); apm.process_reverse_stream(f)
        n=AudioFrame(mic[i:i+160].tobytes(),16000,1,160); apm.set_stream_delay_ms(0); apm.process_stream(n); out+=n.data.tobytes()
    return np.frombuffer(bytes(out),dtype=np.int16)
print('--- normalized')
rng=np.random.default_rng(0)
for trial in range(4):
    paths=E.echo_paths(rng)
    if trial%2==0: continue
    b=E.BARGE_INS[trial%4]
    mic,ref,ro,us=E.trial_audio(synth,rng,paths,b,0.0)
    clean=run(mic,ref,echo_cancellation=True,noise_suppression=True,high_pass_filter=True); said=clean[us[0]:us[1]].astype(float)
    said=np.round(said*16000/np.abs(said).max()).astype(np.int16)
    r=w.transcribe(said.tobytes()); print(trial, repr(r.text), r.no_speech_probability, r.avg_logprob)
