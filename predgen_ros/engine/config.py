"""The engine's settings and the errors a wrong setting or model raises.

Kept free of torch, so the command line and the nodes' parameter checks can
name what is wrong without loading the inference stack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .sentences import SentenceRules

POLICIES = ("baseline", "preemptive", "predgen")
VERIFIERS = ("exact", "topk", "margin", "minp")
DECODERS = ("ar", "jacobi")
BACKENDS = ("auto", "llama_cpp", "transformers", "sglang", "openai")  # the last two: a served model (engine/backends/served.py)
FALLBACKS = ("notice", "local")
# What the robot says when its served model fails mid-turn and model.server.fallback is notice.
SERVER_NOTICE = "Sorry, I cannot think right now. Please ask me again in a moment."  # a served model that fails mid-turn: a spoken notice, or the robot's own model
# The embedded model's weight formats for llama.cpp, as llama_ftype numbers (None: the
# file as shipped).  F16 is the default: its batched passes pick the same argmax as its
# 1-token passes at all but ~1 in 1,000 positions, so the exact verifier commits what
# baseline decodes; Q4_1 and Q8_0 part at ~1 in 40 (docs/results/passes.md).
WEIGHTS = {"f16": 1, "q8_0": 7, "q4_1": None}

# What the model is told before the conversation (parameter model.system_prompt).
SYSTEM_PROMPT = (
    "You are a helpful robot that answers spoken questions. The user is still talking, "
    "so the request may be cut off mid-sentence; answer what they are asking. "
    "Start with a short, direct first sentence."
)


class ConfigError(ValueError):
    """An invalid engine setting; the message names it and the allowed values."""


# The setting each verifier kind's `=VALUE` sets, and how to read it.
_VALUE_FIELD = {"topk": ("k", int), "margin": ("margin", float), "minp": ("min_p", float)}


@dataclass(frozen=True)
class VerifierRule:
    kind: str = "exact"  # lossless; in a conversation still several times faster (docs/results/conversations.md)
    k: int = 3  # topk: a kept token ranks within the top K
    # Rank alone lets an early guess answer a later question (docs/design.md#how-it-works):
    max_gap: float = 1.0  # topk: nats a kept runner-up may lie below the most likely token (inf: the paper)
    margin: float = 0.25  # margin: nats a kept token may lie below the most likely token, any rank
    min_p: float = 0.5  # minp: a kept token has at least this share of the top token's probability
    exact_head: int = 1  # all but exact: the reply's first tokens must be the most likely one
    copy_guard: bool = True  # all but exact: a runner-up token may not copy an earlier reply

    def __post_init__(self):
        if self.kind not in VERIFIERS:
            raise ConfigError(f"unknown verifier {self.kind!r}: choose one of {', '.join(VERIFIERS)}")
        if self.k < 1:
            raise ConfigError(f"verifier.k must be >= 1, got {self.k}")
        if not self.max_gap > 0:
            raise ConfigError(f"verifier.max_gap must be > 0 nats, got {self.max_gap}")
        if not self.margin > 0:
            raise ConfigError(f"verifier.margin must be > 0 nats, got {self.margin}")
        if not 0 < self.min_p <= 1:
            raise ConfigError(f"verifier.min_p must lie in (0, 1], got {self.min_p}")
        if self.exact_head < 0:
            raise ConfigError(f"verifier.exact_head must be >= 0, got {self.exact_head}")

    @classmethod
    def parse(cls, spec: str, base: VerifierRule | None = None) -> VerifierRule:
        """`exact`, `topk=3`, `margin=0.25` (nats) or `minp=0.5`; the settings not named come from `base`."""
        kind, _, value = spec.strip().partition("=")
        if kind not in VERIFIERS:
            raise ConfigError(
                f"unknown verifier {kind!r} in {spec!r}: write KIND[=VALUE] with KIND one of {', '.join(VERIFIERS)}"
            )
        changes = {"kind": kind}
        if value:
            if kind not in _VALUE_FIELD:
                raise ConfigError(f"{spec!r}: the exact verifier takes no value")
            name, cast = _VALUE_FIELD[kind]
            try:
                changes[name] = cast(value)
            except ValueError:
                raise ConfigError(f"{spec!r}: {value!r} is not a valid {name}") from None
        return replace(base or cls(), **changes)

    @property
    def lossless(self) -> bool:
        """Commits exactly the model's greedy reply to the final transcript."""
        return self.kind == "exact"

    @property
    def rank_limit(self) -> int | None:
        """A kept token's highest rank; None: any rank (margin and min-p limit the gap only)."""
        return {"exact": 1, "topk": self.k}.get(self.kind)

    @property
    def gap_limit(self) -> float:
        """Nats a kept runner-up may lie below the top token (min-p's floor p is a gap of -ln p)."""
        return {"exact": 0.0, "topk": self.max_gap, "margin": self.margin, "minp": -math.log(self.min_p)}[self.kind]

    def describe(self) -> str:
        rule = {
            "exact": "exact",
            "topk": f"topk K={self.k} max-gap={self.max_gap:g}",
            "margin": f"margin {self.margin:g} nats",
            "minp": f"minp p={self.min_p:g}",
        }[self.kind]
        return rule if self.lossless else f"{rule} exact-head={self.exact_head} copy-guard={self.copy_guard}"

    def meta(self) -> dict:
        """The settings under the keys of a run's summary.json."""
        return {
            "verifier": self.kind,
            "k": self.k,
            "max_gap": self.max_gap,
            "margin": self.margin,
            "min_p": self.min_p,
            "exact_head": self.exact_head,
            "copy_guard": self.copy_guard,
        }


