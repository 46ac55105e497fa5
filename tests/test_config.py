import dataclasses
import hashlib
import inspect
import json
import math
import re
import time
import tracemalloc
import typing
from pathlib import Path

import pytest

from helpers import base_model, config, config_types, run
from helpers.config import ConfigError
from helpers.envs import available, settings
from helpers.envs.base import env_class
from helpers.rl_runs import train_recipe


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


BAD_VALUES = [
    ({"eval__n_samples": -1}, "eval.n_samples"),
    ({"eval__n_tasks": 0}, "eval.n_tasks"),
    ({"eval__ci": 2.0}, "eval.ci"),
    ({"eval__budget_fractions": []}, "eval.budget_fractions"),
    ({"sweep__t_fractions": [0, 2]}, "sweep.t_fractions"),
    ({"sweep__n_samples": 0}, "sweep.n_samples"),
    ({"sweep__pass_t_k": 100}, "sweep.pass_t_k"),
    ({"train__tasks_per_step": 0}, "train.tasks_per_step"),
    ({"train__minibatch_size": 0}, "train.minibatch_size"),
    ({"train__eval_every": 0}, "train.eval_every"),
    ({"train__ppo_epochs": -1}, "train.ppo_epochs"),
    ({"train__kl_coef": -5}, "train.kl_coef"),
    ({"train__seeds": []}, "train.seeds"),
    ({"train__seeds": [1, 1]}, "train.seeds"),
    ({"sft__batch_size": 0}, "sft.batch_size"),
    ({"sft__max_steps": -1}, "sft.max_steps"),
    ({"seed": -1}, "seed"),
    ({"model__tiny__hidden_size": 0}, "model.tiny.hidden_size"),
    ({"model__tiny__num_kv_heads": 0}, "model.tiny.num_kv_heads"),
    ({"model__tiny__num_kv_heads": 3}, "model.tiny.num_kv_heads"),
    ({"env__name": "nope"}, "env.name"),
    ({"env__extra": {"deepcoder": 3}}, "env.extra.deepcoder"),
    ({"env__extra": {"chess": {}}}, "env.extra"),
    ({"model__device": "tpu"}, "model.device"),
    ({"run__cell_timeout": -1}, "run.cell_timeout"),
    ({"probing__g": -3}, "probing.g"),
    ({"probing__depth_bins": [0.5, 0.25]}, "probing.depth_bins"),
]


@pytest.mark.parametrize(("override", "key"), BAD_VALUES)
def test_every_knob_declares_its_domain(override, key):
    """Each bad value fails at load with the key, the value and what is allowed."""
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as err:
        config.load("smoke", **override)
    assert "allowed" in str(err.value) or "expected" in str(err.value) or "known" in str(err.value)


def test_yaml_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 0\ntrain:\n  lr: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+:\d+: YAML syntax error"):
        config.load(bad)
    dup = tmp_path / "dup.yaml"
    dup.write_text("seed: 0\ntrain:\n  lr: 0.1\ntrain:\n  steps: 3\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml:4: key 'train' is given twice .*first on line 2"):
        config.load(dup)


def test_a_device_that_does_not_exist_fails_when_it_is_used():
    import torch

    from helpers import models

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError, match=r"model\.device is 'cuda'"):
        models.resolve_device("cuda")


# ------------------------------------------------------------------------------- issue 29: hardened loading


