"""The ledger's crash points (``artifact.*``, ``gc.*``); see ``agentctl.crashpoints``."""

from agentctl.crashpoints import crash_point

__all__ = ["crash_point"]
