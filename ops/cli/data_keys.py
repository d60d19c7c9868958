"""``mcpq keys new-data-key|rotate-data``: the keys that seal task payloads at rest
(``MCPQ_DATA_KEYS``, ``mcpq.shared.sealing``).

Rotation: put a new entry first in ``MCPQ_DATA_KEYS`` (keep the old ones after it) on every web
and worker process, then run ``mcpq keys rotate-data`` with that same value; once it reports
nothing left under an old key, the old entries may be dropped.
"""

from __future__ import annotations

import argparse
import sys

from mcpq.shared.errors import StoreUnavailable
from mcpq.shared.sealing import DataKeyError, new_data_key, parse_data_keys
from mcpq.shared.settings import Settings
from mcpq.shared.store import open_store


def run_data_keys(args: argparse.Namespace, settings: Settings) -> int:
    if args.keys_command == "new-data-key":
        print(new_data_key())
        return 0
    try:
        if parse_data_keys(settings.data_keys) is None:
            raise DataKeyError("rotate-data needs keys in MCPQ_DATA_KEYS, not plaintext")
        store = open_store(settings)
    except DataKeyError as exc:
        print(f"mcpq keys rotate-data: {exc}", file=sys.stderr)
        return 2
    try:
        report = store.rotate_data(args.batch)
    except StoreUnavailable:
        print("mcpq keys rotate-data: the task store (REDIS_URL) is unavailable", file=sys.stderr)
        return 1
    print(f"mcpq keys rotate-data: {report.summary()}")
    # Values no configured key opens stay as they are: dropping a key now would lose more.
    return 1 if report.unreadable else 0