SMOKE = (config.CONFIG_DIR / "smoke.yaml").read_text()
# sha256 of to_dict(), the base's folder name and the hashes of the RL recipe's train and env parts of every profile
# and series, computed with the code of 839d5c0 (before the loader was hardened); tests/config_839d5c0.json.
BASELINE = json.loads((Path(__file__).parent / "config_839d5c0.json").read_text())
# Deliberate profile edits since 839d5c0, each named, with the hashes they gave (every other part stays pinned):
# 5303d3a, the smoke profile's BFCL series shows the function docs compact (`env.extra.bfcl.docs`): every smoke
# series' config (it holds the per_env blocks) and BFCL's environment settings; no base or RL recipe moved.
SINCE_839D5C0 = {
    "smoke/None": {"config": "18469360fc63d452e75dd1ad62fdc2eaeb3f78f13bc24e84748e105368135157"},
    "smoke/bfcl": {
        "config": "a60abc06f7870496c92ce6a17c118f303dcad29619f8bef90c28ddbc7437e8f4",
        "env_settings": "307702837400a273e2f90c2381a97cadfbc018aa8c5b3fd4e6d4240bd72a5fae",
    },
    "smoke/deepcoder": {"config": "0d5ce280f490640fa06740ba48daf8a7f818b1d879793c4d77f10434f3933103"},
    "smoke/frozenlake": {"config": "94ac5923d8dd4b073bf8d5d05f578fbb82fa209afa5f9b23c3d375b478591f94"},
    "smoke/intercode_sql": {"config": "c2bac30587be0ee4c3d671b625b50ce9338fac5fbaa654a0f14528587d1a6637"},
    # 2026-12-04 (issues 26/27), the cpu testbed: maps selected by their budget-awareness gap (env.frozenlake
    # select_min_gap 10, n_train 1000; so a new base and env settings), five RL seeds, sweep.n_samples 8; the RL
    # recipe's train part is unchanged. cpu_process mirrors cpu in every key but `process`.
    # 2026-12-05: eval.workers 2 in cpu and cpu_process (two models evaluated at once; layout only): every config
    # hash of both, nothing else.
    "cpu/None": {
        "config": "1946d13da58fa301d8a8bfa45b1adb507b3ba233c0ee4295dffe0009be47b22d",
        "base": "base-3ba8e4bb9e",
        "env_settings": "6a2fed089833f255314601bb776988afbe398d8440d69c6df1b403b5d1f8c7d1",
    },
    "cpu/bfcl": {
        "config": "3a9345816b2215086d54af74f9dc54b690bc6667e3ac2612a455f4c3e75b0a26",
        "base": "base-3ba8e4bb9e",
    },
    "cpu/deepcoder": {
        "config": "04541ddfc3037ceb07b74b712cb646dd598657d74cff09d0e72c5be1468966cf",
        "base": "base-3ba8e4bb9e",
    },
    "cpu/frozenlake": {
        "config": "6861cbb706355463d51728f1c93f2837ed3f506d9e895667c7e46d1819b3aeb6",
        "base": "base-3ba8e4bb9e",
        "env_settings": "6a2fed089833f255314601bb776988afbe398d8440d69c6df1b403b5d1f8c7d1",
    },
    "cpu/intercode_sql": {
        "config": "49f3e657c72f2b252dc4a8323eaa117ace0fb1734bc192fce135d63ad32a4d2a",
        "base": "base-3ba8e4bb9e",
    },
    "cpu_process/None": {
        "config": "8021530dca3247e76f65b61de668e399b3b7fea787ebef79a2ffc22ea4431d5f",
        "base": "base-3ba8e4bb9e",
        "env_settings": "6a2fed089833f255314601bb776988afbe398d8440d69c6df1b403b5d1f8c7d1",
    },
    "cpu_process/bfcl": {
        "config": "34785601bfc0a38471287a992353c943c80f7affaa749f56069b2c83fb8c1707",
        "base": "base-3ba8e4bb9e",
    },
    "cpu_process/deepcoder": {
        "config": "db714fd9d547bbb94d34d8665f9693839884f5006e9d9c852cb80a842b52acee",
        "base": "base-3ba8e4bb9e",
    },
    "cpu_process/frozenlake": {
        "config": "f664ea1fec4108aa578563ca12c956e6084c0c079421e47ff092849b6f00247b",
        "base": "base-3ba8e4bb9e",
        "env_settings": "6a2fed089833f255314601bb776988afbe398d8440d69c6df1b403b5d1f8c7d1",
    },
    "cpu_process/intercode_sql": {
        "config": "7e405553b7df9aa018049778efd61334c3061760abd7fc38b6cacb7a9363060c",
        "base": "base-3ba8e4bb9e",
    },
    # 2026-12-06 (issue 48), the gpu profile fits one 80 GB GPU by its memory plan: train.micro_batch_size 1 (so the
    # RL recipe's train part), model.max_model_len 6144, notebook 07 without PPO; no base or environment moved. Nothing
    # has run on the gpu profile, so no result hangs on the old hashes.
    "gpu/None": {
        "config": "c1c57aa906768a891f3bc44b99bc979a0fe6509a78edc82587c2aca7a31495ae",
        "train": "f9a8e3c0fd2b56ea75e753ddc6b1cd15c590cfa25f5e7484322fa574324bc4df",
    },
    "gpu/bfcl": {
        "config": "057eaabc42519de261d7286597fd6df55ddff9eef622b624b379c946ab8e3e87",
        "train": "f9a8e3c0fd2b56ea75e753ddc6b1cd15c590cfa25f5e7484322fa574324bc4df",
    },
    "gpu/deepcoder": {
        "config": "d64fdee004c06c9c481bc586a02ceea6ea175ecbaa149ecd721639b157274544",
        "train": "f9a8e3c0fd2b56ea75e753ddc6b1cd15c590cfa25f5e7484322fa574324bc4df",
    },
    "gpu/frozenlake": {
        "config": "f7710309e837f81204acbf341698276712d9389073ba351a155d566944bd0421",
        "train": "f9a8e3c0fd2b56ea75e753ddc6b1cd15c590cfa25f5e7484322fa574324bc4df",
    },
    "gpu/intercode_sql": {
        "config": "ffab0f4840383b7c3a2dd96f5db53656ee7ce5f28732ad0ef750b45b83c273de",
        "train": "f9a8e3c0fd2b56ea75e753ddc6b1cd15c590cfa25f5e7484322fa574324bc4df",
    },
}


