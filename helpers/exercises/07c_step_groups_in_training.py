import pandas as pd

from helpers import config, supervision

conf = config.load(profile)
gigpo_x = [r for r in supervision.grid(conf) if r.algorithm == "gigpo"]
logged = pd.concat([pd.DataFrame(r.logs()).assign(method=r.name) for r in gigpo_x])
logged = logged.dropna(subset=["step_singleton_share"])
print("GiGPO's logged step groups per RL step (every step's batch, as trained in the notebook)")
print(
    logged.pivot_table(index="step", columns="method", values=["step_singleton_share", "success"])
    .round(3)
    .to_string()
)
