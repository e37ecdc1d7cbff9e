"""``run_bounded``: a test interrupted inside the loop cannot hang the run on stubborn tasks."""

from __future__ import annotations

import asyncio
import time

import pytest

from flintlock.testing.clusters import run_bounded


def test_cleanup_after_an_interruption_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    stubborn_cancelled = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                stubborn_cancelled.append(True)  # ignores cancellation, like a stuck shutdown

    async def main() -> None:
        asyncio.get_running_loop().create_task(stubborn())
        await asyncio.sleep(0)
        raise KeyboardInterrupt  # what pytest-timeout's signal does inside the loop

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_bounded(main(), cleanup_timeout_s=0.2)
    assert time.monotonic() - started < 5
    assert stubborn_cancelled == [True]
    assert "did not end within 0.2 s of its cancellation" in caplog.text
    assert "stubborn" in caplog.text


def test_a_normal_run_returns_what_ran_and_closes_its_loop() -> None:
    seen: list[object] = []

    async def main() -> None:
        seen.append(asyncio.get_running_loop())
        await asyncio.to_thread(seen.append, 1)

    run_bounded(main())
    loop, value = seen
    assert value == 1 and loop.is_closed()  # type: ignore[attr-defined]
