"""Request handlers, one module per API family; importing registers them."""
from . import api_versions, cluster, configs, fetch, metadata, offsets, produce, producer_id, topics  # noqa: F401