# 2026-12-06 (issue 50): a quarter of the FrozenLake tasks are doorway maps (env.frozenlake.doorway_share 0.25 in cpu,
# cpu_process and smoke; smoke also doorway_min_gap 5) and notebook 02's supervised control has knobs in smoke
# (probing.control_*): every config hash of the three profiles, their bases (the demonstrations include doorway maps)
# and FrozenLake's environment settings; no RL recipe's train part moved.
ISSUE_50 = {
    "cpu/None": {
        "config": "a49abf763f233de1df5dbbc6008a460161f234a8498a554994c5e32c65dbb578",
        "base": "base-9fb8d3116f",
        "env_settings": "e2e1f573d158650997d29794d60cc2a387bf06b3e72703a4c639aeb8e80ced9f",
    },
    "cpu/bfcl": {
        "config": "c1ba40d582d686cb167999640f786e6da08c25eeacddb387767e51a34e729b8a",
        "base": "base-9fb8d3116f",
    },
    "cpu/deepcoder": {
        "config": "7052aca74286e37bd363b79b3af219f52666861885ed9cf4578de4445d151845",
        "base": "base-9fb8d3116f",
    },
    "cpu/frozenlake": {
        "config": "cbf75056e7883b86d3cdad5e93b49bb31c6100eb95f9ff10ebab367587a6f8a2",
        "base": "base-9fb8d3116f",
        "env_settings": "e2e1f573d158650997d29794d60cc2a387bf06b3e72703a4c639aeb8e80ced9f",
    },
    "cpu/intercode_sql": {
        "config": "7134205f6515b20e7eb55ccce399a52a37ff577aa3f40b004a91c49e1b2961d0",
        "base": "base-9fb8d3116f",
    },
    "cpu_process/None": {
        "config": "82f73d8f0c7a547ee6c6e2205bdfa639a7ab41e6ccadbb584ee90534684dddec",
        "base": "base-9fb8d3116f",
        "env_settings": "e2e1f573d158650997d29794d60cc2a387bf06b3e72703a4c639aeb8e80ced9f",
    },
    "cpu_process/bfcl": {
        "config": "4902cd6ff0af2b93c00455b21bee87f764ff6c61c1ffcd76e8c6093e2308c43f",
        "base": "base-9fb8d3116f",
    },
    "cpu_process/deepcoder": {
        "config": "6274f1b0d8f1b57078a8e08f1c8dae9fcd3ea659a960664cc71902f6aa37c83b",
        "base": "base-9fb8d3116f",
    },
    "cpu_process/frozenlake": {
        "config": "79820e119cb8d9af0df9b1d4f6ee97f09c5bcb5680867844b378a7ff40a408e5",
        "base": "base-9fb8d3116f",
        "env_settings": "e2e1f573d158650997d29794d60cc2a387bf06b3e72703a4c639aeb8e80ced9f",
    },
    "cpu_process/intercode_sql": {
        "config": "87242ad7844d65834eaca5aff8530854dff75bc2e2e2ecb425219d10d0a63007",
        "base": "base-9fb8d3116f",
    },
    "smoke/None": {
        "config": "895ea616e86dcf34dfe4449ea2487a13b2792b9bbccbd94ca38f5c61dd4b6492",
        "base": "base-ac317e3544",
        "env_settings": "94658763dde81ca3e149a53c5e6ca2aea64371d8862e037edad59644c25e7af0",
    },
    "smoke/bfcl": {
        "config": "747c6debeef071c8252893b69cf606d1dca42c0d91cbba5c44fa2980662e24d3",
        "base": "base-ac317e3544",
    },
    "smoke/deepcoder": {
        "config": "f999f1e92d7653a047c5fb23ba3872480918ae4d56090a30d1ec126636b6e960",
        "base": "base-ac317e3544",
    },
    "smoke/frozenlake": {
        "config": "8b091deeca707ecd4c5d94eb65d25a3a0cdd9a248918eca76a48c2c44313b9ad",
        "base": "base-ac317e3544",
        "env_settings": "94658763dde81ca3e149a53c5e6ca2aea64371d8862e037edad59644c25e7af0",
    },
    "smoke/intercode_sql": {
        "config": "34623706026370754bdccaee27a6e22962fff2cb44b9a7d952e5f16bb08dacfb",
        "base": "base-ac317e3544",
    },
}

