"""The embedded trainer: prime-rl's classic `rl` contract, run in one CPU (or single-GPU)
process. `python -m embedded_trainer.rl @ a.toml @ b.toml --max-steps N --output-dir OUT`.

Rollouts and rewards go through verifiers (the env's own parser and rubric); the update is GRPO
with a clipped surrogate on behaviour log-probs captured at sampling. See rl.py, top to bottom.
"""
