"""Code that runs in the training interpreter (the driver's own for the embedded trainer,
prime-rl's venv for prime-rl), where the `driver` package may not be installed.

Every file here is run by path (`call.py`, `worker_server.py`, `run_module.py`) or imported by
plain name as a sibling of `call.py` (`classic`, `taskset`, `interpreter`, `rows`,
`fingerprint`): none imports `driver.*`, and each uses only the standard library plus what its job needs (verifiers,
datasets). The driver imports `fingerprint` too, so the eval split is hashed by one copy of the
code on both sides. The driver's typed client is driver/envs/envside.py.
"""
