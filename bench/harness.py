"""What the benchmark's phases share (bench/bench.py, bench/pg_phase.py, bench/sweep.py): free
ports, the processes it starts and stops, the servers of the DynamoDB phases, the cover on
loopback, `postonce serve` and the bare client as the phases drive them, the drafts' bodies, and
CPU measured per process."""
import hashlib
import hmac
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = "bench-webhook-secret"
TABLE = "postonce-bench"
TICK = os.sysconf("SC_CLK_TCK")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc=None, timeout=60.0):
    end = time.time() + timeout
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"process {proc.args} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port} after {timeout}s")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14, 15)


def cpu_ns(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def vm_hwm_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def shuffled(steps):
    """Runs the steps in a random order (the CPU phases interleave their sides so)."""
    random.shuffle(steps)
    for step in steps:
        step()


def progress(what, i, warm, runs, t0):
    """A CPU phase's progress line, every 500 iterations (the warm-up counts as 0)."""
    if (i + 1) % 500 == 0:
        print(f"  … {what}{i + 1 - warm if i >= warm else 0}/{runs} runs "
              f"({time.time() - t0:.0f}s)", flush=True)


def cpu_rows(pn, pp, bn, bp, ratio):
    """The CPU rows of a table: postonce's new and posted keys (`pn`, `pp`: Cpu) against another
    side's (`bn`, `bp`), in ticks, then in schedstat's nanoseconds."""
    return [
        ("CPU per new key (signed POST /ci through serve)", f"{pn.ms():.2f} ms",
         f"{bn.ms():.2f} ms", ratio(pn.ms(), bn.ms())),
        ("CPU per already-posted key (CI carries the draft)", f"{pp.ms():.2f} ms",
         f"{bp.ms():.2f} ms", ratio(pp.ms(), bp.ms())),
        ("  same, schedstat (ns resolution): new / posted",
         f"{pn.ns_ms():.2f} / {pp.ns_ms():.2f} ms", f"{bn.ns_ms():.2f} / {bp.ns_ms():.2f} ms",
         f"{ratio(pn.ns_ms(), bn.ns_ms())} / {ratio(pp.ns_ms(), bp.ns_ms())}"),
    ]


class Cpu:
    """CPU of one process, summed over the runs of one kind."""

    def __init__(self, pid):
        self.pid, self.ticks, self.ns, self.runs, self.wall = pid, 0, 0, 0, 0.0

    def measure(self, fn):
        t0, n0, w0 = cpu_ticks(self.pid), cpu_ns(self.pid), time.perf_counter()
        out = fn()
        self.wall += time.perf_counter() - w0
        self.ticks += cpu_ticks(self.pid) - t0
        self.ns += cpu_ns(self.pid) - n0
        self.runs += 1
        return out

    def ms(self):
        return self.ticks * 1000.0 / TICK / max(self.runs, 1)

    def ns_ms(self):
        return self.ns / 1e6 / max(self.runs, 1)


IMAGE_HITS = [0]


def image_server(path):
    data = open(path, "rb").read()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            IMAGE_HITS[0] += 1
            self.send_response(200)
            self.send_header("content-type", "image/png")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


# Every process this benchmark starts, stopped on the way out whatever happens.
STARTED = []


def start(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    STARTED.append(p)
    return p


def stop_all():
    for p in STARTED:
        if p.poll() is None:
            p.terminate()
    for p in STARTED:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


class Services:
    def __init__(self, ddb_dir, keep):
        self.procs, self.dir = [], tempfile.mkdtemp(prefix="postonce-bench-")
        self.keep = keep
        self.redis_port = free_port()
        self.procs.append(start(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.ddb_port = free_port()
        self.procs.append(start(
            ["java", "-Xms32m", "-Xmx384m", f"-Djava.library.path={ddb_dir}/DynamoDBLocal_lib",
             "-jar", f"{ddb_dir}/DynamoDBLocal.jar", "-inMemory", "-sharedDb",
             "-disableTelemetry", "-port", str(self.ddb_port)],
            stdout=open(os.path.join(self.dir, "dynamodb.log"), "w"), stderr=subprocess.STDOUT))
        wait_port(self.redis_port, self.procs[0])
        wait_port(self.ddb_port, self.procs[1], timeout=120)
        self.image_port = image_server(os.path.join(ROOT, "examples", "cover.png"))

    def redis(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.redis_port), *args],
                              capture_output=True, text=True, check=True).stdout

    def stop(self):
        stop_all()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def base_env():
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env["POSTONCE_WEBHOOK_SECRET"] = SECRET
    return env


def aws_env(svc, redis_port=None, ddb_port=None):
    env = base_env()
    env.update({
        "POSTONCE_TABLE": TABLE,
        "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{ddb_port or svc.ddb_port}",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port or svc.redis_port}/",
        "POSTONCE_IMAGE_HOSTS": f"http://127.0.0.1:{svc.image_port}",
    })
    return env


class Serve:
    """A `postonce serve` and a keep-alive HTTP connection to it."""

    def __init__(self, binary, env, logdir, name):
        self.port = free_port()
        self.proc = start([binary, "serve", "--addr", f"127.0.0.1:{self.port}"], env=env,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(logdir, f"{name}.log"), "w"))
        wait_port(self.port, self.proc)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port)
        self.cpu = {}

    def post(self, body):
        sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        self.conn.request("POST", "/ci", body=body, headers={
            "content-type": "application/json", "x-hub-signature-256": sig,
            "x-github-event": "pull_request"})
        r = self.conn.getresponse()
        data = r.read()
        return r.status, json.loads(data)

    def stop(self):
        hwm = vm_hwm_kb(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return hwm


class Bare:
    """The bare client (bench/bare/): one line in, one run, one line out."""

    def __init__(self, binary, env):
        self.proc = start([binary], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        ready = self.proc.stdout.readline().strip()
        if ready != "ready":
            raise SystemExit(f"bare client did not start: {ready!r}")

    def run(self, line):
        self.proc.stdin.write(line + "\n")
        out = self.proc.stdout.readline().strip()
        if not out.startswith("ok "):
            raise SystemExit(f"bare client: {line!r} → {out!r}")
        return out[3:]

    def stop(self):
        hwm = vm_hwm_kb(self.proc.pid)
        self.proc.stdin.close()
        self.proc.wait(30)
        return hwm


class Keys:
    def __init__(self, image_url):
        self.n, self.tag, self.image_url = 0, "%06x" % random.getrandbits(24), image_url

    def body(self, prefix):
        self.n += 1
        slug = f"{prefix}-{self.tag}-{self.n}"
        # Each draft its own cover URL, as drafts have (the image server answers any path with
        # the same file): nothing a run keeps of the one before can answer for this one.
        base, name = self.image_url.rsplit("/", 1)
        stem, ext = name.rsplit(".", 1)
        body = {"kind": "bench", "slug": slug,
                "caption": f"Benchmark post {self.tag}-{self.n}: one draft, posted exactly once.",
                "image_url": f"{base}/{stem}-{self.tag}-{self.n}.{ext}",
                "link": "https://example.com/posts/bench"}
        return f"bench-{slug}", json.dumps(body, separators=(",", ":")).encode(), body


def bare_line(kind, body):
    # kind: new | posted; the bare client gets the fields the CI body carries, and the caption
    # hash (postonce computes it; the bare client only makes requests).
    text = f"{body['caption']}\n\n{body['link']}"
    digest = hashlib.sha256(text.encode()).hexdigest()
    return "\t".join([kind, f"{body['kind']}-{body['slug']}", body["caption"], body["image_url"],
                      body["link"], digest])


def expect(status, out, outcome, what):
    if out.get("outcome") != outcome:
        raise SystemExit(f"{what}: expected {outcome}, got {status} {out}")
