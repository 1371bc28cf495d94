"""A real SSH server for the remote tests: asyncssh's, SFTP only, on loopback, jailed to one folder.

    python tests/ssh_server.py ROOT HOST_KEY AUTHORIZED_KEYS

Accepts only the public keys in AUTHORIZED_KEYS (any user name), serves ROOT as `/` over SFTP (no shell, no
exec, no port forwarding), prints "listening on PORT" once it accepts connections, and serves until killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import asyncssh


async def serve(root: Path, host_key: Path, authorized_keys: Path) -> None:
    server = await asyncssh.listen(
        "127.0.0.1", 0, server_host_keys=[str(host_key)], authorized_client_keys=str(authorized_keys),
        sftp_factory=lambda channel: asyncssh.SFTPServer(channel, chroot=str(root)), allow_scp=False,
        process_factory=None)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on {port}", flush=True)
    await server.wait_closed()


if __name__ == "__main__":
    root, host_key, authorized_keys = map(Path, sys.argv[1:4])
    asyncio.run(serve(root, host_key, authorized_keys))
