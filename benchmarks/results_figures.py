"""The figures of one benchmark run, looked up by name, and how numbers are printed."""

from __future__ import annotations

import re
from typing import Any

Fig = dict[str, Any]


class Figures:
    def __init__(self, report: dict[str, Any]) -> None:
        self.by_name: dict[str, Fig] = {}
        for result in report["results"]:
            for fig in result.get("figures", []):
                self.by_name[fig["name"]] = fig

    def get(self, name: str) -> Fig | None:
        return self.by_name.get(name)

    def largest(self, pattern: str) -> Fig | None:
        """The figure matching ``pattern`` (one ``(\\d+)`` group) with the largest N."""
        found = [
            (int(m.group(1)), f) for n, f in self.by_name.items() if (m := re.fullmatch(pattern, n))
        ]
        return max(found, key=lambda t: t[0])[1] if found else None

    def median(self, name: str) -> float | None:
        fig = self.get(name)
        return None if fig is None else float(fig["median"])

    def ratio(self, top: str, bottom: str) -> float | None:
        a, b = self.median(top), self.median(bottom)
        return a / b if a is not None and b else None


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"
