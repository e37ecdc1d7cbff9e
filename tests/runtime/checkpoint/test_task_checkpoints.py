"""A streaming subtask's checkpoint bookkeeping (``TaskCheckpoints``, pure): triggers, sink
transactions and a source's stop-with-savepoint (Flink's synchronous savepoint)."""

from __future__ import annotations

from flintlock.runtime.spark.task_checkpoints import TaskCheckpoints


def test_a_sink_transaction_closed_at_a_barrier_stays_until_its_checkpoint_completed() -> None:
    cp = TaskCheckpoints()
    cp.wrote(0, "/tmp/attempt/txn-00000")
    cp.trigger(1, "/chk/chk-1")
    assert cp.due() == [(1, "/chk/chk-1")]
    assert cp.pre_commit(1) == {0: ("/tmp/attempt/txn-00000",)}
    assert cp.transaction_attempt("a") == "a/txn-00001"
    cp.wrote(0, "/tmp/attempt/txn-00001")
    cp.trigger(2, "/chk/chk-2")
    assert cp.due() == [(2, "/chk/chk-2")]
    # checkpoint 1 was not confirmed yet: its transaction is pre-committed again with 2's
    assert cp.pre_commit(2) == {0: ("/tmp/attempt/txn-00000", "/tmp/attempt/txn-00001")}
    cp.notify_complete(2)
    assert cp.due() == [] and cp.pre_commit(3) == {}


def test_a_stop_with_savepoint_holds_the_source_until_it_completed() -> None:
    cp = TaskCheckpoints()
    cp.trigger(4, "/sp/savepoint-1", stop="suspend")
    assert cp.due() == [(4, "/sp/savepoint-1")]
    assert cp.stopping == (4, "suspend") and cp.stop_outcome is None
    cp.trigger(5, "/chk/chk-5")  # a periodic checkpoint meanwhile: taken, no change
    cp.notify_complete(3)  # an older checkpoint's confirmation: still waiting
    assert cp.due() == [(5, "/chk/chk-5")] and cp.stop_outcome is None
    cp.notify_complete(4)
    assert cp.due() == [] and cp.stop_outcome is True and cp.stopping == (4, "suspend")


def test_an_aborted_stop_with_savepoint_lets_the_source_go_on() -> None:
    cp = TaskCheckpoints()
    cp.trigger(7, "/sp/savepoint-2", stop="terminate")
    assert cp.due() == [(7, "/sp/savepoint-2")] and cp.stopping == (7, "terminate")
    cp.notify_aborted(6)  # another checkpoint's abort
    cp.due()
    assert cp.stopping == (7, "terminate") and cp.stop_outcome is None
    cp.notify_aborted(7)
    cp.due()
    assert cp.stopping is None and cp.stop_outcome is False
    cp.trigger(8, "/sp/savepoint-3", stop="suspend")  # a second attempt may follow
    cp.due()
    assert cp.stopping == (8, "suspend") and cp.stop_outcome is None
