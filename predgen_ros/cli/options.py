"""What every command family shares: the one-line parser, the list types, the engine's
options generated from its parameter table, and the checks of common arguments."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..engine.config import BACKENDS, DECODERS, FALLBACKS, POLICIES, VERIFIERS, WEIGHTS, ConfigError
from ..engine.params import ENGINE_PARAMS

# The command-line name of each engine parameter a command exposes.  Type, default and
# help come from ENGINE_PARAMS, so an option cannot drift from the parameter it sets.
ENGINE_OPTIONS = {
    "verifier.kind": "--verifier",
    "verifier.k": "--k",
    "verifier.max_gap": "--max-gap",
    "verifier.margin": "--margin",
    "verifier.min_p": "--min-p",
    "verifier.exact_head": "--exact-head",
    "verifier.copy_guard": "--copy-guard",
    "decoder.kind": "--decoder",
    "decoder.jacobi_block": "--jacobi-block",
    "decoder.copy_ban": "--copy-ban",
    "decoder.copy_ban_user": "--copy-ban-user",
    "decoder.copy_ban_opening": "--copy-ban-opening",
    "generation.max_sentences": "--max-sentences",
}
MODEL_OPTIONS = {
    "model.path": "--model",
    "model.backend": "--backend",
    "model.weights": "--weights",
    "model.threads": "--threads",
    "model.device": "--device",
    "model.dtype": "--dtype",
    "model.system_prompt": "--system-prompt",
    "model.gpu_layers": "--gpu-layers",
    "model.server.url": "--server-url",
    "model.server.model": "--server-model",
    "model.server.token_ids": "--server-token-ids",
    "model.server.timeout_s": "--server-timeout",
    "model.server.fallback": "--server-fallback",
}
CHOICES = {
    "verifier.kind": VERIFIERS,
    "decoder.kind": DECODERS,
    "model.backend": BACKENDS,
    "model.weights": tuple(WEIGHTS),
    "model.server.fallback": FALLBACKS,
}


class OneLineParser(argparse.ArgumentParser):
    """Usage mistakes are reported as one line, like every other error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def policy_list(text: str) -> list[str]:
    policies = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise argparse.ArgumentTypeError(f"unknown policy {', '.join(unknown) or text!r}: choose from {', '.join(POLICIES)}")
    return policies


def comma_list(cast):
    def parse(text: str) -> list:
        try:
            values = [cast(item.strip()) for item in text.split(",") if item.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {cast.__name__}, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {cast.__name__}, got {text!r}")
        return values

    return parse


def assignment(text: str) -> tuple[str, object]:
    import yaml

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), yaml.safe_load(value) if value.strip() else ""


def add_param_options(parser: argparse.ArgumentParser, options: dict[str, str]) -> None:
    """One option per engine parameter in `options` (parameter -> option name); its value
    lands under the parameter's own name and stays None unless given."""
    for name, flag in options.items():
        default, description = ENGINE_PARAMS[name]
        shown = "embedded" if name == "model.path" else ("config" if name == "model.system_prompt" else default)
        kwargs = {"dest": name, "default": None, "help": f"{description} (default {shown})"}
        if isinstance(default, bool):
            kwargs["action"] = argparse.BooleanOptionalAction
        elif name in CHOICES:
            kwargs["choices"] = CHOICES[name]
        else:
            kwargs.update(type=type(default), metavar=flag.lstrip("-").upper().replace("-", "_"))
        parser.add_argument(flag, **kwargs)


def given_params(args: argparse.Namespace, options: dict[str, str]) -> dict:
    """The engine parameters given on the command line."""
    return {name: getattr(args, name) for name in options if getattr(args, name, None) is not None}


def add_out_option(parser: argparse.ArgumentParser, default: str, what: str) -> None:
    """--out, the folder a command writes `what` to (`default` when not given)."""
    parser.add_argument("--out", type=Path, default=Path(default), help=f"{what} go here (default {default})")


def add_set_option(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", type=assignment, help=help)


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {limit}")


def params_file_or_default(path: Path | None) -> Path:
    """The parameter file given, or the package's config/predgen.yaml; it must exist."""
    from ..nodes.bringup import default_params_file

    params_file = path or default_params_file()
    if not params_file.is_file():
        raise ConfigError(f"parameter file not found: {params_file} (give --params)")
    return params_file


def add_asr_backend_option(parser) -> None:
    """`--asr-backend`: the recognizer that hears replayed audio (audio/recognition/recognizers.py)."""
    from ..audio.recognition.recognizers import DEFAULT_RECOGNIZER, RECOGNIZERS

    parser.add_argument(
        "--asr-backend",
        choices=tuple(RECOGNIZERS),
        default=DEFAULT_RECOGNIZER,
        help=f"the recognizer that hears the audio (default {DEFAULT_RECOGNIZER})",
    )
