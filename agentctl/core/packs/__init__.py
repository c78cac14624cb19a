"""Workflow packs, the pure half: manifests, integrity digests, versions and constraints,
trust, the resolved graph, the lock file and the merge of a pack's items into a workflow. The
only I/O, fetching a pack's files, is injected (``agentctl.packsource``)."""
