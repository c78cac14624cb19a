"""An MCP tool error is quoted redacted before it is cut (spec/cli.md §12: errors are
redacted): a header value the cut at ``MAX_DETAIL`` (or 200 for content without text)
splits is hidden, never shown as its unmatched head."""

from __future__ import annotations

from agentctl.core.protocols import MAX_DETAIL
from agentctl.core.redact import Redactor
from agentctl.workers.executors.mcp import text_of

TOKEN = "Zq7xK9wPm3Rt5vLn2Bc8"


def _pieces(secret: str, size: int = 4) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def test_a_text_error_that_echoes_a_header_value_at_the_cut_hides_all_of_it() -> None:
    content = [{"type": "text", "text": "E" * (MAX_DETAIL - 10) + TOKEN}]
    shown = text_of(content, Redactor([TOKEN]))
    assert not [piece for piece in _pieces(TOKEN) if piece in shown]
    assert len(shown) <= MAX_DETAIL and shown.startswith("EEEE")


def test_content_without_text_that_echoes_a_header_value_at_the_cut_hides_all_of_it() -> None:
    content = [{"type": "image", "data": "F" * 160 + TOKEN}]
    shown = text_of(content, Redactor([TOKEN]))
    assert not [piece for piece in _pieces(TOKEN) if piece in shown]
    assert len(shown) <= 200
