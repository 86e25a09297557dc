"""StockArithmetic's taskset form with a canary string planted in every eval (test and
validation) task's prompt and answer (tests only).

Anything the driver hands a teacher, writes in a report or prints must never contain CANARY;
only the trainer's own eval trace files may.
"""
from stock_arithmetic.taskset import StockArithmeticTaskset

CANARY = "CANARY-3c9f41d2-sealed-taskset-eval"


class CanaryTaskset(StockArithmeticTaskset):
    def load(self):
        for task in super().load():
            if self.config.split != "train":
                task.data = task.data.model_copy(update={
                    "prompt": f"{task.data.prompt} [{CANARY}]",
                    "answer": f"{task.data.answer} {CANARY}"})
            yield task


__all__ = ["CanaryTaskset"]
