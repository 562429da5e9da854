"""The channel layer's connection on a cluster follows a failover of the node the URL names (issue #41 item 3).

channels-redis dials one address. On a Valkey Cluster a classic PUBLISH reaches the subscribers of every node,
so any live node serves the layer: each connection learns the cluster's nodes (CLUSTER NODES) when it connects,
and a later connect that finds its node dead tries the others in turn. The pub/sub connection reconnects through
the same path (redis-py re-subscribes its channels on connect), so live pages resume once a node answers.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.connection import Connection, SSLConnection


def _addresses(nodes: Any) -> list[tuple[str, int]]:
    text = nodes.decode() if isinstance(nodes, bytes) else str(nodes)
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8 or "fail" in fields[2].split(","):
            continue
        host, _, port = fields[1].split("@")[0].rpartition(":")
        if host and port.isdigit():
            out.append((host, int(port)))
    return out


def node_following(tls: bool) -> type[Connection]:
    """A connection class of its own per layer (the node list is shared by that layer's connections only)."""
    base: Any = SSLConnection if tls else Connection

    class NodeFollowing(base):  # type: ignore[misc,valid-type]
        known: list[tuple[str, int]] = []

        async def _connect(self) -> None:
            here = (self.host, self.port)
            error: BaseException | None = None
            for host, port in [here, *(a for a in type(self).known if a != here)]:
                self.host, self.port = host, port
                try:
                    await super()._connect()
                    return
                except OSError as e:  # refused, unreachable, timed out
                    error = e
            assert error is not None
            raise error

        async def on_connect_check_health(self, check_health: bool = True) -> None:
            await super().on_connect_check_health(check_health=check_health)
            await self.send_command("CLUSTER", "NODES")
            found = _addresses(await self.read_response())
            if found:
                type(self).known = found

    return NodeFollowing
