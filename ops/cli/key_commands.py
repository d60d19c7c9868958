"""``mcpq keys create|list|revoke``: API keys in the deployment's Redis (``REDIS_URL``)."""

from __future__ import annotations

import argparse
import sys
import time

from mcpq.shared.settings import Settings
from mcpq.shared.store import Keys
from mcpq.shared.store.api_keys import ApiKeys
from mcpq.shared.store.clients import sync_client


def _when(ms: int | None) -> str:
    return "-" if ms is None else time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ms / 1000))


def run_keys(args: argparse.Namespace, settings: Settings) -> int:
    keys = ApiKeys(sync_client(settings), Keys(settings.key_prefix))
    if args.keys_command == "create":
        try:
            made, token = keys.create(args.name, tuple(args.scope))
        except ValueError as exc:
            print(f"mcpq keys: {exc}", file=sys.stderr)
            return 2
        print(token)
        print(
            f"key {made.id} ({made.name}) created; this is the only time it is shown. "
            "Send it as Authorization: Bearer <key>.",
            file=sys.stderr,
        )
        return 0
    if args.keys_command == "list":
        print(f"{'id':<16}  {'name':<24}  {'created':<20}  {'revoked':<20}  scopes")
        for key in keys.list():
            scopes = " ".join(key.scopes) or "-"
            print(
                f"{key.id:<16}  {key.name[:24]:<24}  {_when(key.created_ms):<20}  "
                f"{_when(key.revoked_ms):<20}  {scopes}"
            )
        return 0
    if keys.revoke(args.key_id):
        print(f"key {args.key_id} revoked", file=sys.stderr)
        return 0
    print(f"mcpq keys: no key with id {args.key_id}", file=sys.stderr)
    return 1
