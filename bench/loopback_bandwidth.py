"""TCP bandwidth over 127.0.0.1 between two processes of this host: the
ceiling of any all-reduce that goes through the loopback network (Gloo).
Sends TOTAL_MB (512) MiB in 1 MiB writes; prints one JSON line."""
import json
import os
import socket
import time

total = int(os.environ.get("TOTAL_MB", "512")) << 20
block = 1 << 20
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
port = srv.getsockname()[1]
pid = os.fork()
if pid == 0:
    srv.close()
    c = socket.create_connection(("127.0.0.1", port))
    buf = bytes(block)
    sent = 0
    while sent < total:
        sent += c.send(buf)
    c.shutdown(socket.SHUT_WR)
    c.recv(1)
    os._exit(0)
conn, _ = srv.accept()
buf = bytearray(block)
got = 0
t0 = time.perf_counter()
while got < total:
    n = conn.recv_into(buf)
    if not n:
        break
    got += n
secs = time.perf_counter() - t0
conn.send(b"x")
os.waitpid(pid, 0)
print(json.dumps({"loopback_GBps": got / secs / 1e9, "bytes": got}))
