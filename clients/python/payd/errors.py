"""Typed errors. Every failure of a call is a PaydError carrying what the server said (the
problem+json `code`, `param`, `request_id` and the whole `problem`) and what the client did
(`attempts`, the `idempotency_key` every attempt sent). Branch on `code`, never on the message."""

from __future__ import annotations

from typing import Any, Mapping


class PaydError(Exception):
    """A call that did not succeed.

    status: the HTTP status of the last answer, 0 when there was no answer at all.
    retryable: the failure is of a kind the client retries (so it gave up on it: see give_up);
        for a POST its outcome may be unknown, so repeat it later with the same idempotency_key.
    give_up: why the client stopped retrying: "max_retries", "deadline" or "retry_after"
        (the server asked to wait longer than max_delay); None when the failure is final.
    """

    def __init__(self, message: str, *, status: int = 0, code: str | None = None,
                 param: str | None = None, request_id: str | None = None,
                 problem: Mapping[str, Any] | None = None, idempotency_key: str | None = None,
                 attempts: int = 0, retryable: bool = False, give_up: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.param = param
        self.request_id = request_id
        self.problem: dict[str, Any] = dict(problem or {})
        self.idempotency_key = idempotency_key
        self.attempts = attempts
        self.retryable = retryable
        self.give_up = give_up
        self.headers: dict[str, str] = dict(headers or {})

    def __str__(self) -> str:
        parts = [str(self.status) if self.status else "no answer"]
        if self.code:
            parts.append(self.code)
        text = " ".join(parts) + f": {self.message}"
        if self.attempts > 1:
            text += f" (after {self.attempts} attempts)"
        return text


class APIConnectionError(PaydError):
    """No answer: refused, dropped, timed out (status 0)."""


class InvalidRequestError(PaydError):
    """400 and the other 4xx that name a mistake in the request."""


class AuthenticationError(PaydError):
    """401: the API key is missing, unknown or revoked."""


class CardError(PaydError):
    """402: the processor declined the payment (`decline_code`; `problem["payment"]` is the
    stored, failed payment). Final: the same key replays the same decline."""

    @property
    def decline_code(self) -> str | None:
        value = self.problem.get("decline_code")
        return value if isinstance(value, str) else None


class NotFoundError(PaydError):
    """404: no such resource (or not yours)."""


class ConflictError(PaydError):
    """409: a state conflict (`duplicate_payment`, `amount_exceeds_refundable`, ...) or, after
    the retries, `request_in_progress`; 412 (a stale If-Match) is one too."""


class IdempotencyError(PaydError):
    """422 `idempotency_key_reused`: the key was used for another request."""


class RateLimitError(PaydError):
    """429 `rate_limited` after the retries."""


class APIError(PaydError):
    """5xx after the retries: the server could not serve it now."""


def error_class(status: int) -> type[PaydError]:
    """The PaydError subclass for an HTTP status (0: no answer)."""
    if status == 0:
        return APIConnectionError
    if status >= 500:
        return APIError
    return {
        401: AuthenticationError,
        402: CardError,
        404: NotFoundError,
        409: ConflictError,
        412: ConflictError,
        422: IdempotencyError,
        429: RateLimitError,
    }.get(status, InvalidRequestError)
