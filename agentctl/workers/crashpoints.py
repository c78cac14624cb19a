"""The worker's crash points (``worker.*``); see ``agentctl.crashpoints``."""

from agentctl.crashpoints import crash_point

__all__ = ["crash_point"]
