"""Accepting clients: ``serve`` binds every listener and starts the broker's services;
``handle_connection`` serves each accepted stream with a ``Connection``
(kwire.server.connection) and never lets an exception escape.

Logs under the ``kwire.server.connection`` logger name, as before the split, so log lines
and filters stay the same.
"""
from __future__ import annotations

import errno
import functools
import logging
import socket

import trio

from kwire.codecs.errors import CloseConnection, CorruptFrame
from kwire.server.broker import Broker, Endpoint
from kwire.server.connection import Connection, peer_name
from kwire.server.context import ConnectionLimits
from kwire.security.listeners import PLAINTEXT, ListenerContext, listener_context, secure
from kwire.transport.listener import aclose_quietly, serve_listeners

logger = logging.getLogger("kwire.server.connection")


async def handle_connection(broker: Broker, stream: trio.SocketStream,
                            limits: ConnectionLimits | None = None,
                            listener: ListenerContext = PLAINTEXT) -> None:
    """Serve one client; never lets an exception escape (it would kill the server)."""
    limit = broker.config.max_connections
    if broker.connections >= limit:
        logger.warning("refusing a connection: max.connections=%d reached", limit)
        await stream.aclose()
        return
    broker.connections += 1
    if broker.metrics is not None:
        broker.metrics.connection_opened(listener.name)
    conn = None
    peer = peer_name(stream)      # now: once the client has gone, the socket no longer says
    try:
        if getattr(stream, "socket", None) is not None:   # in-memory test streams have no options
            stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        secured = await secure(stream, listener, peer)
        if secured is None:
            return
        conn = Connection(broker, secured[0], limits, listener, secured[1])
        stream = conn.stream
        await conn.serve()
    except CloseConnection as exc:
        logger.log(logging.DEBUG if exc.quiet else logging.INFO, "%s: closing connection: %s",
                   peer, exc)
    except CorruptFrame as exc:
        logger.info("%s: closing connection: %s", peer, exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
    except OSError as exc:
        if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
            logger.exception("%s: connection failed", peer)
    except Exception:
        logger.exception("%s: connection failed", peer)
    finally:
        if conn is not None:
            conn.release_budget()
        broker.connections -= 1
        if broker.metrics is not None:
            broker.metrics.connection_closed(listener.name)
        await aclose_quietly(stream)




async def handle_on_listener(broker: Broker, limits: ConnectionLimits, name: str, stream: trio.SocketStream) -> None:
    """``handle_connection`` with the listener's context as it is now (dynamic broker configs
    may have given a TLS listener new stores since it was bound)."""
    await handle_connection(broker, stream, limits, broker.listener_contexts[name])


async def bind_listeners(broker: Broker, host: str, port: int) -> list[tuple[ListenerContext, list]]:
    """Bind every listener and fill ``broker.endpoints`` (the advertised endpoint of each, by
    name) and ``broker.advertised`` (the first's); the first listener binds ``host:port``
    instead of its configured address (the embedded broker passes port 0).  Raises OSError
    (bind) and ConfigError (a TLS listener's ssl.* settings)."""
    config = broker.config
    bound = []
    for i, listener in enumerate(config.listeners):
        scram = getattr(getattr(broker, "scram", None), "store", None)   # kwire.security.scram_store
        context = broker.listener_contexts[listener.name] = listener_context(config, listener, scram)
        sockets = await trio.open_tcp_listeners(port if i == 0 else listener.port,
                                                host=(host if i == 0 else listener.host) or None)
        bound_host, bound_port = sockets[0].socket.getsockname()[:2]
        broker.endpoints[listener.name] = advertised_endpoint(config, listener, bound_host, bound_port)
        logger.info("listener %s (%s) on %s:%d", listener.name, listener.protocol, bound_host, bound_port)
        bound.append((context, sockets))
    if broker.advertised is None:
        broker.advertised = broker.endpoints[config.listeners[0].name]
    return bound


def advertised_endpoint(config, listener, bound_host: str, bound_port: int) -> Endpoint:
    """The endpoint published for ``listener``: its advertised.listeners entry, with the bound
    port where the listener's own port is advertised (possibly 0, ephemeral)."""
    for entry in config.advertised_listeners:
        if entry.name == listener.name:
            port = bound_port if entry.port in (0, listener.port) else entry.port
            return Endpoint(entry.host or bound_host, port)
    return Endpoint(listener.host or bound_host, bound_port)


async def serve(broker: Broker, host: str, port: int, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Open the logs, listen, start housekeeping; ``task_status.started((host, port))`` when ready.

    With ``zookeeper.connect`` the broker first reaches ZooKeeper and settles the cluster id
    (kwire.cluster.node), and accepts connections only once it is registered and has applied
    the cluster's state.  Raises ZooKeeperUnavailable, ClusterIdMismatch or BrokerIdInUse."""
    if broker.cluster is not None:
        await broker.cluster.connect()
    broker.open()
    try:
        async with trio.open_nursery() as nursery:
            limits = ConnectionLimits.from_config(broker.config)
            bound = await bind_listeners(broker, host, port)
            bound_host, bound_port = bound[0][1][0].socket.getsockname()[:2]
            if broker.schema_registry is not None:    # before registering: its URL goes into the registration
                await nursery.start(broker.schema_registry.serve, broker.config.value_of("schema.registry.listeners"))
            if broker.cluster is not None:
                await nursery.start(broker.cluster.run)
            for context, sockets in bound:
                await nursery.start(functools.partial(
                    serve_listeners, functools.partial(handle_on_listener, broker, limits, context.name),
                    sockets, handler_nursery=nursery, open_connections=lambda: broker.connections))
            await nursery.start(broker.run_housekeeping)
            await nursery.start(broker.cleaner.run)
            await nursery.start(broker.log_dir_mover.run)
            await nursery.start(broker.groups.run_timers)
            await nursery.start(broker.transactions.run_timers)
            await nursery.start(broker.shares.run_timers)
            if broker.metrics is not None:
                from kwire.metrics.http import serve_metrics       # prometheus_client only when asked for
                broker.metrics_endpoint = await nursery.start(
                    serve_metrics, broker, broker.config.value_of("prometheus.listener"))
            logger.info("kwire node %d listening on %s:%d (cluster %s)", broker.node_id, bound_host,
                        bound_port, broker.cluster_id)
            task_status.started((bound_host, bound_port))
    finally:
        broker.close()
        logger.info("kwire stopped cleanly")
