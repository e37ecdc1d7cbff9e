"""JobManager high availability (Flink ``runtime/highavailability``, ``leaderelection``,
``leaderretrieval``, ``jobmanager/JobGraphStore``, ``highavailability/JobResultStore``).

- ``leader``: ``LeaderInformation`` (a leader's session id and addresses) and the contender /
  listener protocols.
- ``file_services``: leader election by an exclusive lock on a file and leader retrieval by
  reading the leader's file (``high-availability.type: FILE``, one host).
- ``job_graph_store``: submitted JobGraphs kept under ``high-availability.storageDir`` until their
  job reached a globally terminal state, so a new leader can run them again.
- ``job_result_store``: a globally terminated job's result (dirty until its cleanup finished,
  then clean), so a new leader never runs a finished job again (FLIP-194).
- ``services``: ``HighAvailabilityServices``, built from the configuration.
"""