# 2026-12-06 (issue 51): train.micro_batch_size 8 in cpu and cpu_process (the minibatch's gradient in micro-batches of
# 8 trajectories instead of 32: the same sum in another order, less padding): every config hash of both and the RL
# recipe's train part; no base or environment moved.
# 2026-12-07 (issue 51): the smoke profile's sweep at 1/8, 1/2 and all of T_max with eval's 2 samples per task (was
# 1/2 and all, 4 samples), so the smoke series reads the cells notebook 02 evaluated too (`pass_kt.shared_cells`):
# every smoke series' config hash, nothing else.
ISSUE_51 = {
    "smoke/None": {"config": "e5f9da04117aa6b32bd83be7b50528bd53fb095f715206c410d1a4704b43d818"},
    "smoke/bfcl": {"config": "ec0685c980a37a1d009811c048d4de37edafbe579462c680ab21ce7f34488a02"},
    "smoke/deepcoder": {"config": "510f20d22ff336c3e83b8bd5866e6e1c73fa20b5755efa0b8ece02be031242e3"},
    "smoke/frozenlake": {"config": "9974d2b129c85196294bb1fda4548ed99f9f952ab1ec40cc594a0909688b48b2"},
    "smoke/intercode_sql": {"config": "92480819af65f8a34ff3064152c65f3c29192e6e71f7748ccc8796ed82d462e0"},
    "cpu/None": {
        "config": "3409ff86f74dbda1af9801898fee6ffa1faa927a76c7543cdd6964ff7947c110",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu/bfcl": {
        "config": "d36d6f91cd48117ff095158a0eacd5a87b81de9b30feb47c3bf7f1f0d894e2f9",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu/deepcoder": {
        "config": "ec357468ad4827d5cfd4bb9383d4c594893b6c5a23ba56d444faa39d4b21c0f2",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu/frozenlake": {
        "config": "255c6859ee2cf5d5aecdaaef4498a4a50d04c5511364c4cb33495452d8ff1c03",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu/intercode_sql": {
        "config": "7e2b30b60404fea6eea774da59d44abeee687c7ea7b838fcfbff9c31f4ba6eb2",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu_process/None": {
        "config": "a9c8e3b3891cc3b410b27288a58eab2a2c543ab4791007407eb70dee86a856e1",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu_process/bfcl": {
        "config": "2ca07e31f36f813b7bcccb0d80f08f4c691eeb3770e6f08b71ea30d2dae70f7d",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu_process/deepcoder": {
        "config": "69ec67e4632c9638a238f784aed4bf0c79ec43798c03221dbe88a014e3447903",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu_process/frozenlake": {
        "config": "66b636fdf3fa672fc505ea45562710fe600dba6efbf5c2a402450b8ae9430044",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
    "cpu_process/intercode_sql": {
        "config": "6e4c40b8971a9ddad5a9a7eae68135037a805f225b963fd9e9c9dbdcf3a4a529",
        "train": "bd30a5741ca99179ee8798024024ea2fcdd21f169f2fb660508f2175ed3322a2",
    },
}


def _sha(x) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, default=str).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(BASELINE))
def test_every_profile_loads_to_the_config_it_loaded_to_at_839d5c0(name):
    """The hard constraint: hardening changed no valid profile (committed results and recipe hashes hang on it)."""
    profile, series = name.split("/")
    cfg = config.load(profile) if series == "None" else config.load(profile, series=series)
    got = {
        "config": _sha(cfg.to_dict()),
        "base": base_model.folder_name(cfg),
        "train": _sha(train_recipe(cfg)),
        "env_settings": _sha(settings(cfg)),
    }
    assert got == BASELINE[name] | SINCE_839D5C0.get(name, {}) | ISSUE_50.get(name, {}) | ISSUE_51.get(
        name, {}
    )


