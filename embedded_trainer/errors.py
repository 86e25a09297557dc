class TrainerError(Exception):
    """A failure with a message that says what to do next; the entrypoint prints it and exits 1."""
