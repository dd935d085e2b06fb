"""What asr_node says about the stream on `audio/user`: chunks it resamples or cannot use,
chunks that are clipped or long, and gaps where the microphone stopped.

A robot's microphone driver fails in these ways (a sound server restarted at another
rate, a gain turned up, a USB stall).  Each problem is heard through where it can be (a
48 kHz chunk is resampled, a clipped one is heard as it is), said in one log line at most
every `REPEAT_S` per kind, and counted for /diagnostics; only a chunk with nothing usable
in it is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..audio.pcm import SAMPLE_RATE, to_pcm16k

FULL_SCALE = 32767
CLIPPED_SHARE = 0.01  # a chunk with this share of its samples at full scale was clipped by the microphone
LONG_CHUNK_S = 0.5  # a longer chunk is heard, but only once all of it has arrived: that late
GAP_S = 1.0  # no chunk for this long: the microphone has stopped
RATES = (4000, 192000)  # labelled rates outside this span are no microphone's
REPEAT_S = 10.0  # a problem that goes on is said again this often


@dataclass
class MicrophoneCheck:
    counts: dict[str, int] = field(default_factory=lambda: {"resampled": 0, "dropped": 0, "long": 0, "clipped": 0, "gaps": 0})
    last_chunk_at: float | None = None  # None: no chunk since the node began listening
    listening_since: float | None = None  # None: not listening (a gap counts from when it began)
    _said_at: dict[str, float] = field(default_factory=dict)
    _gap_said: bool = False

    def stop(self) -> None:
        """The node stopped listening (deactivated): nothing it misses from here is a gap."""
        self.last_chunk_at, self.listening_since, self._gap_said = None, None, False

    def chunk(self, samples: np.ndarray, rate: int | None, now: float) -> tuple[bytes | None, list[str]]:
        """16 kHz int16 bytes to hear (None: nothing usable) and the lines to log.  `rate`:
        the chunk's labelled rate (None: unlabelled, taken as 16 kHz)."""
        lines = []
        if self.last_chunk_at is not None and now - self.last_chunk_at > GAP_S:
            self.counts["gaps"] += 1
            lines.append(f"audio/user back after {now - self.last_chunk_at:.1f} s without audio")
        self.last_chunk_at, self._gap_said = now, False
        rate = SAMPLE_RATE if rate is None else rate
        if not RATES[0] <= rate <= RATES[1] or len(samples) == 0:
            what = "an empty chunk" if len(samples) == 0 else f"a chunk labelled {rate} Hz"
            lines += self._say(
                "dropped", now, f"dropped {what} on audio/user: publish 16 kHz mono int16 (label 'mono_{SAMPLE_RATE}hz')"
            )
            return None, lines
        if rate != SAMPLE_RATE:
            lines += self._say(
                "resampled",
                now,
                f"audio/user chunks at {rate} Hz: resampled to 16 kHz (publish 'mono_{SAMPLE_RATE}hz' to spare the work)",
            )
        if (seconds := len(samples) / rate) > LONG_CHUNK_S:
            lines += self._say(
                "long", now, f"audio/user chunk of {seconds:.2f} s: every word is heard that late (publish 20 ms chunks)"
            )
        clipped = float(np.mean(np.abs(samples.astype(np.int32)) >= FULL_SCALE))
        if clipped >= CLIPPED_SHARE:
            lines += self._say(
                "clipped", now, f"audio/user is clipping ({clipped:.0%} of a chunk at full scale): lower the microphone's gain"
            )
        return to_pcm16k(samples, rate), lines

    def silence(self, now: float) -> str | None:
        """A line, once a gap, when nothing has arrived for GAP_S since the node began
        listening (the first call) or since the last chunk."""
        if self.listening_since is None:
            self.listening_since = now
        since = self.last_chunk_at if self.last_chunk_at is not None else self.listening_since
        if self._gap_said or now - since <= GAP_S:
            return None
        self._gap_said = True
        heard = "no audio" if self.last_chunk_at is not None else "no audio yet"
        return f"{heard} on audio/user for {now - since:.1f} s: is the microphone publishing?"

    def _say(self, kind: str, now: float, line: str) -> list[str]:
        self.counts[kind] += 1
        if now - self._said_at.get(kind, -REPEAT_S) < REPEAT_S:
            return []
        self._said_at[kind] = now
        return [line]

    def figures(self) -> dict[str, int]:
        return {f"audio_{kind}": n for kind, n in self.counts.items()}
