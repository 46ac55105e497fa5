"""The JSON Schema of a profile (helpers.config_schema): it takes every committed profile and refuses what
`load` refuses by type or domain."""

import dataclasses
import json

import jsonschema
import pytest

from helpers import config, config_schema


@pytest.fixture(scope="module")
def validator():
    schema = config_schema.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", sorted(config.CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_profile_fits_the_schema(validator, path):
    assert list(validator.iter_errors(config.read_yaml(path))) == []


def test_the_schema_declares_every_knob():
    props = config_schema.schema()["properties"]
    assert set(props) == {f.name for f in dataclasses.fields(config.Config)}
    assert set(props["train"]["properties"]) == {f.name for f in dataclasses.fields(config.TrainConfig)}
    assert set(props["env"]["properties"]["extra"]["properties"]) == set(config.ENV_SETTINGS)
    lr = props["train"]["properties"]["lr"]
    assert lr == {"type": "number", "exclusiveMinimum": 0.0, "default": 1e-4}
    assert (
        props["train"]["properties"]["group_size"]["description"]
        == "G trajectories per task (16 in the paper)"
    )


@pytest.mark.parametrize(
    "profile",
    [
        {"train": {"lrr": 1e-4}},  # a typo
        {"train": {"lr": 0.0}},  # out of range
        {"train": {"seeds": []}},  # an empty list
        {"train": {"group_size": 2.5}},  # a float for an int
        {"train": {"norm_by_std": "yes"}},  # a string for a bool
        {"seed": 2**31},  # past INT_MAX
        {"model": {"dtype": "float64"}},  # not one of the Literal's values
        {"env": {"extra": {"deepcoder": {"protocol": "other"}}}},
        {"env": {"extra": {"frozenlake": {}}}},  # FrozenLake's settings are env.frozenlake
        {"per_env": {"nowhere": {}}},  # not an environment
    ],
)
def test_the_schema_refuses_what_load_refuses(validator, profile):
    assert list(validator.iter_errors(profile)) != []
    with pytest.raises(config.ConfigError):
        config.load("smoke", **profile)


def test_the_command_writes_the_schema(tmp_path, capsys):
    config_schema.main(["--out", str(tmp_path / "profile.schema.json")])
    assert json.loads((tmp_path / "profile.schema.json").read_text()) == config_schema.schema()
    config_schema.main([])
    assert json.loads(capsys.readouterr().out) == config_schema.schema()
