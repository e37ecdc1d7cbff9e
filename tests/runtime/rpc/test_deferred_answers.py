"""``Deferred``: an RPC handler whose answer comes later leaves the endpoint's mailbox free."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from flintlock.runtime.rpc.endpoint import Deferred, RpcEndpoint
from flintlock.runtime.rpc.service import InProcRpcService


class LaterGateway(Protocol):
    async def answer_later(self) -> str: ...

    async def set_answer(self, value: str) -> None: ...

    async def now(self) -> str: ...


class Later(RpcEndpoint):
    def __init__(self) -> None:
        super().__init__("later")
        self.answer = ""
        self.ready = asyncio.Event()

    async def answer_later(self) -> Any:
        async def later() -> str:
            await self.ready.wait()
            return await self.run_in_mailbox(lambda: self.answer)

        return Deferred(later)

    async def set_answer(self, value: str) -> None:
        self.answer = value
        self.ready.set()

    async def now(self) -> str:
        return "now"


def test_a_deferred_answer_comes_after_calls_the_mailbox_ran_meanwhile() -> None:
    async def body() -> None:
        rpc = InProcRpcService()
        endpoint = Later()
        rpc.register(endpoint)
        await endpoint.start()
        gw = await rpc.connect(endpoint.address, LaterGateway)
        pending = asyncio.ensure_future(gw.answer_later())
        # with the handler's wait inside the mailbox, these two calls would time out
        assert await gw.now(timeout=5.0) == "now"
        assert not pending.done()
        await gw.set_answer("forty-two", timeout=5.0)
        assert await asyncio.wait_for(pending, 5.0) == "forty-two"
        await endpoint.stop()

    asyncio.run(body())
