"""The dialogue session: timed transcript events in, sentences out.

A driver (the benchmark's virtual clock, or the ROS node's worker thread)
feeds `partial`, `final` and `end_of_turn` events and calls `step()` while
`has_work()`.  Each step runs at most ONE forward pass, so a newer transcript
interrupts work within one pass.  Steps return emissions, (Emission, text) pairs
(events.py):

  CANDIDATE, s       speculative first sentence (pre-synthesize, do not play)
  COMMIT, s          the first sentence, final: speak it now
  SENTENCE, s        each following sentence of the reply
  DONE, reply        the whole reply
  END_PROBABILITY, p the latest partial, once its end-of-turn probability is known

The three policies differ only in what a new transcript does:
  baseline    ignores transcripts until the end of turn, then generates;
  preemptive  restarts its reply from scratch on every changed transcript
              (reusing the prompt's KV cache, like prefix caching);
  predgen     verifies its candidate against the new prompt in one pass,
              keeps the accepted prefix and extends it.  With `anticipate`
              it speculates on the model's guess of how the user's sentence
              ends (engine/anticipate.py), and the words that follow the
              guess cost no pass.

A turn belongs to an utterance, not to a text: the same words said twice are
two turns.  Topics are not ordered with each other, so a partial or the final
of an utterance may arrive again after its final; such a copy is recognized by
the utterance number the ASR gives (`asr/speech_end`), or, without one, by
arriving within LATE_COPY_WINDOW_S of the final (a final: with no partial
heard in between).

An endpoint policy that ends the utterance at a short pause (asr_node) can be
early: a partial that adds words to the turn's final within
CONTINUATION_WINDOW_S is the user going on, not a new question.  The turn
listens again: its reply is unsaid (dropped from the history), and its
candidate is verified against the longer question like any rewrite.

The paper's terms (Li & Grover, PredGen) and where they live here:

  speculate on a partial transcript   partial() -> _set_target(); the first pass
                                      of _verify_against_new_transcript()
  verify the candidate against a      _verify_against_new_transcript() ->
  newer transcript (one pass)         verify.verify_candidate(): keep the accepted prefix
  extend the candidate (AR / Jacobi)  _extend_candidate() -> decode.ar_step / jacobi_step
  commit the first sentence           _commit_first_sentence(), at the end of turn
  continue the reply                  _continue_reply(): the following sentences
  (ours) anticipate the user's words  _start_guess() / _continue_guess() (engine/anticipate.py)

A turn's phase (Phase) is SPECULATING until its first sentence is committed,
SPEAKING while the rest of the reply is decoded, then DONE.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from ..events import Emission
from ..transcripts import words
from .anticipate import Guess, ends_sentence, on_track
from .config import DECODERS, POLICIES, VERIFIERS, ConfigError, EngineConfig  # noqa: F401 (a session is made from these)
from .copy_ban import CopyBan
from .decode import ar_step, greedy_next, jacobi_step, ngram_draft
from .history import History
from .lm import KVState, LanguageModel
from .sentences import split_first_sentence
from .verify import reply_ngrams, verify_candidate

log = logging.getLogger(__name__)

# A copy of the finalized utterance arrives within this many seconds of its final
# (DDS delivers the topics of one publisher milliseconds apart); the user cannot
# end an utterance and say a new one that quickly.
LATE_COPY_WINDOW_S = 1.0
# asr_node joins speech that resumes within asr.endpoint.max_silence_s (1 s by
# default) of an early final to it; allow for that plus delivery.
CONTINUATION_WINDOW_S = 3.0


class Phase(Enum):
    SPECULATING = "speculating"  # no sentence said yet: the candidate is verified and extended
    SPEAKING = "speaking"  # the first sentence is committed; the rest of the reply is decoded
    DONE = "done"  # the whole reply is out


@dataclass
class TurnStats:
    """What happened in one turn, with times from the session's clock."""

    user_text: str = ""
    utterance: str | None = None  # the ASR's utterance number, when it gives one
    t_first_partial: float | None = None
    t_final: float | None = None
    t_speech_end: float | None = None  # the ASR's end of the user's voiced audio, when it gives one
    t_end_of_turn: float | None = None
    t_commit: float | None = None
    passes: list[tuple[float, float]] = field(default_factory=list)  # (start, stop) of each forward pass
    rounds: int = 0  # verifications (predgen) or restarts (preemptive, baseline)
    guess_passes: int = 0  # passes spent guessing how the user's sentence ends (anticipation)
    anticipated: str = ""  # the latest anticipated user text
    end_probabilities: list[tuple[str, float]] = field(default_factory=list)  # (partial, P(the user is done))
    final_accepted: int | None = None  # candidate tokens kept by the verification against the final
    final_candidate: int | None = None
    decode_tokens: int = 0
    decode_seconds: float = 0.0
    jacobi_passes: int = 0
    jacobi_tokens: int = 0
    prompt_ids: list[int] = field(default_factory=list)
    history_turns: int = 0  # earlier turns in the prompt
    first_sentence: str = ""
    first_sentence_ids: list[int] = field(default_factory=list)
    reply: str = ""

    def passes_between(self, start: float, stop: float) -> list[tuple[float, float]]:
        return [p for p in self.passes if p[1] > start and p[0] < stop]

    @property
    def nfe_tfs(self) -> int:
        """Forward passes from the final transcript to the commit (1 = verification alone)."""
        return len(self.passes_between(self.t_final, self.t_commit))

    def input_passes(self, t_end: float) -> list[tuple[float, float]]:
        """Forward passes that started while the user was still speaking."""
        return [p for p in self.passes if p[0] < t_end]