@dataclass(frozen=True)
class EngineConfig:
    policy: str = "predgen"
    verifier: VerifierRule = field(default_factory=VerifierRule)  # or its spec: "exact", "topk=3"
    decoder: str = "ar"
    copy_ban: int = 4  # tokens: a reply never completes a run this long of an earlier reply in the prompt (0: plain greedy)
    copy_ban_opening: int = (
        2  # tokens: a reply does not begin as an earlier reply in the prompt began (0: off; docs/results/conversations.md)
    )
    copy_ban_user: bool = False  # the copy ban also covers the user's words: the reply does not echo the request
    jacobi_block: int = 8  # tokens per Jacobi iteration (1 exact + guesses)
    margin_tokens: int = 2  # speculate this far past the first sentence
    max_new_tokens: int = 256  # whole reply; 0 = stop after the first sentence
    max_sentences: int = 2  # a robot answers briefly: the reply ends after this many sentences (0: no limit)
    history_tokens: int = 1024  # earlier turns kept in the prompt (a long prompt slows every pass)
    history_turns: int = 1  # the turn before: enough for a "yes, please", too little to copy (0: as many as history_tokens holds)
    anticipate: bool = True  # predgen: speculate on the model's guess of the sentence's end (docs/results/anticipation.md#recommendation-the-exact-verifier-with-anticipation-the-default)
    anticipate_tokens: int = 12  # at most this many tokens of guessed user text
    sentence: SentenceRules = field(default_factory=SentenceRules)

    def __post_init__(self):
        if isinstance(self.verifier, str):
            object.__setattr__(self, "verifier", VerifierRule.parse(self.verifier))
        for name, value, allowed in (
            ("policy", self.policy, POLICIES),
            ("decoder", self.decoder, DECODERS),
        ):
            if value not in allowed:
                raise ConfigError(f"unknown {name} {value!r}: choose one of {', '.join(allowed)}")
        if self.copy_ban == 1 or self.copy_ban < 0:
            raise ConfigError(
                f"copy_ban is a run length of at least 2 tokens, or 0 for plain greedy decoding; got {self.copy_ban}"
            )
        if self.copy_ban_opening < 0:
            raise ConfigError(f"copy_ban_opening is a number of tokens >= 0 (0: off), got {self.copy_ban_opening}")
        if self.jacobi_block < 1:
            raise ConfigError(f"jacobi_block must be >= 1, got {self.jacobi_block}")
        if self.anticipate_tokens < 1:
            raise ConfigError(f"anticipate_tokens must be >= 1, got {self.anticipate_tokens}")
        if self.max_sentences < 0:
            raise ConfigError(f"max_sentences must be >= 0 (0: no limit), got {self.max_sentences}")
        if self.history_tokens < 0:
            raise ConfigError(f"history_tokens must be >= 0 (0 keeps no history), got {self.history_tokens}")
        if self.history_turns < 0:
            raise ConfigError(f"history_turns must be >= 0 (0: no limit but history_tokens), got {self.history_turns}")


class ModelError(RuntimeError):
    """A model that cannot be found or loaded; the message says how to fix it."""
