"""Pack integrity digests: parsing what a user writes, computing and printing ours.

A pack's integrity is the SHA-256 of its manifest's exact bytes. The manifest binds every
other file of the pack through its ``files`` map (path → ``sha256:`` digest of that file), so
one digest covers the whole pack: the canonical form of a pack is its manifest plus the
files it declares, each named by its digest.

Accepted spellings: ``sha256:<64 lowercase hex>`` (ours and the original's, always printed)
and the Subresource-Integrity form ``sha256-<base64 of the 32 digest bytes>``.

Invariant: pure; a malformed value raises ``ValueError`` naming the accepted forms.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

_HEX_RE = re.compile(r"^sha256:([0-9a-f]{64})\Z")
_SRI_RE = re.compile(r"^sha256-([A-Za-z0-9+/]{43}=)\Z")
FORMS = "sha256:<64 lowercase hex> or sha256-<base64>"


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def normalize_integrity(text: str) -> str:
    """The ``sha256:<hex>`` form of a written integrity value; ``ValueError`` if malformed."""
    match = _HEX_RE.match(text)
    if match is not None:
        return text
    sri = _SRI_RE.match(text)
    if sri is not None:
        try:
            raw = base64.b64decode(sri.group(1), validate=True)
        except binascii.Error:
            raw = b""
        if len(raw) == 32:
            return "sha256:" + raw.hex()
    raise ValueError(f"integrity {text!r} is not a SHA-256 digest ({FORMS})")
