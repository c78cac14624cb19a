"""Sandboxing helpers used by workers: path confinement, bounded processes, containers.

Depends only on ``agentctl.errors`` (and psutil/trio); never on the ledger or coordinator.
"""
