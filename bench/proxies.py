"""Counting proxies for the benchmark's request-count phase (never on the CPU phase's path).

RedisProxy relays TCP and logs, per chunk the client writes (one round trip), the RESP command
names in it. DynamoProxy is an HTTP/1.1 reverse proxy that logs each request's X-Amz-Target and
the `pk` values it names, and what each answer says it read (`reads`).
"""
import http.client
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def resp_commands(buf):
    """Command names of the RESP arrays in one chunk (best effort: a chunk is whole commands)."""
    names, i = [], 0
    while i < len(buf) and buf[i:i + 1] == b"*":
        try:
            end = buf.index(b"\r\n", i)
            count = int(buf[i + 1:end])
            i = end + 2
            args = []
            for _ in range(count):
                end = buf.index(b"\r\n", i)
                n = int(buf[i + 1:end])
                i = end + 2
                args.append(buf[i:i + n])
                i += n + 2
            name = args[0].decode(errors="replace").upper() if args else "?"
            if name in ("EVALSHA", "EVAL") and len(args) > 3:
                name = f"{name}[{args[3].decode(errors='replace')[:40]}]"
            elif name == "SET" and len(args) > 1:
                name = "SET " + " ".join(a.decode(errors="replace").upper() for a in args[3:])
            names.append(name)
        except (ValueError, IndexError):
            names.append("?")
            break
    return names


class RedisProxy:
    def __init__(self, upstream_port):
        self.upstream = ("127.0.0.1", upstream_port)
        self.log = []  # one entry per client chunk: [command names]
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            c, _ = self.sock.accept()
            u = socket.create_connection(self.upstream)
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(c, u, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, False), daemon=True).start()

    def _pump(self, src, dst, from_client):
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if from_client:
                    with self.lock:
                        self.log.append(resp_commands(b))
                dst.sendall(b)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _pks(obj, out, names):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in names and isinstance(v, dict) and "S" in v:
                out.append(v["S"])
            else:
                _pks(v, out, names)
    elif isinstance(obj, list):
        for v in obj:
            _pks(v, out, names)


def items_read(op, data):
    """(items the server read, items it returned) for one answer: a Query's or Scan's
    ScannedCount and Count, the items of a BatchGetItem or GetItem."""
    try:
        answer = json.loads(data) if data else {}
    except ValueError:
        return 0, 0
    if not isinstance(answer, dict):
        return 0, 0
    if op in ("Query", "Scan"):
        return answer.get("ScannedCount", 0), answer.get("Count", 0)
    if op == "BatchGetItem":
        n = sum(len(v) for v in (answer.get("Responses") or {}).values())
        return n, n
    if op == "GetItem":
        n = 1 if answer.get("Item") else 0
        return n, n
    return 0, 0


class DynamoProxy:
    def __init__(self, upstream_port, key_names=("pk",)):
        proxy = self
        self.log = []  # (operation, [item keys])
        self.reads = []  # (operation, items read, items returned), one per answer
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                op = self.headers.get("x-amz-target", "?").split(".")[-1]
                pks = []
                try:
                    _pks(json.loads(body), pks, key_names)
                except ValueError:
                    pass
                with proxy.lock:
                    proxy.log.append((op, pks))
                conn = getattr(self.server, "_up", None)
                for attempt in range(2):
                    try:
                        if conn is None:
                            conn = http.client.HTTPConnection("127.0.0.1", upstream_port)
                        headers = {k: v for k, v in self.headers.items()
                                   if k.lower() not in ("connection", "keep-alive")}
                        conn.request("POST", self.path, body=body, headers=headers)
                        r = conn.getresponse()
                        data = r.read()
                        break
                    except (OSError, http.client.HTTPException):
                        conn = None
                        if attempt:
                            raise
                self.server._up = None  # one upstream connection per request: simple and safe
                with proxy.lock:
                    proxy.reads.append((op, *items_read(op, data)))
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
