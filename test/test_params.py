"""config/predgen.yaml and the dotted parameter names map onto the engine."""

from pathlib import Path

import pytest

from predgen_ros.engine.config import SYSTEM_PROMPT
from predgen_ros.engine.params import ENGINE_PARAMS, engine_config, read_params_file
from predgen_ros.engine.session import ConfigError, EngineConfig

CONFIG = Path(__file__).resolve().parents[1] / "config" / "predgen.yaml"


def test_shipped_yaml_is_complete_and_known():
    params = read_params_file(CONFIG)
    assert set(params) == set(ENGINE_PARAMS)


def test_defaults_agree_with_the_engine():
    config, model = engine_config({})
    assert config == EngineConfig()
    assert (model.path, model.device, model.dtype) == (None, "auto", "auto")


def test_values_reach_the_engine_config():
    config, model = engine_config(
        {"verifier.kind": "topk", "decoder.kind": "jacobi", "sentence.min_chars": 5, "model.device": "cpu"}
    )
    assert (
        config.verifier.rank_limit == 3
        and config.decoder == "jacobi"
        and config.sentence.min_chars == 5
        and model.device == "cpu"
    )
    minp, _ = engine_config({"verifier.kind": "minp", "verifier.min_p": 0.25})
    assert minp.verifier.rank_limit is None and abs(minp.verifier.gap_limit - 1.3863) < 1e-4  # -ln 0.25


def test_a_typo_in_the_yaml_is_named(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text(CONFIG.read_text().replace("jacobi_block", "jacoby_block"))
    with pytest.raises(ConfigError, match="decoder.jacoby_block"):
        read_params_file(bad)


def test_a_file_without_the_node_section_is_named(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("other_node:\n  ros__parameters: {}\n")
    with pytest.raises(ConfigError, match="predgen_node"):
        read_params_file(bad)


def test_the_system_prompt_reaches_the_model_params_and_an_empty_one_is_named():
    assert read_params_file(CONFIG)["model.system_prompt"] == SYSTEM_PROMPT  # the YAML shows the built-in prompt
    _, model = engine_config({"model.system_prompt": "  You are a kitchen robot.  "})
    assert model.system_prompt == "You are a kitchen robot."
    with pytest.raises(ConfigError, match="model.system_prompt"):
        engine_config({"model.system_prompt": " "})
