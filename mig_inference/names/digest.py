"""Short, stable content hashes for names and label values that must change with their content."""

from __future__ import annotations


def short_hash(text: str, length: int) -> str:
    """The first `length` hex digits of the SHA-256 of `text`."""
    # Imported here: hashlib loads OpenSSL (about 3 ms), and `pack`, which imports this module
    # through the mig-parted names, never hashes.
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:length]
