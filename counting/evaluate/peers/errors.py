"""Why a peer could not run (an optional dependency is missing)."""

from __future__ import annotations

from counting.core.errors import CountingError


class PeerUnavailable(CountingError):
    """A comparison method cannot run here; the message says why (shown in its table row)."""