class Session:
    """One dialogue: multi-turn history, a KV cache, and one policy."""

    def __init__(self, lm: LanguageModel, config: EngineConfig, clock: Callable[[], float]):
        self.lm = lm
        self.config = config
        self.clock = clock
        self.state = KVState(lm)
        self._history = History(lm, config.history_turns, config.history_tokens)
        self._start_turn()

    @property
    def history(self) -> list[tuple[str, str]]:
        """The earlier (user text, reply) turns the next prompt may hold, oldest first."""
        return self._history.turns

    # ---------------------------------------------------------------- events
    def partial(self, text: str, t: float) -> bool:
        """The full current hypothesis of the utterance (may rewrite or shrink).
        False when it was ignored (empty, or a late copy of the finalized utterance)."""
        text = " ".join(text.split())
        if not text or self._is_late_partial(text, t):
            return False
        if self._continues_final(text, t):
            self._reopen_turn()
        elif self.turn.t_end_of_turn is not None:
            self._finish_turn()  # the user speaks again: a new turn begins
        if self.turn.t_first_partial is None:
            self.turn.t_first_partial = t
        self._heard_since_final = True
        self._latest = text
        self._unscored = text
        if self._anticipates():
            self._anticipate(text)
        elif self.config.policy != "baseline":
            self._set_target(text)
        return True

    def _anticipates(self) -> bool:
        """Guess the sentence's end: predgen with `anticipate`, until the final."""
        return self.config.anticipate and self.config.policy == "predgen" and self.turn.t_final is None

    def _anticipate(self, heard: str) -> None:
        """Target the anticipated question: keep it while the words follow it, take a
        complete sentence as it is, otherwise guess its end anew."""
        if self._anticipated and on_track(self._anticipated, heard):
            return
        if self._guess is not None and on_track(self._guess.text(self.lm.decode), heard):
            return  # the words follow the guess decoded so far: let it finish
        if ends_sentence(heard):
            self._guess = None
            self._adopt(heard)
        else:
            self._start_guess(heard)

    def _adopt(self, anticipated: str) -> None:
        self._anticipated = self.turn.anticipated = anticipated
        self._set_target(anticipated)

    def _is_late_partial(self, partial: str, t: float) -> bool:
        """A partial of the utterance already finalized, delivered after its final:
        its words start the final's and it came within the late-copy window."""
        if self.turn.t_final is None or t - self.turn.t_final > LATE_COPY_WINDOW_S:
            return False
        words, final = partial.split(), self.turn.user_text.split()
        return words == final[: len(words)]

    def _continues_final(self, partial: str, t: float) -> bool:
        """The user went on after the final: more words that start with the final's."""
        if self.turn.t_final is None or t - self.turn.t_final > CONTINUATION_WINDOW_S:
            return False
        return words(partial).startswith(words(self.turn.user_text) + " ")

    def _reopen_turn(self) -> None:
        """The turn listens again after an early final; the cache and its candidate
        stay, to be verified against the longer question."""
        if self.phase is Phase.DONE:
            self._history.unsay_last()  # the reply to the cut-off question is not the conversation
        t_first_partial, prompt, synced = self.turn.t_first_partial, self._prompt, self._synced_prompt
        self._start_turn()
        self.turn.t_first_partial = t_first_partial
        self._prompt, self._synced_prompt = prompt, synced

    def final(self, text: str, t: float, utterance: str | None = None, t_speech_end: float | None = None) -> bool:
        """The final transcript of an utterance (`utterance`: the ASR's number for it,
        if any).  False when it was ignored (nothing heard, or a re-delivered final)."""
        text = " ".join(text.split()) or self._latest
        if not text or (self.turn.t_final is not None and self._redelivers_final(text, t, utterance)):
            return False
        if self.turn.t_end_of_turn is not None:
            self._finish_turn()
        self._latest = text
        self._heard_since_final = False
        self.turn.user_text = text
        self.turn.t_final = t
        self.turn.utterance = utterance
        self.turn.t_speech_end = t_speech_end
        self._guess, self._anticipated = None, ""  # the words are known now
        self._unscored = None  # the end of turn is decided: no more estimates of it
        if self.config.policy != "baseline":
            self._set_target(text)
        return True

    def _redelivers_final(self, text: str, t: float, utterance: str | None) -> bool:
        """Whether a final repeats the current turn's: the same utterance number, or,
        without numbers, the same words soon after with no partial in between."""
        if utterance is not None and self.turn.utterance is not None:
            return utterance == self.turn.utterance
        return text == self.turn.user_text and not self._heard_since_final and t - self.turn.t_final <= LATE_COPY_WINDOW_S

    def end_of_turn(self, t: float) -> None:
        """The robot may speak from now on."""
        if not self._latest or self.turn.t_end_of_turn is not None:
            return
        if self.turn.t_final is None:
            self.final(self._latest, t)
        self.turn.t_end_of_turn = t
        self._set_target(self.turn.user_text)

    def reset(self, history: list[tuple[str, str]] = ()) -> None:
        """Forget the history, or start from `history` ((user, reply) turns of a dialogue
        held elsewhere); the KV cache is kept: it is cropped on demand."""
        self._history.clear()
        for user_text, reply in history:
            self._history.add(user_text, reply)
        self._start_turn()

    def abandon_turn(self) -> None:
        """Drop the current turn after an error: the history stays, the cache is rebuilt."""
        self.state = KVState(self.lm)
        self._start_turn()

    # ------------------------------------------------------------------ work
    def has_work(self) -> bool:
        if self.phase is Phase.DONE:
            return False
        return (
            self._guess is not None
            or self._prompt_changed
            or self._wants_token()
            or self._ready_to_commit()
            or self._end_probability_known()
        )

    def step(self) -> list[tuple[str, str]]:
        """At most one forward pass, then the emissions it made possible."""
        start = self.clock()
        passes = self.lm.stats.passes
        if self._guess is not None:
            self._continue_guess()
        elif self._prompt_changed:
            self._verify_against_new_transcript()
        elif self._wants_token():
            self._extend_candidate()
        if self.lm.stats.passes > passes:
            self.turn.passes.append((start, self.clock()))
        return self._emissions()

    # ------------------------------------------------------------- internals
    def _start_turn(self) -> None:
        self.turn = TurnStats()
        self._latest = ""
        self._heard_since_final = False  # a partial was taken after the turn's final
        self._prompt: list[int] = []  # the prompt we should be answering
        self._synced_prompt: list[int] = []  # the prompt the cache currently starts with
        self.phase = Phase.SPECULATING
        self._prompt_changed = False  # the prompt changed since the cache was verified against it
        self._reply_complete = False  # the reply reached a stop token or its length cap
        self._spoken = 0  # characters of the reply already emitted as sentences
        self._sentences = 0  # sentences of the reply emitted
        self._candidate = ""
        self._draft: list[int] = []
        self._analysis: tuple[int, tuple[str, int] | None] | None = None  # (cache version, first sentence)
        self._ids_memo: tuple[int, int, list[int]] | None = None  # (cache version, end, its tokens)
        self._version = 0  # bumped by every change of the cache
        self._guess: Guess | None = None  # the continuation of the user's text being decoded
        self._anticipated = ""  # the anticipated user text the target answers ("" : none)
        self._held: list[int] | None = None  # the candidate reply, kept aside while the cache guesses
        self._target_text = ""  # the user text the prompt holds
        self._end_scores: dict[str, float] = {}  # user text (as `words`) -> P(the message ends after it)
        self._unscored: str | None = None  # the latest partial, until its end probability is emitted
        self._history_ngrams = reply_ngrams(
            self._history.reply_ids if self.config.verifier.copy_guard else []
        )  # what a runner-up token may not copy
        self._rule: CopyBan | None = None  # the decoding rule for the target prompt (set with it)

    def _finish_turn(self) -> None:
        if self.phase is Phase.SPEAKING:  # interrupted: keep what was said
            self._history.add(self.turn.user_text, self._reply_text())
        self._start_turn()

    def _copy_rule(self, user_text: str) -> CopyBan | None:
        """The decoding rule for a reply to `user_text` after the history: no run of
        `copy_ban` tokens of an earlier reply in the prompt, of itself, or (copy_ban_user)
        of the user's words, and no opening of `copy_ban_opening` tokens that an earlier
        reply in the prompt began with (engine/copy_ban.py)."""
        if not (self.config.copy_ban or self.config.copy_ban_opening):
            return None
        replies = self._history.reply_ids
        user = [self.lm.encode_reply(user_text)] if self.config.copy_ban_user else []
        return CopyBan(replies + user, self.config.copy_ban, replies, self.config.copy_ban_opening)

    def _set_target(self, text: str) -> None:
        self._target_text = text
        prompt = self._history.prompt_ids(text)
        if prompt != self._prompt:
            self._prompt = prompt
            self._rule = self._copy_rule(text)  # before the pass that verifies against the prompt
            self._prompt_changed = True
            self.turn.prompt_ids = prompt
            self.turn.history_turns = len(self._history)

    @property
    def _reply_ids(self) -> list[int]:
        return self.state.tokens[len(self._synced_prompt) :]

    def _pending(self) -> list[int]:
        """The greedy next token, known from the last pass without another one."""
        if self.state.next_logits is None:
            return []
        token = greedy_next(self.state)
        return [] if token in self.lm.stop_ids else [token]

    def _start_guess(self, heard: str) -> None:
        """Continue the user's text from `heard`; the cache leaves the reply, so the
        candidate is held aside until the guess becomes the target."""
        if self._held is None and self._synced_prompt:
            self._held = self._reply_ids + self._pending()
        self._guess = Guess(heard, self._history.open_turn_ids(heard))
        self._anticipated = ""
        self._prompt, self._synced_prompt = [], []
        self._prompt_changed = False
        self._version += 1

    def _continue_guess(self) -> None:
        """One pass of the guess; it ends at the end-of-message token, the end of a
        sentence or `anticipate_tokens`, and its text becomes the target."""
        guess = self._guess
        self.state.answer_from(None, None)  # the user's words: no decoding rule
        keep = self.state.sync_prefix(guess.ids)
        if keep < len(guess.ids):  # else the cache holds the guess and its logits already (a partial came back)
            self.state.append(guess.ids[keep:])
            self.turn.guess_passes += 1
            self._version += 1
        self._note_end_probability(guess.text(self.lm.decode), self.state.next_logits)
        token = greedy_next(self.state)
        if token != self.lm.end_of_user_id and token not in self.lm.stop_ids:
            guess.tokens.append(token)
            if not ends_sentence(self.lm.decode(guess.tokens)) and len(guess.tokens) < self.config.anticipate_tokens:
                return
        self._guess = None
        self._adopt(guess.text(self.lm.decode))

    def _candidate_to_verify(self) -> list[int] | None:
        """predgen's reply so far (the pending greedy token included), or the held one."""
        if self.config.policy != "predgen":
            return None
        if self._held is not None:
            held, self._held = self._held, None
            return held
        return self._reply_ids + self._pending() if self._synced_prompt else None

    def _verify_against_new_transcript(self) -> None:
        """One pass over a changed prompt: predgen verifies its candidate reply against it
        and keeps the accepted prefix; the other policies (and a first partial) encode the
        prompt and start the reply afresh."""
        self._prompt_changed = False
        self.turn.rounds += 1
        self.state.watch, self.state.watched = self.lm.user_end(self._prompt), None
        self.state.answer_from(len(self._prompt), self._rule)
        candidate = self._candidate_to_verify()
        if candidate is not None:
            kept = verify_candidate(
                self.state,
                self._prompt,
                candidate,
                self.config.verifier,
                self._history_ngrams,
            )
            self._draft = candidate[kept + 1 :]  # the rejected tail seeds the next Jacobi block
            if self.turn.t_final is not None:
                self.turn.final_accepted, self.turn.final_candidate = kept, len(candidate)
        else:
            keep = self.state.sync_prefix(self._prompt)
            if keep < len(self._prompt):
                self.state.append(self._prompt[keep:])
            self._draft = []
        self._synced_prompt = self._prompt
        self._version += 1
        if self.state.watched is not None:
            self._note_end_probability(self._target_text, self.state.watched)
        self._update_finished()

    def _note_end_probability(self, user_text: str, logits) -> None:
        """Remember the model's probability that `user_text` is the whole message,
        read off a pass that was run anyway (it costs no pass of its own)."""
        self._end_scores[words(user_text)] = self.lm.end_of_user_probability(logits)

    def _end_probability_known(self) -> bool:
        return self._unscored is not None and words(self._unscored) in self._end_scores

    def _extend_candidate(self) -> None:
        """One decoding pass: a token (AR) or a block of guessed tokens (Jacobi)."""
        start = self.clock()
        if self.config.decoder == "jacobi":
            draft = self._draft or ngram_draft(self.state.tokens, self.config.jacobi_block - 1)
            result = jacobi_step(self.state, draft[: self.config.jacobi_block - 1], self.lm.stop_ids)
            self._draft = result.next_draft
            self.turn.jacobi_passes += 1
            self.turn.jacobi_tokens += len(result.accepted)
            self.turn.decode_tokens += len(result.accepted)
        else:
            ar_step(self.state)
            self.turn.decode_tokens += 1
        self.turn.decode_seconds += self.clock() - start
        self._version += 1
        self._update_finished()

    def _update_finished(self) -> None:
        stop = self.state.next_logits is not None and greedy_next(self.state) in self.lm.stop_ids
        cap = self.config.max_new_tokens
        capped = cap > 0 and len(self._reply_ids) >= cap
        if capped and len(self._reply_ids) > cap:  # speculation ran past the cap: drop the excess
            self.state.crop(len(self._synced_prompt) + cap)
        self._reply_complete = stop or capped

    def _reply_text(self, with_pending: bool = False) -> str:
        return self.lm.decode(self._reply_ids + (self._pending() if with_pending else []))

    def _first_sentence(self) -> tuple[str, int] | None:
        """(first sentence, its end in the reply text) if complete, else None."""
        if self._prompt_changed or not self._synced_prompt:
            return None
        if self._analysis is None or self._analysis[0] != self._version:
            self._analysis = (self._version, self._split_first_sentence())
        return self._analysis[1]

    def _split_first_sentence(self) -> tuple[str, int] | None:
        # Look at most one token past the cap, so the cut never depends on how
        # far a policy happened to speculate.
        cap = self.config.sentence.max_tokens
        reply = self._reply_ids if self._reply_complete else self._reply_ids + self._pending()
        ids = reply[: cap + 1]
        text = self.lm.decode(ids)
        whole = self._reply_complete and len(ids) == len(self._reply_ids)
        split = split_first_sentence(text, self.config.sentence, finished=whole)
        if split is not None:
            return split[0], len(text) - len(split[1])
        if len(ids) > cap:  # no sentence within the cap: its first `cap` tokens are one
            head = self.lm.decode(ids[:cap])
            return head.strip(), len(head)
        if self._reply_complete and not text.strip():
            return "", len(text)  # the model ended its reply at once
        return None

    def _sentence_ids(self, end: int) -> list[int]:
        """Shortest prefix of the reply tokens (plus the pending one) covering text[:end]."""
        if self._ids_memo is None or self._ids_memo[:2] != (self._version, end):
            ids = self._reply_ids + self._pending()
            n = next((n for n in range(1, len(ids) + 1) if len(self.lm.decode(ids[:n])) >= end), len(ids))
            self._ids_memo = (self._version, end, ids[:n])
        return self._ids_memo[2]

    def _wants_token(self) -> bool:
        if self._prompt_changed or not self._synced_prompt or self._reply_complete:
            return False
        if self.phase is not Phase.SPECULATING:
            return self.config.max_new_tokens > 0
        split = self._first_sentence()
        if split is None:
            return True
        if self.turn.t_end_of_turn is not None or self.config.policy != "predgen":
            return False  # commit now / wait for the end of turn
        after = len(self._reply_ids) - len(self._sentence_ids(split[1]))
        return after < self.config.margin_tokens

    def _ready_to_commit(self) -> bool:
        return self.phase is Phase.SPECULATING and self.turn.t_end_of_turn is not None and self._first_sentence() is not None

    def _emissions(self) -> list[tuple[str, str]]:
        out = self._end_probability_emission()
        if self.phase is Phase.SPECULATING:
            split = self._first_sentence()
            if split is None:
                return out
            if self.turn.t_end_of_turn is None:
                if split[0] != self._candidate:
                    self._candidate = split[0]
                    out.append((Emission.CANDIDATE, split[0]))
                return out
            self._commit_first_sentence(*split)
            out.append((Emission.COMMIT, split[0]))
        return out + self._continue_reply()

    def _end_probability_emission(self) -> list[tuple[str, str]]:
        """("end_probability", partial) once the latest partial's probability is known;
        the value is the last entry of `turn.end_probabilities`."""
        if not self._end_probability_known():
            return []
        heard, self._unscored = self._unscored, None
        self.turn.end_probabilities.append((heard, self._end_scores[words(heard)]))
        return [(Emission.END_PROBABILITY, heard)]

    def _commit_first_sentence(self, sentence: str, end: int) -> None:
        self.phase = Phase.SPEAKING
        self.turn.t_commit = self.clock()
        self.turn.first_sentence = sentence
        self.turn.first_sentence_ids = self._sentence_ids(end)
        self._spoken = end
        self._sentences = 1

    def _continue_reply(self) -> list[tuple[str, str]]:
        """Sentences after the first, as they complete; then the whole reply (it ends
        early after `max_sentences` sentences)."""
        if self.config.max_new_tokens == 0 or self.config.max_sentences == 1:
            return self._close_turn(self.turn.first_sentence)
        out = []
        text = self._reply_text(with_pending=not self._reply_complete)
        while split := split_first_sentence(text[self._spoken :], self.config.sentence, finished=self._reply_complete):
            if not split[0]:
                break
            out.append((Emission.SENTENCE, split[0]))
            self._spoken = len(text) - len(split[1])
            self._sentences += 1
            if self._sentences == self.config.max_sentences:
                return out + self._close_turn(text[: self._spoken].strip())
        if self._reply_complete:
            out += self._close_turn(text.strip())
        return out

    def _close_turn(self, reply: str) -> list[tuple[str, str]]:
        self.turn.reply = reply
        self.phase = Phase.DONE
        self._history.add(self.turn.user_text, reply)
        return [(Emission.DONE, reply)]
