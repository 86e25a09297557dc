"""Everything that differs between library generations sits behind one small interface.

The rest of the driver asks `get(run.json's dialect)` for one and never branches on versions.
"""
from driver.dialects.classic import ClassicDialect

DIALECTS = {"classic": ClassicDialect}


def get(name: str):
    try:
        return DIALECTS[name]()
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; known: {', '.join(DIALECTS)}") from None
