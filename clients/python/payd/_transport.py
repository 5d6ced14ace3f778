"""One logical call: its attempts, the waits between them, one Idempotency-Key for all of
them. The same loop as the C client's src/client/retry.c (docs/client.md "The retry policy")."""

from __future__ import annotations

import http.client
import json
import random
import socket
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import _backoff
from .errors import PaydError, error_class

USER_AGENT = "payd-python/0.1.0"


@dataclass
class Response:
    """The final answer of a logical call, and what it took to get it."""
    status: int
    headers: dict[str, str]  # lower-case names
    body: Any  # the parsed JSON (None for an empty body)
    attempts: int
    idempotency_key: str | None
    request_id: str | None = None
    replayed: bool = False  # Idempotent-Replayed: true (the server answered from the key)


@dataclass
class _Attempt:
    status: int = 0  # 0: no answer
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""
    error: str = ""  # why there was no answer


def valid_idempotency_key(key: str) -> bool:
    """1-255 visible ASCII characters (docs/api.md §2); anything else would also let a caller
    smuggle a line break into the request headers."""
    return 1 <= len(key) <= 255 and all(0x21 <= ord(c) <= 0x7E for c in key)


def is_retryable(status: int, code: str | None) -> bool:
    """Whether a failure is one the policy retries: no answer, 5xx, 429, 409 request_in_progress.
    Never any other 4xx: the same request gets the same answer."""
    if status == 0 or status >= 500 or status == 429:
        return True
    return status == 409 and code == "request_in_progress"


class Transport:
    def __init__(self, api_key: str, base_url: str, *, max_retries: int, base_delay: float,
                 max_delay: float, timeout: float, deadline: float | None,
                 sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], float] | None = None,
                 wall_clock: Callable[[], float] | None = None,
                 rand: Callable[[], float] | None = None) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be http:// or https://, not {base_url!r}")
        self.api_key = api_key
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.timeout = timeout
        self.deadline = deadline if deadline and deadline > 0 else None
        # Hooks so tests can run the whole policy on a fake clock.
        self.sleep = sleep or time.sleep
        self.clock = clock or time.monotonic
        self.wall_clock = wall_clock or time.time
        self.rand = rand or random.random

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _attempt(self, method: str, target: str, headers: dict[str, str], body: bytes | None,
                 timeout: float) -> _Attempt:
        """One HTTP exchange on a fresh connection. A connection per attempt keeps a failed one
        from poisoning the next, and a server that dropped an idle connection from costing a
        retry."""
        conn = self._connection(timeout)
        try:
            conn.request(method, target, body=body, headers=headers)
            answer = conn.getresponse()
            raw = answer.read()
            return _Attempt(answer.status, {k.lower(): v for k, v in answer.getheaders()}, raw)
        except (OSError, http.client.HTTPException) as e:
            reason = "timed out" if isinstance(e, (socket.timeout, TimeoutError)) else str(e)
            return _Attempt(error=f"{type(e).__name__}: {reason}" if reason else type(e).__name__)
        finally:
            conn.close()

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, idempotency_key: str | None = None,
                headers: Mapping[str, str] | None = None) -> Response:
        """Sends one logical call with the retry policy; returns the final answer below 400 or
        raises a PaydError. A POST carries idempotency_key, or a UUIDv4 made here once and sent
        with every attempt."""
        method = method.upper()
        if not path.startswith("/"):
            raise ValueError("a path starts with '/'")
        key: str | None = None
        if method == "POST":
            if idempotency_key is not None and not valid_idempotency_key(idempotency_key):
                raise ValueError("an Idempotency-Key is 1-255 visible ASCII characters")
            key = idempotency_key if idempotency_key is not None else str(uuid.uuid4())
        target = self.prefix + path
        pairs = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        if pairs:
            target += ("&" if "?" in target else "?") + urllib.parse.urlencode(pairs)
        send = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json",
                "User-Agent": USER_AGENT, **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            send["Content-Type"] = "application/json"
        if key is not None:
            send["Idempotency-Key"] = key

        started = self.clock()
        deadline_at = started + self.deadline if self.deadline else None
        attempt_no = 0
        while True:
            attempt_no += 1
            timeout = self.timeout
            if deadline_at is not None:
                timeout = max(min(timeout, deadline_at - self.clock()), 0.001)
            attempt = self._attempt(method, target, send, data, timeout)
            now = self.clock()
            problem = _problem(attempt)
            code = problem.get("code") if isinstance(problem.get("code"), str) else None
            if attempt.status and attempt.status < 400:
                return Response(attempt.status, attempt.headers, _json(attempt.raw), attempt_no,
                                key, attempt.headers.get("x-request-id"),
                                attempt.headers.get("idempotent-replayed") == "true")
            if not is_retryable(attempt.status, code):
                raise _error(attempt, problem, code, key, attempt_no, False, None)
            retry_after = _backoff.parse_retry_after(attempt.headers.get("retry-after"),
                                                     self.wall_clock())
            give_up, delay = self._plan_retry(attempt, attempt_no, retry_after, now, deadline_at)
            if give_up:
                raise _error(attempt, problem, code, key, attempt_no, True, give_up)
            self.sleep(delay)

    def _plan_retry(self, attempt: _Attempt, attempt_no: int, retry_after: float | None,
                    now: float, deadline_at: float | None) -> tuple[str | None, float]:
        """After a retryable failure: why to give up, or (None, how long to wait)."""
        if deadline_at is not None and attempt.status == 0 and now >= deadline_at:
            return "deadline", 0.0  # the deadline itself cut this attempt short
        if attempt_no > self.max_retries:
            return "max_retries", 0.0
        delay = _backoff.next_delay(attempt_no, self.base_delay, self.max_delay, self.rand(),
                                    retry_after)
        if delay is None:
            return "retry_after", 0.0
        if deadline_at is not None and delay >= deadline_at - now:
            return "deadline", 0.0  # no use sleeping only to fail on waking
        return None, delay


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _problem(attempt: _Attempt) -> dict[str, Any]:
    if attempt.status < 400:
        return {}
    body = _json(attempt.raw)
    return body if isinstance(body, dict) else {}


def _error(attempt: _Attempt, problem: dict[str, Any], code: str | None, key: str | None,
           attempts: int, retryable: bool, give_up: str | None) -> PaydError:
    if attempt.status == 0:
        message = attempt.error or "no answer"
    else:
        message = str(problem.get("detail") or problem.get("title") or f"HTTP {attempt.status}")
    if give_up:
        message += f" (gave up: {give_up})"
    param = problem.get("param")
    request_id = problem.get("request_id") or attempt.headers.get("x-request-id")
    return error_class(attempt.status)(
        message, status=attempt.status, code=code,
        param=param if isinstance(param, str) else None,
        request_id=request_id if isinstance(request_id, str) else None, problem=problem,
        idempotency_key=key, attempts=attempts, retryable=retryable, give_up=give_up,
        headers=attempt.headers)
