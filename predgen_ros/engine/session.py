"""The dialogue session: timed transcript events in, sentences out.

A driver (the benchmark's virtual clock, or the ROS node's worker thread)
feeds the user's turn events (`hear`, turn_events.py) and `end_of_turn`, and calls
`step()` while `has_work()`.  Each step runs at most ONE forward pass, so a newer transcript
interrupts work within one pass.  Steps return emissions, (Emission, text) pairs
(events.py): a candidate first sentence while the user speaks, the committed
first sentence at the end of turn, the following sentences, the whole reply, and
each partial's end-of-turn probability once it is known.

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
two turns.  Which events are news (not sent again, not stale) is decided ahead of
the session by engine/transcript_order.py; that the user went on after an early
final is the ear's word (`reopened`).  When the user goes on, the turn listens again and
its candidate is verified against the longer question like any rewrite; the cut question and
its reply stay in the history as the user heard them (tts/played cuts the reply, marked).

The paper's terms and the methods that implement them: docs/design.md#the-papers-terms-in-the-code.

A turn's phase (Phase) is SPECULATING until its first sentence is committed,
SPEAKING while the rest of the reply is decoded, then DONE.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..turn_events import ENDINGS, TurnEvent, TurnKind
from ..turn_taking import CUT_OFF_MARK
from .anticipate import Anticipation, Guess, ends_sentence
from .config import DECODERS, POLICIES, VERIFIERS, ConfigError, EngineConfig  # noqa: F401 (a session is made from these)
from .copy_ban import CopyBan, reply_rule
from .decode import extend_step, greedy_next
from .end_scores import EndScores
from .history import History
from .lm import KVState, LanguageModel
from .reply import SentenceReader
from .session_output import SessionOutput
from .transcript_order import Arrival, TranscriptOrder
from .turn import Phase, TurnStats
from .verify import reply_ngrams, verify_candidate

log = logging.getLogger(__name__)


class Session(SessionOutput):
    """One dialogue: multi-turn history, a KV cache, and one policy."""

    def __init__(self, lm: LanguageModel, config: EngineConfig, clock: Callable[[], float]):
        self.lm = lm
        self.config = config
        self.clock = clock
        self.state = KVState(lm)
        self._history = History(lm, config.history_turns, config.history_tokens)
        self._order = TranscriptOrder()
        self._withdrawn_unheard = False  # the history's newest exchange is a withdrawn reply tts_node has not reported on
        self._start_turn()

    @property
    def history(self) -> list[tuple[str, str]]:
        """The earlier (user text, reply) turns the next prompt may hold, oldest first."""
        return self._history.turns

    # ---------------------------------------------------------------- events
    def hear(self, event: TurnEvent, t: float) -> bool:
        """One of the user's turn events (turn_events.py), arriving at `t`.  False when it
        was not news (a copy, stale, or no words)."""
        arrival = self._order.take(event)
        if arrival in (Arrival.EMPTY, Arrival.COPY):
            return False
        if event.kind is TurnKind.TEXT:
            self._words(" ".join(event.text.split()), t, arrival)
        elif event.kind in ENDINGS:
            self._final(" ".join(event.text.split()), t, str(event.utterance), event.stamp, arrival)
        return True

    def _words(self, text: str, t: float, arrival: Arrival) -> None:
        """The full current hypothesis of the utterance (may rewrite or shrink)."""
        if arrival is Arrival.CONTINUES:
            self._reopen_turn()
        elif self.turn.t_end_of_turn is not None:
            self._finish_turn()  # the user speaks again: a new turn begins
        if self.turn.t_first_partial is None:
            self.turn.t_first_partial = t
        self._latest = text
        self._end_scores.heard(text)
        if self.config.anticipate and self.config.policy == "predgen" and self.turn.t_final is None:
            self._anticipate(text)  # guess the sentence's end, until the final
        elif self.config.policy != "baseline":
            self._set_target(text)

    def _anticipate(self, heard: str) -> None:
        """Target the anticipated question: keep it while the words follow it, take a
        complete sentence as it is, otherwise guess its end anew."""
        if self._ahead.follows(heard, self.lm.decode):
            return  # keep the target, or let the guess being decoded finish
        if ends_sentence(heard):
            self._ahead.guess = None
            self._adopt(heard)
        else:
            self._start_guess(heard)

    def _adopt(self, anticipated: str) -> None:
        self._ahead.anticipated = self.turn.anticipated = anticipated
        self._set_target(anticipated)

    def _reopen_turn(self) -> None:
        """The turn listens again after an early final; the cache and its candidate
        stay, to be verified against the longer question.  A reply already begun was said
        to the cut question: the history keeps that exchange, cut to what the user heard
        once tts_node reports it (`reply_heard`, before or after this).  A reply the user
        heard none of leaves no exchange: the whole question, answered next, holds its
        words, and a bare cut-off mark in the history is copied by the model."""
        begun, heard = self.phase is not Phase.SPECULATING, self.turn.heard_reply
        if self.phase is Phase.SPEAKING:
            self._keep_exchange(self._reply_text())
        if begun and heard == CUT_OFF_MARK:
            self._history.drop_last()
        self._withdrawn_unheard = begun and heard is None  # until tts_node says how much was played
        t_first_partial, prompt, synced = self.turn.t_first_partial, self._prompt, self._synced_prompt
        self._start_turn()
        self.turn.t_first_partial = t_first_partial
        self._prompt, self._synced_prompt = prompt, synced

    def _final(self, text: str, t: float, utterance: str | None, t_speech_end: float | None, arrival: Arrival) -> None:
        """The utterance's final words (`utterance`: its number, `t_speech_end`: the end of
        its voiced audio, when known)."""
        if arrival is Arrival.CONTINUES:
            self._reopen_turn()  # the words that went on after an early final, with no partial before them
        elif self.turn.t_end_of_turn is not None:
            self._finish_turn()
        self._latest = text
        self.turn.user_text = text
        self.turn.t_final = t
        self.turn.utterance = utterance
        self.turn.t_speech_end = t_speech_end
        self._ahead.guess, self._ahead.anticipated = None, ""  # the words are known now
        self._end_scores.heard(None)  # the end of turn is decided: no more estimates of it
        if self.config.policy != "baseline":
            self._set_target(text)

    def end_of_turn(self, t: float) -> None:
        """The robot may speak from now on."""
        if not self._latest or self.turn.t_end_of_turn is not None:
            return
        if self.turn.t_final is None:
            self._final(self._latest, t, None, None, Arrival.NEWS)
        self.turn.t_end_of_turn = t
        self._set_target(self.turn.user_text)

    def reply_heard(self, heard: str) -> None:
        """What the user heard of a reply they cut off (tts_node): the history keeps that.
        The turn that said it may still be open, or a newer one may already be built on it."""
        if self.phase is not Phase.SPECULATING:
            self.turn.heard_reply = heard  # kept when the turn ends, or dropped if it reopens unheard
        if self.phase is Phase.SPEAKING:
            return
        if self._withdrawn_unheard and heard == CUT_OFF_MARK:
            self._history.drop_last()  # the withdrawn reply was never heard: see _reopen_turn
        else:
            self._history.hear_last(heard)
        self._withdrawn_unheard = False
        if self.phase is Phase.SPECULATING and self._target_text and self._ahead.guess is None:
            self._set_target(self._target_text)  # the prompt holds the history: rebuild it

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
            self._ahead.guess is not None
            or self._prompt_changed
            or self._wants_token()
            or self._ready_to_commit()
            or self._end_scores.known()
        )

    def step(self) -> list[tuple[str, str]]:
        """At most one forward pass, then the emissions it made possible."""
        start = self.clock()
        passes = self.lm.stats.passes
        if self._ahead.guess is not None:
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
        self._prompt: list[int] = []  # the prompt we should be answering
        self._synced_prompt: list[int] = []  # the prompt the cache currently starts with
        self.phase = Phase.SPECULATING
        self._prompt_changed = False  # the prompt changed since the cache was verified against it
        self._reply_complete = False  # the reply reached a stop token or its length cap
        self._reader = SentenceReader(self.lm.decode, self.config.sentence, self.config.max_sentences)
        self._candidate = ""
        self._begun = ""  # the first sentence's words last emitted as its beginning
        self._draft: list[int] = []
        self._version = 0  # bumped by every change of the cache
        self._ahead = Anticipation(self.config.anticipate_tokens)
        self._target_text = ""  # the user text the prompt holds
        self._end_scores = EndScores()
        guarded = self._history.reply_ids if self.config.verifier.copy_guard else []
        self._history_ngrams = reply_ngrams(guarded)  # what a runner-up token may not copy
        self._rule: CopyBan | None = None  # the decoding rule for the target prompt (set with it)

    def _finish_turn(self) -> None:
        if self.phase is Phase.SPEAKING:  # interrupted: keep what was said
            self._keep_exchange(self._reply_text())
        self._start_turn()

    def _keep_exchange(self, reply: str) -> None:
        """The history keeps this turn's exchange, the reply as the user heard it if they
        cut it off."""
        self._history.add(self.turn.user_text, self.turn.heard_reply or reply)
        self._withdrawn_unheard = False

    def _set_target(self, text: str) -> None:
        self._target_text = text
        prompt = self._history.prompt_ids(text)
        if prompt != self._prompt:
            self._prompt = prompt
            user = self.lm.encode_reply(text) if self.config.copy_ban_user else None  # the copy ban's sources
            c = self.config  # the decoding rule for this prompt, set before the pass that verifies against it
            self._rule = reply_rule(self._history.reply_ids, user, c.copy_ban, c.copy_ban_opening)
            self._prompt_changed = True
            self.turn.prompt_ids = prompt
            self.turn.history_turns = len(self._history)
            self.turn.previous_reply = self._history.turns[-1][1] if self._history.turns else ""

    @property
    def _reply_ids(self) -> list[int]:
        return self.state.tokens[len(self._synced_prompt) :]

    def _start_guess(self, heard: str) -> None:
        """Continue the user's text from `heard`; the cache leaves the reply, so the
        candidate is held aside until the guess becomes the target."""
        if self._ahead.held is None and self._synced_prompt:
            self._ahead.held = self._reply_ids + self.state.pending()
        self._ahead.guess = Guess(heard, self._history.open_turn_ids(heard))
        self._ahead.anticipated = ""
        self._prompt, self._synced_prompt = [], []
        self._prompt_changed = False
        self._version += 1

    def _continue_guess(self) -> None:
        """One pass of the guess; it ends at the end-of-message token, the end of a
        sentence or `anticipate_tokens`, and its text becomes the target."""
        guess = self._ahead.guess
        self.state.answer_from(None, None)  # the user's words: no decoding rule
        keep = self.state.sync_prefix(guess.ids)
        if keep < len(guess.ids):  # else the cache holds the guess and its logits already (a partial came back)
            self.state.append(guess.ids[keep:])
            self.turn.guess_passes += 1
            self._version += 1
        self._note_end_probability(guess.text(self.lm.decode), self.state.next_logits)
        ends = {self.lm.end_of_user_id, *self.lm.stop_ids}
        if (anticipated := self._ahead.take(greedy_next(self.state), self.lm.decode, ends)) is not None:
            self._adopt(anticipated)

    def _candidate_to_verify(self) -> list[int] | None:
        """predgen's reply so far (the pending greedy token included), or the held one."""
        if self.config.policy != "predgen":
            return None
        if self._ahead.held is not None:
            held, self._ahead.held = self._ahead.held, None
            return held
        return self._reply_ids + self.state.pending() if self._synced_prompt else None

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
        """The probability that `user_text` is the whole message, from a pass run anyway."""
        self._end_scores.note(user_text, self.lm.end_of_user_probability(logits))

    def _extend_candidate(self) -> None:
        """One decoding pass: a token (AR) or a block of guessed tokens (Jacobi)."""
        start = self.clock()
        result = extend_step(self.state, self.config.decoder, self.config.jacobi_block, self._draft, self.lm.stop_ids)
        self._draft = result.next_draft
        if self.config.decoder == "jacobi":
            self.turn.jacobi_passes += 1
            self.turn.jacobi_tokens += len(result.accepted)
        self.turn.decode_tokens += len(result.accepted)
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
        return self.phase is Phase.SPECULATING and self._may_speak() and self._first_sentence() is not None

    def _may_speak(self) -> bool:
        """The turn has ended, and the user did not go on after its final (`reopened`): a
        reply to the cut question would begin over them; their words, or "confirmed", decide."""
        return self.turn.t_end_of_turn is not None and not self._order.awaiting_continuation
