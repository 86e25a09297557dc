"""synthetic-self-improve-rl: a teacher/student self-improvement loop for RL post-training."""
__version__ = "0.1.0"
