"""prime-rl's `rl` contract as both of its sides read it: the driver, which composes a launch's
arguments and reads what the trainer wrote, and the trainers that stand in for prime-rl (the
embedded trainer, the test double), which compose the same arguments and write the same
layout. Each side imports this package; neither imports the other.

- `composition`: `@ a.toml @ b.toml --x.y-z V` -> one config dict, as prime-rl composes it.
- `classic`: the classic generation's output layout (where checkpoints, weights and rollout
  rows live) and how a rollout's reward reads as pass or fail.
- `current`: the current generation's run directory, and its trace episodes read as flat rows.
- `steps`: the step_N directories both layouts share.
"""
