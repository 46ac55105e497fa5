from helpers import config, store

conf = config.load(profile)
scored = store.Run.read_table(conf.results_name, "06_likelihood_analysis", "action_nll")
scored["source"] = scored["actions_of"].str.replace(r"-s\d+$", "", regex=True)  # grpo-s0 .. -> grpo
by_turn = scored.pivot_table(index="turn", columns="source", values="nll_mean", aggfunc=["mean", "size"])
print("Per-token NLL under the base policy of each source's actions, by turn (mean, and how many actions)")
print(by_turn.round(3).to_string())
