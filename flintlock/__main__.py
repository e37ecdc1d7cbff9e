"""``python -m flintlock`` runs the command line."""

from __future__ import annotations

from flintlock.client.cli import main

main()
