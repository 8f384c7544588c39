"""Request handlers, one module per API family; importing registers them."""
from . import (acls, api_versions, cluster, configs, fetch, groups, log_dirs, metadata, offsets, produce,  # noqa: F401
               leaders, producer_id, sasl, scram_admin, share, share_state, topics, transactions, txn_admin)
