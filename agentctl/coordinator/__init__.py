"""The trio coordinator: owns the ledger connection, the run lease, budgets, scheduling and
commits; dispatches effects to worker processes (DESIGN.md §2–§3)."""
