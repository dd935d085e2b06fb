"""What `bench` and `frontier` share: the questions, the settings, the loaded model and
voice, one benchmark run over several settings, and the run's metadata."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...audio.speech.pieces import FIRST_WORDS


@dataclass
class BenchJob:
    questions: list
    config: object  # EngineConfig
    endpoint_delay: float
    model_params: object  # ModelParams
    conversation: bool = False
    turns: tuple[int, ...] = (1,)
    max_chars: int | None = None
    tts_first_words: int = FIRST_WORDS  # 0 = whole first sentences (audio/speech/pieces.py)
    lm: object = None
    tts: object = None

    def load(self) -> BenchJob:
        from ...audio.speech.tts import PiperSynthesizer
        from ...engine.models import load_language_model

        self.lm, self.tts = load_language_model(self.model_params), PiperSynthesizer(first_words=self.tts_first_words)
        return self

    def run(self, variants: dict, chars_per_minute: float, desc: str = "bench"):
        """One benchmark of `variants` (label -> config): records, summary, duration buckets,
        and each variant's differences from baseline with their logit gaps."""
        from tqdm import tqdm

        from .. import records
        from ..conversation import score_answers
        from . import bench

        settings = bench.BenchSettings(variants, chars_per_minute / 60.0, self.endpoint_delay, self.conversation)
        labels = list(variants)
        with tqdm(total=len(self.questions) * len(labels), desc=desc, unit="turn") as bar:
            rows = bench.run_bench(self.lm, self.tts, self.questions, settings, progress=lambda q, p: bar.update())
        with tqdm(total=len(self.questions), desc="relevance", unit="question") as bar:
            score_answers(rows, {q.qid: q.text for q in self.questions}, self.lm, progress=bar.update)
        summary = records.summarize(rows, labels)
        by_duration = records.summarize_by_duration(rows, labels)
        ties = {label: bench.near_tie_report(rows, self.lm, label) for label in labels if label != "baseline"}
        return rows, summary, by_duration, ties

    def meta(self, **extra) -> dict:
        config = self.config
        return {
            "questions": len(self.questions),
            **config.verifier.meta(),
            "anticipate": config.anticipate,
            "anticipate_tokens": config.anticipate_tokens,
            "decoder": config.decoder,
            "jacobi_block": config.jacobi_block,
            "copy_ban": config.copy_ban,
            "copy_ban_user": config.copy_ban_user,
            "copy_ban_opening": config.copy_ban_opening,
            "history_turns": config.history_turns,
            "endpoint_delay_s": self.endpoint_delay,
            "conversation": self.conversation,
            "history_tokens": config.history_tokens,
            "max_new_tokens": config.max_new_tokens,
            "max_sentences": config.max_sentences,
            "turn": list(self.turns),
            "max_chars": self.max_chars,
            "tts_first_words": self.tts_first_words,
            "model": self.model_params.path or "smollm2-135m-instruct",
            **self.lm.backend.describe(),
            "system_prompt": self.lm.system_prompt,
            **extra,
        }


def questions_of_turns(path, limit: int | None, turns: list[int]) -> list:
    """The questions of each MT-Bench turn asked; with both, a turn-2 id gets the suffix ".2"."""
    from .questions import load_questions

    questions = []
    for turn in turns:
        loaded = load_questions(path, limit, turn)
        questions += loaded if len(turns) == 1 or turn == 1 else [replace(q, qid=f"{q.qid}.2") for q in loaded]
    return questions
