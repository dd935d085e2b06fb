"""The two vocabularies of a turn: what the user's side tells the engine (`Heard`) and
what the engine tells the speaking side (`Emission`).

String enums, so that a log line, a report or a test reads them as their words.
"""

from __future__ import annotations

from enum import StrEnum


class Heard(StrEnum):
    PARTIAL = "partial"  # the recognizer's full current hypothesis of the utterance
    FINAL = "final"  # the recognizer's transcript of the utterance
    TURN = "turn"  # one of the turn owner's events (turn/events, turn_events.py)
    END_OF_TURN = "end_of_turn"  # the user is done, the robot may speak (bench: the endpoint delay after the final)
    RESET = "reset"  # forget the conversation
    PLAYED = "played"  # what the user heard of a reply they cut off (tts/played)


class Emission(StrEnum):
    CANDIDATE = "candidate"  # the speculative first sentence: pre-synthesize it, do not play it
    BEGINNING = "beginning"  # the first sentence's words so far, while it is decoded: pre-synthesize its opening once certain
    COMMIT = "commit"  # the first sentence, final: speak it now
    SENTENCE = "sentence"  # each following sentence of the reply
    DONE = "done"  # the whole reply
    END_PROBABILITY = "end_probability"  # the latest partial's probability that the user is done after it
    INTERRUPTED = "interrupted"  # the worker: a turn with a spoken reply ended before it was done
    NOTICE = "notice"  # the worker: the served model failed with nothing behind it; say this instead of a reply
