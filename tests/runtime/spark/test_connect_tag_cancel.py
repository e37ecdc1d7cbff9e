"""``cancel_jobs_with_connect_tag``: a tagged operation's Spark job is cancelled without interruptTag.

``interruptTag`` interrupts an operation's server thread once; an interrupt swallowed while the
operation is planned leaves its job running. The fallback names the job by the Spark job tag Spark
Connect derives from the client tag; if that derivation changes in a PySpark upgrade, this fails.
"""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from flintlock.runtime.spark.session import cancel_jobs_with_connect_tag, embedded_active_job_ids
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark]


def test_a_tagged_spark_job_is_cancelled_by_its_connect_tag(spark, tmp_path):
    if embedded_active_job_ids() is None:
        pytest.skip("needs the embedded Spark Connect server of this process")
    outcome: dict[str, object] = {}

    def run() -> None:
        spark.addTag("flintlock-probe")
        try:
            slow = F.udf(lambda x: (time.sleep(0.05), x)[1], LongType())
            # 20,000 rows x 50 ms: minutes of work if the cancellation does not reach the job
            spark.range(20_000).select(slow("id")).write.parquet(str(tmp_path / "out"))
            outcome["result"] = "finished"
        except Exception as exc:
            outcome["result"] = exc
        finally:
            spark.removeTag("flintlock-probe")

    thread = threading.Thread(target=run, name="tagged-operation")
    thread.start()
    wait_until_sync(embedded_active_job_ids, 60, interval_s=0.05, describe=lambda: outcome)
    assert thread.is_alive()
    assert cancel_jobs_with_connect_tag(spark, "flintlock-probe", "probe cancelled")
    thread.join(30)
    assert not thread.is_alive()
    assert "SPARK_JOB_CANCELLED" in str(outcome["result"])
    assert "probe cancelled" in str(outcome["result"])
    assert embedded_active_job_ids() == []