def _write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _line(text: str, needle: str) -> int:
    """1-based line of the first line of `text` containing `needle`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _laughs(levels: int) -> str:
    """The smoke profile with a nested-alias block in env.extra.deepcoder: 9 ** (levels + 1) values once expanded."""
    block = ["    deepcoder:", "      l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    block += [f"      l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "seed: 0\nenv:\n  name: frozenlake\n  extra:\n" + "\n".join(block) + "\n"


@pytest.mark.parametrize("levels", [6, 7])
def test_aliases_that_expand_past_the_bound_are_refused_at_once(tmp_path, levels):
    """Issue 29: a 554-byte aliased env.extra loaded, then every manifest's to_dict built 158 MB in 17 s (one level
    deeper: MemoryError). Now it is refused while the file is read, naming file, line and key, in a few MB."""
    text = _laughs(levels)
    text += "#" * max(0, 554 - len(text) - 1) + "\n"  # the issue's size
    assert len(text.encode()) >= 554
    path = _write(tmp_path, text)
    tracemalloc.start()
    t0 = time.process_time()
    try:
        with pytest.raises(
            ConfigError,
            match=r"p\.yaml:\d+: env\.extra\.deepcoder\.l\d\[\d\]: with its aliases "
            r"expanded the file holds more than 20000 values",
        ):
            config.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.process_time() - t0 < 5 and peak < 20 * 2**20


def test_small_aliases_and_merge_keys_work(tmp_path):
    """Issue 29: YAML merge keys were unusable (the duplicate-key check choked on `<<`). Anchors, aliases and merge
    keys load as YAML defines them (the mapping's own keys win over merged ones), and a key set twice besides a
    merge is still an error."""
    text = (
        SMOKE.replace("  seeds: [0, 1]\n", "  seeds: &seeds [0, 1]\n")
        .replace(
            "process:\n  algorithms: [grpo, gigpo, ppo, oracle_q]\n  seeds: [0]\n",
            "process:\n  algorithms: [grpo, gigpo, ppo, oracle_q]\n  seeds: *seeds\n",
        )
        .replace(
            "  t_fractions: [0.125, 0.5, 1.0]\n  n_samples: 2\n",
            "  <<: &sweep {t_fractions: [0.25, 1.0], n_samples: 3}\n  t_fractions: [0.125, 0.5, 1.0]\n"
            "  n_samples: 2\n",
        )
    )
    cfg = config.load(_write(tmp_path, text))
    assert (
        cfg.process.seeds == [0, 1]
        and cfg.sweep.t_fractions == [0.125, 0.5, 1.0]
        and cfg.sweep.n_samples == 2
    )
    merged = text.replace("  t_fractions: [0.125, 0.5, 1.0]\n  n_samples: 2\n", "")
    assert config.load(_write(tmp_path, merged, "m.yaml")).sweep.t_fractions == [0.25, 1.0]
    twice = text.replace(", 0.5, 1.0]\n  n_samples: 2\n", ", 0.5, 1.0]\n  n_samples: 2\n  n_samples: 5\n", 1)
    with pytest.raises(ConfigError, match=r"t\.yaml:\d+: key 'n_samples' is given twice"):
        config.load(_write(tmp_path, twice, "t.yaml"))


# (the smoke profile's line, its replacement, the key the error names): every non-finite value the issue names
NON_FINITE = [
    ("  lr: 1.0e-4\n", "  lr: .nan\n", "train.lr"),
    ("sampling:\n", "sampling:\n  top_p: .nan\n", "sampling.top_p"),
    ("sampling:\n", "sampling:\n  temperature: .inf\n", "sampling.temperature"),
    ("  n_bootstrap: 50\n", "  n_bootstrap: 50\n  ci: .nan\n", "eval.ci"),
    (
        "  budget_fractions: [0.25, 0.5, 0.75, 1.0]\n",
        "  budget_fractions: [0.25, .nan, 1.0]\n",
        "eval.budget_fractions[1]",
    ),
    (
        "  corruption_levels: [0.0, 1.0]\n",
        "  corruption_levels: [0.0, .nan]\n",
        "process.corruption_levels[1]",
    ),
    ("  lr: 1.0e-4\n", "  lr: 1.0e-4\n  oracle_corruption: .nan\n", "train.oracle_corruption"),
    ("  lr: 1.0e-4\n", "  lr: 1.0e-4\n  gigpo_gamma: .nan\n", "train.gigpo_gamma"),
    ("  lr: 1.0e-4\n", "  lr: 1.0e+999\n", "train.lr"),  # YAML 1.1 floats need the exponent's sign
    ("  lr: 1.0e-4\n", "  lr: -.inf\n", "train.lr"),
]


@pytest.mark.parametrize(("old", "new", "key"), NON_FINITE)
def test_non_finite_numbers_are_refused_with_file_line_and_key(tmp_path, old, new, key):
    text = SMOKE.replace(old, new, 1)
    assert text != SMOKE
    line = _line(text, new.strip().splitlines()[-1])
    with pytest.raises(ConfigError, match=rf"p\.yaml:{line}: {re.escape(key)}: .* is not a finite number"):
        config.load(_write(tmp_path, text))


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 10**400])
def test_non_finite_overrides_are_refused(value):
    with pytest.raises(ConfigError, match=r"overrides: train\.lr: .* is not a finite number"):
        config.load("smoke", train__lr=value)
    with pytest.raises(ConfigError, match=r"overrides: eval\.budget_fractions\[0\]: .* not a finite number"):
        config.load("smoke", eval={"budget_fractions": [value, 1.0]})


def test_the_runners_p_values_cannot_smuggle_infinity():
    """`-p train.lr=1e999` reads as a Python literal: float('inf'). It reaches config.load as an override."""
    params = run.notebook_params([run.parse_param("train.lr=1e999")], {"profile", "overrides"})
    assert params["overrides"] == {"train": {"lr": math.inf}}
    with pytest.raises(ConfigError, match=r"train\.lr: inf is not a finite number"):
        config.load("smoke", **params["overrides"])


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"seed": 10**30}, "seed"),
        ({"train__seeds": [0, 10**30]}, r"train\.seeds\[1\]"),
        ({"sft__seed": 2**31}, r"sft\.seed"),
        ({"train__steps": 2**63}, r"train\.steps"),
    ],
)
def test_integers_have_an_upper_bound(override, key):
    """Issue 29: `seed: 10**30` loaded and failed later in torch; every integer knob is at most 2**31 - 1."""
    with pytest.raises(ConfigError, match=rf"{key}: .* is out of range; allowed: integers up to 2\*\*31 - 1"):
        config.load("smoke", **override)
    assert config.load("smoke", seed=config.INT_MAX).seed == config.INT_MAX  # the bound itself is allowed


def test_an_integer_too_long_for_any_knob_names_its_line(tmp_path):
    text = SMOKE.replace("seed: 0\n", f"seed: {10**30}\n")
    with pytest.raises(
        ConfigError, match=rf"p\.yaml:{_line(text, 'seed: 1')}: seed: an integer of 31 digits is out"
    ):
        config.load(_write(tmp_path, text))
    text = SMOKE.replace("seed: 0\n", f"seed: {10**20}\n")  # short enough to read, too large for a knob
    with pytest.raises(ConfigError, match=rf"p\.yaml:{_line(text, 'seed: 1')}: seed: .* is out of range"):
        config.load(_write(tmp_path, text))


# env.extra: each environment's settings are checked like a section (issue 29: they failed later in load_tasks)
EXTRA = [
    (
        "deepcoder: {t_max: 3, max_tests: 3}",
        "deepcoder: {t_max: 0, max_tests: 3}",
        r"env\.extra\.deepcoder\.t_max: 0 is out of range",
    ),
    (
        "deepcoder: {t_max: 3, max_tests: 3}",
        "deepcoder: {tmax: 3, max_tests: 3}",
        r"unknown key 'env\.extra\.deepcoder\.tmax'; did you mean 'env\.extra\.deepcoder\.t_max'",
    ),
    (
        "deepcoder: {t_max: 3, max_tests: 3}",
        "deepcoder: {t_max: 3, max_tests: 3, source: hug}",
        r"env\.extra\.deepcoder\.source: 'hug' is not one of \['bundled', 'hub'\]",
    ),
    (
        "deepcoder: {t_max: 3, max_tests: 3}",
        "deepcoder: {t_max: 3, sets: [kit, mbpp]}",
        r"env\.extra\.deepcoder\.sets\[1\]: 'mbpp' is not one of",
    ),
    (
        "deepcoder: {t_max: 3, max_tests: 3}",
        "deepcoder: {t_max: 3.5}",
        r"env\.extra\.deepcoder\.t_max: expected an integer",
    ),
    (
        "deepcoder: {t_max: 3, max_tests: 3}",
        "deepcoder: {t_max: 3, max_tests: 3, protocol: hidden}",
        r"env\.extra\.deepcoder\.protocol: 'hidden' is not one of \['paper', 'held_out'\]",
    ),
    (
        "bfcl: {category: multi_turn_base, turns_per_request: 1, docs: compact}",
        "bfcl: {category: multi_turn, turns_per_request: 1, docs: compact}",
        r"env\.extra\.bfcl\.category: 'multi_turn' is not one of",
    ),
    (
        "bfcl: {category: multi_turn_base, turns_per_request: 1, docs: compact}",
        "bfcl: {source: hub, turns_per_request: 1, docs: compact}",
        r"env\.extra\.bfcl\.source: 'hub' is not one of \['bundled'\]",
    ),
    (
        "intercode_sql: {t_max: 4}",
        "intercode_sql: {t_max: -4}",
        r"env\.extra\.intercode_sql\.t_max: -4 is out of range",
    ),
    (
        "intercode_sql: {t_max: 4}",
        "intercode_sql: {t_max: 4, source: hub, tasks_file: x.json}",
        r"env\.extra\.intercode_sql\.tasks_file: applies to source 'bundled'",
    ),
    (
        "intercode_sql: {t_max: 4}",
        "intercode_sql: 4",
        r"env\.extra\.intercode_sql: expected a mapping of settings",
    ),
]


@pytest.mark.parametrize(("old", "new", "match"), EXTRA)
def test_env_extra_is_validated_with_file_line_and_key(tmp_path, old, new, match):
    text = SMOKE.replace(old, new)
    assert text != SMOKE
    with pytest.raises(ConfigError, match=rf"p\.yaml:{_line(text, new)}: per_env\.\w+: {match}"):
        config.load(_write(tmp_path, text))


def test_env_extra_top_level_and_overrides_are_validated_too(tmp_path):
    gpu = (config.CONFIG_DIR / "gpu.yaml").read_text()
    text = gpu.replace(
        "bfcl: {category: multi_turn_base, turns_per_request: 4}",
        "bfcl: {category: multi_turn_base, turns_per_request: 0}",
    )
    with pytest.raises(
        ConfigError,
        match=rf"p\.yaml:{_line(text, 'turns_per_request: 0')}: env\.extra\.bfcl\."
        r"turns_per_request: 0 is out of range",
    ):
        config.load(_write(tmp_path, text))
    with pytest.raises(
        ConfigError, match=r"overrides: env\.extra\.frozenlake: .*the section env\.frozenlake"
    ):
        config.load("smoke", env={"extra": {"frozenlake": {"size": 4}}})
    with pytest.raises(ConfigError, match=r"overrides: env\.extra\.deepcoder\.max_tests: 0 is out of range"):
        config.load("smoke", series="deepcoder", env={"extra": {"deepcoder": {"max_tests": 0}}})
    # only the keys given are kept (so settings(cfg), and every recipe hashing it, is what the profile says)
    cfg = config.load("smoke", series="deepcoder", env={"extra": {"deepcoder": {"sets": ("kit",)}}})
    assert cfg.env.extra["deepcoder"] == {"t_max": 3, "max_tests": 3, "sets": ["kit"]}


def test_the_deepcoder_protocol_is_a_knob_that_only_deepcoder_reports(tmp_path):
    """Issue 29: `env.extra.deepcoder.protocol` chooses DeepCoder-MT's protocol ('paper' where it is left out, so
    every profile's recipes stay as they were: the 839d5c0 baseline above); it is what `Config.reported` returns on
    DeepCoder-MT, and nothing on FrozenLake. A bad value names file, line and key, or the overrides."""
    assert config.load("smoke", series="deepcoder").reported() == {"protocol": "paper"}
    assert config.load("cpu").reported() == {}
    # BFCL reports how its prompt shows the function docs (compact in the smoke profile only)
    assert config.load("gpu", series="bfcl").reported() == {"docs": "full"}
    assert config.load("smoke", series="bfcl").reported() == {"docs": "compact"}
    text = SMOKE.replace(
        "deepcoder: {t_max: 3, max_tests: 3}", "deepcoder: {t_max: 3, max_tests: 3, protocol: held_out}"
    )
    held = config.load(_write(tmp_path, text), series="deepcoder")
    assert held.reported() == {"protocol": "held_out"}
    assert settings(held) == {"t_max": 3, "max_tests": 3, "protocol": "held_out"}  # so the RL recipes differ
    on_cpu = config.load("cpu", env={"extra": {"deepcoder": {"protocol": "held_out"}}})
    # a FrozenLake profile reports nothing, but notebook 07 on process.env = deepcoder reports its protocol
    assert on_cpu.reported() == {} and on_cpu.reported("deepcoder") == {"protocol": "held_out"}
    with pytest.raises(
        ConfigError, match=r"overrides: env\.extra\.deepcoder\.protocol: 'HELD_OUT' is not one of"
    ):
        config.load("smoke", series="deepcoder", env__extra={"deepcoder": {"protocol": "HELD_OUT"}})
    with pytest.raises(ConfigError, match=r"overrides: env\.extra\.deepcoder\.protocol: None is not one of"):
        config.load("smoke", series="deepcoder", env__extra={"deepcoder": {"protocol": None}})


@pytest.mark.parametrize(("env", "schema"), sorted(config.ENV_SETTINGS.items()))
def test_env_settings_sections_match_each_load_tasks(env, schema):
    """A section declares exactly the keyword arguments of its environment's load_tasks, with the same defaults."""
    try:
        cls = env_class(env)
    except ImportError as e:  # pragma: no cover - an environment's optional dependency is missing
        pytest.skip(f"{env}: {e}")
    params = inspect.signature(cls.load_tasks).parameters
    kwargs = {n: p.default for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    kwargs["source"] = params["source"].default
    hints = typing.get_type_hints(schema)
    declared = {
        f.name: config_types._coerce(hints[f.name], getattr(schema(), f.name), f.name)
        for f in dataclasses.fields(schema)
    }
    normalised = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
    assert declared == normalised
    assert env in available()


KEYS = [
    ("deepcoder: {t_max: 3, max_tests: 3}", "deepcoder: {[a, b]: 3, max_tests: 3}", "a key that is a list"),
    ("deepcoder: {t_max: 3, max_tests: 3}", "deepcoder: {1: 3, t_max: 3}", "key '1'"),
    ("deepcoder: {t_max: 3, max_tests: 3}", "deepcoder: {{a: 1}: 3}", "a key that is a mapping"),
    ("  n_bootstrap: 50\n", "  n_bootstrap: 50\n  yes: 1\n", "key 'yes'"),
    ("  n_bootstrap: 50\n", "  n_bootstrap: 50\n  ~: 1\n", "key '~'"),
]


@pytest.mark.parametrize(("old", "new", "what"), KEYS)
def test_keys_that_are_not_names_are_refused_with_file_and_line(tmp_path, old, new, what):
    """Issue 29: unhashable and mixed-type keys gave a raw TypeError without file or line."""
    text = SMOKE.replace(old, new)
    with pytest.raises(
        ConfigError,
        match=rf"p\.yaml:{_line(text, new.strip().splitlines()[-1])}: {re.escape(what)} under \S+ is not",
    ):
        config.load(_write(tmp_path, text))


def test_override_keys_that_are_not_names_are_refused():
    with pytest.raises(ConfigError, match=r"overrides\.env\.extra\.deepcoder: key 1 is not a name"):
        config.load("smoke", env={"extra": {"deepcoder": {1: 3, "t_max": 3}}})
    with pytest.raises(ConfigError, match=r"key \('a', 'b'\) is not a name"):
        config.load("smoke", env={"extra": {"deepcoder": {("a", "b"): 3}}})


def test_ten_thousand_deep_nesting_is_refused_with_file_and_line(tmp_path):
    """Issue 29: 10,000-deep nesting gave a raw RecursionError without file or line."""
    flow = SMOKE.replace(
        "deepcoder: {t_max: 3, max_tests: 3}", "deepcoder: {t_max: " + "[" * 10_000 + "]" * 10_000 + "}"
    )
    with pytest.raises(
        ConfigError,
        match=rf"p\.yaml:{_line(flow, '[[[')}: per_env\.deepcoder\.env\.extra\."
        r"deepcoder\.t_max\[0\].*: nested more than 32 levels",
    ):
        config.load(_write(tmp_path, flow))
    mapping = "seed: 0\nenv:\n  extra:\n    deepcoder: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n"
    with pytest.raises(
        ConfigError, match=r"m\.yaml:4: env\.extra\.deepcoder(\.a)+( \.\.\.)?: nested more than 32 levels"
    ):
        config.load(_write(tmp_path, mapping, "m.yaml"))
    block = (
        "seed: 0\nenv:\n  extra:\n" + "".join(" " * (i + 2) + f"k{i}:\n" for i in range(2, 40)) + "    x: 1\n"
    )
    with pytest.raises(
        ConfigError, match=r"b\.yaml:\d+: env\.extra\.k2\.k3\S*( \.\.\.)?: nested more than 32 levels"
    ):
        config.load(_write(tmp_path, block, "b.yaml"))
    deep: dict = {}
    node = deep
    for _ in range(10_000):
        node = node.setdefault("a", {})
    with pytest.raises(ConfigError, match=r"overrides\.env\.extra(\.a)+: nested more than 32 levels"):
        config.load("smoke", env={"extra": deep})


def test_a_recursive_alias_is_refused_with_file_line_and_key(tmp_path):
    text = SMOKE.replace("  seeds: [0, 1]\n", "  seeds: &s [0, *s]\n")
    with pytest.raises(
        ConfigError, match=rf"p\.yaml:{_line(text, '&s')}: train\.seeds\[1\]: alias \*s refers"
    ):
        config.load(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("  group_size: 4\n", "  group_size: 0\n"),
        ("\ntrain:\n", "\ntrian:\n"),
        ("  lr: 1.0e-4\n", "  lr: fast\n"),
        ("  pass_t_k: 2\n", "  pass_t_k: 20\n"),
    ],
)
def test_top_level_mistakes_are_not_blamed_on_a_per_env_block(tmp_path, old, new):
    """Issue 29: a mistake at the top of a profile with per_env blocks was reported as `per_env.deepcoder: ...`."""
    text = SMOKE.replace(old, new)
    with pytest.raises(ConfigError, match=rf"^\S*p\.yaml:{_line(text, new.strip())}: ") as err:
        config.load(_write(tmp_path, text))
    assert "per_env." not in str(err.value)  # (the list of known keys names the section per_env)


def test_errors_outside_the_file_name_the_override_or_the_section(tmp_path):
    with pytest.raises(ConfigError, match=r"^overrides: train\.critic_warmup: 10 is out of range"):
        config.load("smoke", train__critic_warmup=10)
    text = SMOKE.replace("  steps: 3\n", "  steps: 3\n  critic_warmup: 5\n")
    with pytest.raises(
        ConfigError, match=rf"p\.yaml:{_line(text, 'critic_warmup')}: train\.critic_warmup: 5"
    ):
        config.load(_write(tmp_path, text))
    with pytest.raises(ConfigError, match=r"^overrides: train\.critic_warmup: 5 is out of range"):
        config.load("cpu", train={"steps": 4, "critic_warmup": 5})


@pytest.mark.parametrize(
    "override",
    [{"model__device": "cuda:²"}, {"model__device": "cuda:٣"}, {"run__skip": ["٠٧"]}, {"run__skip": ["0²"]}],
)
def test_digits_are_ascii_digits(override):
    """Issue 29: str.isdigit() let 'cuda:²' through (torch cannot read it)."""
    with pytest.raises(ConfigError, match=r"ASCII digits"):
        config.load("smoke", **override)
    assert config.load("smoke", model__device="cuda:1").model.device == "cuda:1"


@pytest.mark.parametrize(
    "name", ["smoke/models", "cpu/deepcoder", "..", ".hidden", "a b", "", "x" * 65, "ćpu"]
)
def test_a_profile_name_cannot_point_into_another_profiles_folder(tmp_path, name):
    """Issue 29: `profile: smoke/models` named another profile's models folder, which `--fresh` then set aside."""
    text = f"profile: {json.dumps(name)}\n" + SMOKE
    with pytest.raises(ConfigError, match=r"p\.yaml:1: profile: .* is not a profile name"):
        config.load(_write(tmp_path, text))


def test_yaml_problems_of_every_kind_are_config_errors(tmp_path):
    for text, match in [
        (SMOKE + "---\nseed: 1\n", r"p\.yaml:\d+:\d+: YAML syntax error: but found another document"),
        (
            SMOKE.replace("seed: 0\n", "seed: !!python/object:os.system 0\n"),
            r"p\.yaml:\d+:\d+: YAML syntax error",
        ),
        (
            SMOKE.replace("seed: 0\n", "seed: *nope\n"),
            r"p\.yaml:\d+:\d+: YAML syntax error: found undefined alias",
        ),
        ("- 1\n- 2\n", r"p\.yaml:1: a profile must be a mapping"),
    ]:
        with pytest.raises(ConfigError, match=match):
            config.load(_write(tmp_path, text))
    (tmp_path / "p.yaml").write_bytes(b"seed: \xff\n")
    with pytest.raises(ConfigError, match=r"p\.yaml: not UTF-8 text"):
        config.load(tmp_path / "p.yaml")


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (
            {"tasks_file": "../../etc/passwd"},
            r"tasks_file: '\.\./\.\./etc/passwd' is outside the kit's data folders",
        ),
        (
            {"tasks_file": "/etc/passwd"},
            r"tasks_file: '/etc/passwd' is outside the kit's data folders .*KIT_DATA",
        ),
        ({"tasks_file": "data/../../x.json"}, r"is outside the kit's data folders"),
        ({"tasks_file": "x\0.json"}, r"tasks_file: .* is not a path \(it holds a NUL character\)"),
        ({"test_dbs": ["../../etc/passwd"]}, r"test_dbs\[0\]: '\.\./\.\./etc/passwd' is not a database name"),
        ({"test_dbs": ["pets_1", "/tmp/x"]}, r"test_dbs\[1\]: '/tmp/x' is not a database name"),
    ],
    ids=["relative-escape", "absolute", "dotdot-inside", "nul", "db-path", "db-absolute"],
)
def test_env_extra_paths_are_confined_to_the_data_folders(extra, match):
    """Issue 52: intercode_sql's `test_dbs` and `tasks_file` accepted any path; now a database is a name and a task
    file lies in the kit's data folders, or the profile (or `-p`) is refused naming the key."""
    with pytest.raises(ConfigError, match=match):
        config.load("smoke", env={"extra": {"intercode_sql": extra}})


def test_a_task_file_in_a_folder_listed_in_kit_data_is_accepted(tmp_path, monkeypatch):
    path = tmp_path / "tasks.json"
    with pytest.raises(ConfigError, match="outside the kit's data folders"):
        config.load("smoke", env={"extra": {"intercode_sql": {"tasks_file": str(path)}}})
    monkeypatch.setenv(config.DATA_ENV, str(tmp_path))
    cfg = config.load("smoke", env={"extra": {"intercode_sql": {"tasks_file": str(path)}}})
    assert cfg.env.extra["intercode_sql"]["tasks_file"] == str(path)
    (tmp_path / "link.json").symlink_to("/etc/passwd")  # a link out of a data folder is followed, and refused
    with pytest.raises(ConfigError, match="outside the kit's data folders"):
        config.load("smoke", env={"extra": {"intercode_sql": {"tasks_file": str(tmp_path / "link.json")}}})
