"""``log.request.debug=true``: one DEBUG line per request, as Kafka's ``kafka.request.logger``
writes at DEBUG.  On logger ``kwire.request``, which the key sets to DEBUG, so the lines
appear whatever ``--log-level`` says about the rest::

    Completed request: Produce v9 correlation_id=7 client_id='rdkafka' from 127.0.0.1:51514
    listener=PLAINTEXT principal=User:ANONYMOUS in 0.41 ms

The time runs from the decoded request to its encoded response (a deferred acks=all
answer included).  Off, the request path pays one test per request.
"""
from __future__ import annotations

import logging
from time import perf_counter

from kwire.codecs import messages

logger = logging.getLogger("kwire.request")


class RequestLog:
    def __init__(self):
        logger.setLevel(logging.DEBUG)

    @staticmethod
    def done(connection, header, started: float) -> None:
        logger.debug("Completed request: %s v%d correlation_id=%d client_id=%r from %s listener=%s "
                     "principal=%s in %.2f ms", messages.api_name(header.api_key), header.api_version,
                     header.correlation_id, header.client_id, connection.peer, connection.listener.name,
                     connection.principal, (perf_counter() - started) * 1000)
