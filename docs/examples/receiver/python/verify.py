#!/usr/bin/env python3
"""Verify a paylock forward (Standard Webhooks) with the standard library only.

Usage: WEBHOOK_SECRET=whsec_... python3 verify.py ID TIMESTAMP SIGNATURE < body
Exits 0 and prints "accepted" when one v1 entry of SIGNATURE (the
webhook-signature header) matches, 1 and "rejected" otherwise.
"""
import base64
import hashlib
import hmac
import os
import sys
import time

TOLERANCE_SECONDS = 5 * 60


def verify(secret, msg_id, timestamp, signature_header, body, now=None):
    """Return True when body, sent with these headers, was signed with secret."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    now = time.time() if now is None else now
    try:
        ts = int(timestamp)
    except ValueError:
        return False
    if abs(now - ts) > TOLERANCE_SECONDS:
        return False  # too old or too new: a replay
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    # During a rotation the header holds one "v1,<signature>" per secret.
    for entry in signature_header.split(" "):
        version, _, sig = entry.partition(",")
        if version == "v1" and hmac.compare_digest(sig, expected):
            return True
    return False


def main():
    msg_id, timestamp, signature_header = sys.argv[1:4]
    body = sys.stdin.buffer.read()
    if verify(os.environ["WEBHOOK_SECRET"], msg_id, timestamp, signature_header, body):
        print("accepted")
        return 0
    print("rejected")
    return 1


if __name__ == "__main__":
    sys.exit(main())
