"""Plain words for the YAML mistakes users make most often, in place of PyYAML's.

PyYAML names a second document "but found another document (expected a single document in
the stream)"; a user wants to hear what is wrong with the file and what to do about it.
"""

from __future__ import annotations

# PyYAML's wording for mistakes users make often, and what to say instead: (message, help).
# The key is the start of PyYAML's ``problem``; a message of None keeps PyYAML's own.
KNOWN_PROBLEMS: dict[str, tuple[str | None, str]] = {
    "but found another document": (
        "the file holds more than one YAML document; a workflow file holds exactly one",
        "remove this `---` and what follows it, or put each workflow in a file of its own",
    ),
    "found character '\\t' that cannot start any token": (
        None,
        "indent with spaces: YAML does not allow tab characters in indentation",
    ),
}


def plain_words(problem: str | None) -> tuple[str | None, str | None]:
    """(message, help) for a PyYAML ``problem``; a None message keeps PyYAML's own."""
    for start, (message, help) in KNOWN_PROBLEMS.items():
        if (problem or "").startswith(start):
            return message, help
    return None, None
