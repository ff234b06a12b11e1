"""A list of names for a one-line note or error: the first few, then how many more.

The planner's notes and errors, the fleet analysis's notes and the trace fit's errors use it; it
imports nothing of the project, so any layer may.
"""

from __future__ import annotations

from collections.abc import Sequence


def named_few(names: Sequence[str], shown: int = 3, sep: str = ", ", more: str = "more") -> str:
    """The first ``shown`` of ``names`` joined by ``sep``, then `` and N {more}`` for the rest.

    Args:
        names: the names (or "name: reason" entries) to list, in the order to show them.
        shown: how many to name.
        sep: what joins them (``"; "`` where an entry holds commas).
        more: the words after the count of the rest ("more", "more skipped").

    Returns:
        One line, e.g. ``"a, b, c and 2 more"``; an empty string for no names.
    """
    rest = f" and {len(names) - shown} {more}" if len(names) > shown else ""
    return sep.join(names[:shown]) + rest
