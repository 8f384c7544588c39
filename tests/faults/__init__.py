"""A Jepsen-style fault-injection suite: a seeded nemesis against three brokers and ZooKeeper.

    pytest tests/faults                              # CI: the fixed seeds (about 1.5 min on two cores)
    pytest tests/faults --long [--fault-schedules N] # N (200) schedules of random seeds
    KWIRE_FAULTS_LONG=N pytest tests/faults          # the same, from the environment
    pytest tests/faults --fault-seed S               # replay one schedule
    pytest tests/faults -m "not clients"             # the pure parts only (fast lane, ~2 s)

Modules: ``nemesis`` (schedules from a seed, pure), ``history`` (what clients
saw and the checks, pure), ``replicas`` (segment bytes and batch headers below
the high watermark), ``duplicates`` (an idempotent duplicate classified by the
batches holding its copies, the producer-sequence invariant, pure),
``environment`` (the cluster behind proxies, tmpfs log dirs),
``injector`` (faults, heals, recovery), ``load`` (the stock clients),
``observe`` (ISR sampling, read-back), ``runner`` (one schedule end to end).
A failing schedule's logs and history are kept under
``$KWIRE_FAULTS_ARTIFACTS`` (default the temporary directory).
"""
