"""What an early start costs the user, per question of a live replay (eval --endpoint-policies).

An endpoint rule that ends the turn sooner answers sooner, and sometimes before the user
is done.  Three measures say what that costs:

- talk-over: the robot's voice began while the user still had words to say (before the
  question's true end of speech); its overlap is how long the two spoke at once (the
  robot's voice counted while it sounded: not while a reply was paused).
- words lost: the question was answered from less than all of it and never again whole
  (an early final that asr_node did not say "resumed" after, or whose words the question's
  last final does not begin with, or no final after the speech ended at all).
- the contract: asr_node follows every final on asr/voice with "confirmed", or with
  "resumed" and then a final that extends it or "confirmed" (audio/recognition/asr.py); the replies
  held are the "resumed" ones.
- the work: the replies begun and the LLM's forward passes (from the latency reports),
  and the seconds of speech synthesized, per question.
"""

from __future__ import annotations

from ..hearing.asr_quality import reference_words


def speaking_spans(recorded) -> list[tuple[int, float]]:
    """(on, off) in ns of each stretch the robot's voice sounded: robot_speaking as the
    replay received it, less where tts/interruption says (by its stamp) the voice paused,
    until it went on, or stopped; robot_speaking stays true while a reply is paused.  Off
    is inf while it still spoke at the end."""
    changes = []  # (ns, what), in time order: a reply's on/off, and its voice's pauses within it
    for topic, t_ns, msg in recorded:
        if topic == "robot_speaking":
            changes.append((t_ns, "on" if msg.data else "off"))
        elif topic == "tts/interruption":
            changes.append((msg.stamp.sec * 1_000_000_000 + msg.stamp.nanosec, msg.frame_id))
    spans, reply_open, sounding = [], False, None  # sounding: since when the voice sounds
    for t_ns, what in sorted(changes, key=lambda change: change[0]):
        if what in ("on", "resume") and sounding is None and (reply_open or what == "on"):
            sounding = t_ns
        elif what in ("off", "pause", "stop") and sounding is not None:
            spans.append((sounding, t_ns))
            sounding = None
        reply_open = {"on": True, "off": False}.get(what, reply_open)
    if sounding is not None:
        spans.append((sounding, float("inf")))
    return spans


def talk_over_s(spans: list[tuple[int, float]], start_ns: int, end_ns: int) -> float:
    """Seconds the robot spoke inside the user's speech [start_ns, end_ns)."""
    overlap = sum(max(0.0, min(off, end_ns) - max(on, start_ns)) for on, off in spans)
    return overlap / 1e9


def words_lost(finals: list[tuple[str, str | None]], closed: bool) -> bool:
    """`finals`: what the ASR made of one question, in order, each with the contract's last
    word on it (`contract_words`); `closed`: one of them came after its speech ended.
    Words are lost when an early final was not resumed or its words are not where the
    last final begins (the rest became a turn of its own), or when the question never got
    a final after its end."""
    if not closed:
        return True
    last = reference_words(finals[-1][0])
    return any(word != "resumed" or reference_words(early) != last[: len(reference_words(early))] for early, word in finals[:-1])


def contract_words(recorded, speech_ends: list[int]) -> list[tuple[str | None, int]]:
    """Per final (its end of speech in `speech_ends`, ns, in order): asr/voice's last word on it
    ("confirmed": its words stand; "resumed": a later final extends them; None: neither came)
    and how often the voice came back after it ("resumed", the replies withdrawn).  A word
    belongs to the final whose end of speech it follows and the next final's it precedes: a
    "resumed" is stamped at the voice that came back, a "confirmed" where the wait ended (or
    where a voice that came back closed without a word)."""
    from ...nodes.common import seconds
    from ...nodes.messages import voice_kind

    said = [
        (int(seconds(msg.stamp) * 1e9), voice_kind(msg))
        for topic, _, msg in recorded
        if topic == "asr/voice" and voice_kind(msg) in ("confirmed", "resumed")
    ]
    bounds = [*speech_ends[1:], float("inf")]
    result = []
    for end, next_end in zip(speech_ends, bounds):
        kinds = [kind for t, kind in said if end <= t < next_end]
        result.append((kinds[-1] if kinds else None, kinds.count("resumed")))
    return result


def diagnostics_value(recorded, node: str, key: str, before_ns: float) -> float | None:
    """The last value of `key` in `node`'s /diagnostics received before `before_ns`."""
    value = None
    for topic, received_ns, msg in recorded:
        if topic == "/diagnostics" and received_ns < before_ns:
            for status in msg.status:
                if status.name.endswith(node):
                    value = next((float(v.value) for v in status.values if v.key == key), value)
    return value
