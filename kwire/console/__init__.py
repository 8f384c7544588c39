"""kwire's web console: topics, messages, groups, lag and the cluster in a browser.

``kwire console --bootstrap-server HOST:PORT [--listen 127.0.0.1:8080]`` (``server.py``), or
in-process with ``console.listener=`` in ``kwire serve``.  It speaks only the Kafka protocol
through kafka-python's clients, so it works against kwire and against any Kafka cluster.

- ``app.py``      the Starlette application: page registry, login, read-only mode, CSRF, audit
- ``access.py``   the Kafka clients (blocking, run in threads) and readable error texts
- ``sampler.py``  a background view of the cluster (partitions, offsets, lag, rates, history)
- ``auth.py``     users file (scrypt), signed session cookies, the audit log
- ``pages/``      one module per menu entry, each with its Jinja2 templates in ``templates/``
- ``reader.py``   Metadata, ListOffsets and Fetch for the message browser, bounded in time and bytes
- ``batches.py``  the fetched record batches read with kwire's codecs (each batch's compression)
- ``browse.py``   browsing, filtering, the live tail and produce (blocking; run in threads)
- ``decode.py``   keys and values as text, JSON, hex, or Avro/Protobuf/JSON Schema via a registry
- ``jsonpath.py`` the message filter's small JSON-path language (no eval)
- ``static/``     the stylesheet, a little script, and htmx and uPlot vendored with licences
"""
