"""Errors the CLI turns into exit codes. Every message says what to do next."""


class DriverError(Exception):
    """A failure the user can act on. exit_code follows `driver --help`."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(DriverError):
    """Bad flags or bad input: exit code 2."""

    def __init__(self, message: str):
        super().__init__(message, exit_code=2)


class ArmAborted(DriverError):
    """prime-rl ended an arm on a rule of its own (its zero-advantage filter found nothing to
    train on), with its reason: the arm is recorded as such and never retrained as it was."""

    def __init__(self, arm: str, reason: str):
        super().__init__(f"[{arm}] prime-rl aborted the arm: {reason}")
        self.arm, self.reason = arm, reason


class ControlSkipped(DriverError):
    """A control that is not run, and why (no evaluated iteration to compare with; no rows that
    could answer its question): recorded and said in the summary, never read as a failure."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class CostCapReached(DriverError):
    """A launch (or a control's launches) not submitted: what the run has spent, with its
    estimated cost, would take the run past --max-cost. In the loop it ends the loop
    (cost_exhausted); a control is recorded as skipped with the reason."""

    def __init__(self, arm: str, what: str, reason: str):
        super().__init__(f"[{arm}] {what} not submitted: {reason}")
        self.arm, self.what, self.reason = arm, what, reason


class StillRunning(DriverError):
    """A launch the driver could not confirm stopped: nothing else may be launched beside it, so
    the driver stops instead of moving on to the next arm (a failed arm is recorded and the loop
    goes on; this ends the command). The message names the launch and how to stop it."""


class WaitingForTeacher(Exception):
    """The agent teacher has been briefed; the driver stops with exit code 3."""

    def __init__(self, brief_path):
        super().__init__(str(brief_path))
        self.brief_path = brief_path


def os_error_advice(e: OSError) -> str:
    """What to do after an OSError stopped the driver (a full disk, a vanished mount): every
    file is written atomically, so what was written is intact and resuming repeats the step."""
    import errno

    what = "free some space" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "fix the cause"
    return f"Files already written are intact (every write is atomic); {what}, then"
