"""The PredGen engine: no ROS, no audio. See session.py for the entry point."""

from .lm import SYSTEM_PROMPT, KVState, LanguageModel
from .models import ModelError, load_pretrained
from .sentences import SentenceRules, split_first_sentence
from .session import DECODERS, POLICIES, VERIFIERS, ConfigError, EngineConfig, Session, TurnStats

__all__ = [
    "LanguageModel",
    "KVState",
    "SYSTEM_PROMPT",
    "ModelError",
    "load_pretrained",
    "SentenceRules",
    "split_first_sentence",
    "ConfigError",
    "EngineConfig",
    "Session",
    "TurnStats",
    "POLICIES",
    "VERIFIERS",
    "DECODERS",
]
