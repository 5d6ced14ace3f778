"""The payd API client: retries with one Idempotency-Key per logical call, typed errors, lists
that follow next_cursor, and Standard Webhooks verification. Standard library only."""

from . import models, webhooks
from ._transport import Response
from .client import Client
from .errors import (APIConnectionError, APIError, AuthenticationError, CardError,
                     ConflictError, IdempotencyError, InvalidRequestError, NotFoundError,
                     PaydError, RateLimitError)
from .webhooks import WebhookVerificationError

__version__ = "0.1.0"

__all__ = [
    "APIConnectionError",
    "APIError",
    "AuthenticationError",
    "CardError",
    "Client",
    "ConflictError",
    "IdempotencyError",
    "InvalidRequestError",
    "NotFoundError",
    "PaydError",
    "RateLimitError",
    "Response",
    "WebhookVerificationError",
    "models",
    "webhooks",
]
