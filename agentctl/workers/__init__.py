"""Worker processes: ``python -m agentctl.workers --fd N`` executes effects sent by the
coordinator over one inherited socket. Workers never import the ledger; nothing heavy is
imported here so that start-up stays fast.
"""
