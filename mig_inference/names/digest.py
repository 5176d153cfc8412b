"""Short, stable content hashes for names and label values that must change with their content."""

from __future__ import annotations

import hashlib


def short_hash(text: str, length: int) -> str:
    """The first `length` hex digits of the SHA-256 of `text`."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]
