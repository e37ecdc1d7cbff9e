"""RPC errors (Flink ``runtime/rpc/exceptions``)."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = [
    "EndpointNotStartedError",
    "FencingTokenMismatch",
    "RecipientUnreachable",
    "RemoteError",
    "RpcException",
    "RpcTimeout",
]


class RpcException(FlintlockException):
    """Base class of RPC failures."""


class RpcTimeout(RpcException):
    """A call got no answer within its timeout."""


class RecipientUnreachable(RpcException):
    """No endpoint is (any longer) registered at the address."""


class EndpointNotStartedError(RpcException):
    """The endpoint is not running (not started yet, or stopped)."""


class FencingTokenMismatch(RpcException):
    """A fenced endpoint rejected a call carrying another leader's token."""


class RemoteError(RpcException):
    """An exception raised by the remote handler, carried as text (never unpickled).

    Attributes:
        type_name: qualified class name of the remote exception.
        remote_message: its message.
        remote_traceback: its formatted traceback.
    """

    def __init__(self, type_name: str, remote_message: str, remote_traceback: str = "") -> None:
        super().__init__(f"{type_name}: {remote_message}")
        self.type_name = type_name
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
