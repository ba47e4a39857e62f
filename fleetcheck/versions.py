"""PEP 440 versions on the controller, through packaging: the one place text becomes a
Version (expectations, version suggestions, metadata agreement), parsed once per text."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=256)
def pep440(text: str | None) -> Any:
    """A packaging Version, or None where the text is not one (imported on first use:
    packaging costs ~20 ms of start-up that `fleetcheck --version` need not pay)."""
    from packaging.version import InvalidVersion, Version
    try:
        return Version(text) if isinstance(text, str) else None
    except InvalidVersion:
        return None
