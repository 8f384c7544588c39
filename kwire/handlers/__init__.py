"""Request handlers, one module per API family; importing registers them."""
from kwire.handlers import (acls, api_versions, client_quotas, cluster, configs, consumer_groups, fetch, groups, log_dirs, metadata,  # noqa: F401
               features, offsets, produce, leaders, producer_id, reassignment, sasl, scram_admin, share, share_admin,
               share_state, telemetry, topics, transactions, txn_admin)
