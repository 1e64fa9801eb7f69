"""What the child tells the parent, and how the parent decides whether to believe it.

The child writes one line per message on a pipe the parent opened for it: `<hmac> <json>`. The HMAC-SHA256 key reaches
the child on its standard input before any submission code is imported, and every message carries a sequence number,
so a line written by anything else (a print, a forged report) is rejected. Messages, in order:

    collected   the graded tests, their exercise part, title, points and visibility (sent before the import)
    result      one per test: passed or not, and the first lines of the failure
    violation   the submission broke the grader (guard.py) or stopped it; the exercise scores 0
    policy      findings about the use of the reference (policy.py)
    error       the grader itself could not run (a test file failed to import, no test collected)
    done        the child finished reporting
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from typing import Any, BinaryIO

KINDS = ("collected", "result", "violation", "policy", "error", "done")
PART = re.compile(r"^\d\d\.\d+$")
MAX_TEXT = 4000  # characters kept from any one failure message


class ProtocolError(ValueError):
    """A message the parent cannot accept: the child's report is garbage."""


class Channel:
    """The child's end: signs and writes messages."""

    def __init__(self, stream: BinaryIO, key: bytes):
        self._stream = stream
        self._key = key
        self._seq = 0

    def send(self, kind: str, **payload: Any) -> None:
        body = json.dumps({"seq": self._seq, "kind": kind, **payload}, sort_keys=True, ensure_ascii=True)
        mac = hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()
        self._stream.write(f"{mac} {body}\n".encode())
        self._seq += 1


def decode(data: bytes, key: bytes) -> tuple[list[dict[str, Any]], str | None]:
    """The messages in `data` up to the first bad line, and what was wrong with that line (None if nothing was).

    A bad line is one not signed with `key`, out of sequence or of an unknown kind; anything after `done` (written by
    an atexit hook, say) is ignored.
    """
    messages: list[dict[str, Any]] = []
    for number, line in enumerate(data.splitlines()):
        mac, _, body = line.partition(b" ")
        expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(mac, expected):
            return messages, f"report line {number + 1} is not signed by the grader"
        message = json.loads(body)
        if message.get("seq") != number or message.get("kind") not in KINDS:
            return messages, f"report line {number + 1} is out of order or of an unknown kind"
        messages.append(message)
        if message["kind"] == "done":
            break
    return messages, None


def check_test(test: Any) -> dict[str, Any]:
    """A `collected` entry: {nodeid, part, title, points, visibility}."""
    ok = (isinstance(test, dict) and isinstance(test.get("nodeid"), str) and isinstance(test.get("title"), str)
          and isinstance(test.get("part"), str) and PART.match(test["part"])
          and type(test.get("points")) in (int, float) and math.isfinite(test["points"]) and test["points"] >= 0
          and test.get("visibility") in ("visible", "hidden"))
    if not ok:
        raise ProtocolError(f"malformed test entry {str(test)[:200]}")
    return test


def check_result(message: dict[str, Any], known: dict[str, Any], seen: set[str]) -> tuple[str, bool, str]:
    nodeid, passed, output = message.get("nodeid"), message.get("passed"), message.get("output")
    if nodeid not in known or nodeid in seen or type(passed) is not bool or not isinstance(output, str):
        raise ProtocolError(f"malformed or repeated result for {str(nodeid)[:200]}")
    seen.add(nodeid)
    return nodeid, passed, output[:MAX_TEXT]
