import pytest

from helpers import config
from helpers.config import ConfigError


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu", "paper"])
def test_every_profile_loads(profile):
    cfg = config.load(profile)
    assert cfg.profile == profile
    assert cfg.env.frozenlake.t_max >= 1


def test_overrides_nested_and_double_underscore():
    assert config.load("smoke", train={"lr": 0.5}).train.lr == 0.5
    assert config.load("smoke", train__lr=0.25).train.lr == 0.25
    assert config.load("smoke", seed=7).seed == 7


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match=r"train\.lrr"):
        config.load("smoke", train__lrr=1.0)
    with pytest.raises(ConfigError, match="bogus"):
        config.load("smoke", bogus=1)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"train__lr": "fast"}, "train.lr"),
        ({"train__steps": 2.5}, "train.steps"),
        ({"env__frozenlake__is_slippery": "yes"}, "env.frozenlake.is_slippery"),
        ({"model__backend": "tensorrt"}, "model.backend"),
        ({"eval__budget_fractions": [0.5, 1.5]}, "eval.budget_fractions"),
        ({"env__frozenlake__hole_p": 0.95}, "env.frozenlake.hole_p"),
        ({"train": 3}, "train"),
    ],
)
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        config.load("smoke", **override)


def test_unknown_profile():
    with pytest.raises(ConfigError, match="unknown profile"):
        config.load("nope")
