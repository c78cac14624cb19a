"""The content-addressed artifact store beside the ledger: blobs on disk, rows in SQLite.

``refs`` holds the row operations (no file I/O); ``store`` the on-disk CAS with ingest,
verify and export; ``gc`` reachability-based collection and crash recovery.
"""
