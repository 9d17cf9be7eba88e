#!/usr/bin/env python3
"""postonce's benchmark (issue 12): postonce beside a bare Rust client, interleaved, against
one redis-server and one DynamoDB Local started here. Run it through bench/run.sh.

Phases:
1. counting: a `postonce serve` and a bare client pointed at counting proxies (bench/proxies.py)
   make a few runs each; the Redis round trips (one per chunk the client writes) and the
   DynamoDB requests (one per HTTP request) are logged per run, and the bare client's sequence
   is checked to be postonce's.
2. CPU: a `postonce serve`, a local-mode `postonce serve` and the bare client talk to the servers
   directly. Each iteration does, in shuffled order, a new key and an already-posted key through
   postonce (a signed POST /ci, the second one repeating the first key's body) and the same
   through the bare client; utime+stime of each process (/proc/<pid>/stat) is read before and
   after each run. The sum of the per-task run times (/proc/<pid>/task/*/schedstat, ns) is read
   too, as a cross-check with nanosecond resolution.
3. cold: `postonce post … --image <loopback URL>` from exec to exit (wait4: wall, rusage maxrss).

--peers adds the peers (bench/peers/), each a worker that takes one `new <key>` / `posted <key>`
line per run: Powertools Idempotency (Python: the `idempotent` decorator with
DynamoDBPersistenceLayer, table peer-powertools) and the seed design in Node (SET claim NX EX 120,
consistent GetItem of the record, conditional PutItem if absent, compare-and-delete release by
EVALSHA; table peer-seed). bench/peers/install.sh installs them on first use (pinned:
requirements.txt into bench/peers/.venv, package-lock.json into bench/peers/node_modules); a peer
that cannot be installed is left out, saying so. Against the same servers, each peer is counted
through its own proxies in phase 1, runs in phase 2's shuffled loop (the CPU of its worker
process, same warm-up), and in phase 3 makes cold runs (`--once <key>`: exec → one new-key run →
exit); the table gets its column and postonce ÷ peer.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402
    TICK,
    cpu_rows,
    ROOT,
    vm_hwm_kb,
    shuffled,
    progress,
    Cpu,
    IMAGE_HITS,
    start,
    Services,
    base_env,
    aws_env,
    Serve,
    Bare,
    Keys,
    bare_line,
    expect,
)
from proxies import DynamoProxy, RedisProxy  # noqa: E402

PEERS_DIR = os.path.join(ROOT, "bench", "peers")
# name: (column label, install.sh argument, command, table, key-name letter)
PEERS = {
    "powertools": ("Powertools Idempotency (Python, DynamoDB)", "powertools",
                   [os.path.join(PEERS_DIR, ".venv", "bin", "python"),
                    os.path.join(PEERS_DIR, "powertools_peer.py")], "peer-powertools", "t"),
    "node seed": ("the seed design in Node (Redis + DynamoDB)", "node",
                  ["node", os.path.join(PEERS_DIR, "seed.js")], "peer-seed", "n"),
}


def install_peers():
    """The peers whose install (bench/peers/install.sh, first use only) worked."""
    ok = []
    for name, (label, what, *_rest) in PEERS.items():
        if subprocess.run([os.path.join(PEERS_DIR, "install.sh"), what]).returncode == 0:
            ok.append(name)
        else:
            print(f"--peers: {label} could not be installed (see above); its columns are left out",
                  flush=True)
    return ok


def peer_versions():
    with open(os.path.join(PEERS_DIR, "requirements.txt")) as f:
        py = dict(line.strip().split("==") for line in f if "==" in line)
    with open(os.path.join(PEERS_DIR, "package.json")) as f:
        js = json.load(f)["dependencies"]
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    return {"powertools": f"aws-lambda-powertools {py['aws_lambda_powertools']}, boto3 {py['boto3']}, "
                          f"Python {sys.version.split()[0]}",
            "node seed": f"redis {js['redis']}, @aws-sdk/client-dynamodb "
                         f"{js['@aws-sdk/client-dynamodb']}, Node {node}"}


def peer_env(svc, name, redis_port=None, ddb_port=None):
    env = aws_env(svc, redis_port, ddb_port)
    env["PEER_TABLE"] = PEERS[name][3]
    return env


class Peer:
    """A peer's worker (bench/peers/): `new <key>` or `posted <key>` in, `ok <outcome>` out."""

    def __init__(self, name, env, logdir, tag):
        self.name = name
        self.proc = start(PEERS[name][2], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=open(os.path.join(logdir, f"{PEERS[name][1]}-{tag}.log"), "w"),
                          text=True, bufsize=1)
        ready = self.proc.stdout.readline().strip()
        if ready != "ready":
            raise SystemExit(f"{name} peer did not start ({ready!r}); see its log in {logdir}")

    def run(self, kind, key):
        self.proc.stdin.write(f"{kind} {key}\n")
        out = self.proc.stdout.readline().strip()
        if out != ("ok posted" if kind == "new" else "ok already_posted"):
            raise SystemExit(f"{self.name} peer: {kind} {key} → {out!r}")

    def stop(self):
        hwm = vm_hwm_kb(self.proc.pid)
        self.proc.stdin.close()
        self.proc.wait(30)
        return hwm


LINKEDIN_DELAY = 0.150


def slow_linkedin():
    """A fake LinkedIn (its wire format: initializeUpload, the upload PUT, POST
    /rest/posts with the URN in x-restli-id) that answers every call after 150 ms. Returns its
    port and its log of (path, start, end) per call."""
    log, lock, counter = [], threading.Lock(), [0]

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def answer(self, status, body=b"", headers=()):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def handle_call(self):
            t0 = time.perf_counter()
            n = int(self.headers.get("content-length") or 0)
            if n:
                self.rfile.read(n)
            time.sleep(LINKEDIN_DELAY)
            with lock:
                counter[0] += 1
                i = counter[0]
            path = self.path.split("?")[0]
            if self.command == "POST" and "initializeUpload" in self.path:
                port = self.server.server_address[1]
                body = json.dumps({"value": {"uploadUrl": f"http://127.0.0.1:{port}/upload/{i}",
                                             "image": f"urn:li:image:bench{i}"}}).encode()
                self.answer(200, body, [("content-type", "application/json")])
            elif self.command == "PUT" and path.startswith("/upload/"):
                self.answer(201)
            elif self.command == "POST" and path == "/rest/posts":
                self.answer(201, headers=[("x-restli-id", f"urn:li:share:bench{i}")])
            else:
                self.answer(404, b'{"status":404,"message":"not found"}')
            with lock:
                log.append((self.command + " " + path, t0, time.perf_counter()))

        do_POST = do_PUT = handle_call

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, log


def latency_phase(args, svc, logdir, bare_new_wall):
    """A new key's run against a LinkedIn that answers each call after 150 ms, beside the sum
    of its unavoidable sequential calls: LinkedIn's initializeUpload (which the image fetch
    overlaps), the upload and the create as the fake timed them, plus the bare client's mean
    new-key wall (its Redis, DynamoDB and image calls back to back, nothing else)."""
    srv, log = slow_linkedin()
    env = aws_env(svc)
    env.update({"LINKEDIN_ACCESS_TOKEN": "bench-token", "LINKEDIN_AUTHOR": "urn:li:person:bench",
                "LINKEDIN_API_URL": f"http://127.0.0.1:{srv.server_address[1]}",
                "POSTONCE_TARGETS": "linkedin"})
    serve = Serve(args.postonce, env, logdir, "serve-latency")
    keys = Keys(f"http://127.0.0.1:{svc.image_port}/cover.png")
    walls, linkedin = [], []
    try:
        for i in range(args.latency_runs + 2):
            _, body, _ = keys.body("lat")
            del log[:]
            t0 = time.perf_counter()
            expect(*serve.post(body), "posted", "postonce against the slow LinkedIn")
            wall = time.perf_counter() - t0
            if len(log) != 3:
                raise SystemExit(f"latency: expected 3 LinkedIn calls, saw {[c[0] for c in log]}")
            if i >= 2:  # the first two warm the connections
                walls.append(wall)
                linkedin.append(sum(end - start for _, start, end in log))
    finally:
        serve.stop()
        srv.shutdown()
    run = statistics.median(walls)
    floor = statistics.median(linkedin) + bare_new_wall
    return run, floor, statistics.median(linkedin)


def counting_phase(args, svc, logdir):
    rp, dp = RedisProxy(svc.redis_port), DynamoProxy(svc.ddb_port)
    env = aws_env(svc, rp.port, dp.port)
    serve = Serve(args.postonce, env, logdir, "serve-counting")
    bare = Bare(args.bare, env)
    keys = Keys(f"http://127.0.0.1:{svc.image_port}/cover.png")
    seqs = {}

    def counted(name, fn):
        r0, d0, i0 = len(rp.log), len(dp.log), IMAGE_HITS[0]
        fn()
        time.sleep(0.05)  # let the proxies log the last chunk
        seq = ([" + ".join(c) for c in rp.log[r0:]], [f"{op}({', '.join(p)})" for op, p in dp.log[d0:]],
               IMAGE_HITS[0] - i0)
        seqs.setdefault(name, []).append(seq)

    try:
        for i in range(args.count_runs + 1):  # the first pair warms connections and scripts
            _, body, fields = keys.body("c")
            counted("postonce new", lambda: expect(*serve.post(body), "posted", "postonce new"))
            counted("postonce posted",
                    lambda: expect(*serve.post(body), "already_posted", "postonce posted"))
            _, body, fields = keys.body("d")
            counted("bare new", lambda: bare.run(bare_line("new", fields)))
            counted("bare posted", lambda: bare.run(bare_line("posted", fields)))
        # A cold run of each, exec to exit, as the cold phase makes them: the start's requests
        # (the stored credentials' read, the connections' set-up) with the run's.
        _, _, fields = keys.body("e")
        counted("postonce cold", lambda: cold_postonce(args.postonce, env, fields))
        _, _, fields = keys.body("f")
        counted("bare cold", lambda: cold_bare(args.bare, env, fields))
    finally:
        serve.stop()
        bare.stop()
    result = {}
    for name, runs in seqs.items():
        # The first warm run of each warms connections and scripts; a cold run is one on its own.
        steady = runs if name.endswith(" cold") else runs[1:]
        r = [len(s[0]) for s in steady]
        d = [len(s[1]) for s in steady]
        img = [s[2] for s in steady]
        result[name] = (statistics.median(r), statistics.median(d), steady[-1][:2],
                        statistics.median(img))
    return result


def peer_counting(args, svc, logdir, names):
    """The counting phase for the peers: each one's requests through its own counting proxies
    (DynamoDB item keys `pk`, and Powertools' `id`)."""
    rp, dp = RedisProxy(svc.redis_port), DynamoProxy(svc.ddb_port, key_names=("pk", "id"))
    keys = Keys(f"http://127.0.0.1:{svc.image_port}/cover.png")
    result = {}
    for name in names:
        peer = Peer(name, peer_env(svc, name, rp.port, dp.port), logdir, "counting")
        seqs = {"new": [], "posted": []}
        try:
            for _ in range(args.count_runs + 1):  # the first pair warms connections and scripts
                key = keys.body(PEERS[name][4])[0]
                for kind in ("new", "posted"):
                    r0, d0 = len(rp.log), len(dp.log)
                    peer.run(kind, key)
                    time.sleep(0.05)  # let the proxies log the last chunk
                    seqs[kind].append(([" + ".join(c) for c in rp.log[r0:]],
                                       [f"{op}({', '.join(p)})" for op, p in dp.log[d0:]]))
        finally:
            peer.stop()
        for kind, runs in seqs.items():
            steady = runs[1:]
            result[f"{name} {kind}"] = (statistics.median(len(s[0]) for s in steady),
                                        statistics.median(len(s[1]) for s in steady), steady[-1])
    return result


def strip_keys(seq):
    """A sequence with the key names generalised, to compare postonce's and the bare client's."""
    import re
    return [re.sub(r"caption:[0-9a-f]{64}", "caption:<hash>",
                   re.sub(r"bench-[a-z]-[0-9a-f]{6}-\d+", "<key>", s)) for s in seq]


def strip_peer_keys(seq):
    """strip_keys, and Powertools' hashed idempotency key (<function>#<md5 of the key>)."""
    import re
    return [re.sub(r"#[0-9a-f]{32}\b", "#<md5>", s) for s in strip_keys(seq)]


def timed(cmd, rss_file):
    """`cmd` under /usr/bin/time, which writes its peak RSS: a child forked from this Python
    process would report Python's own resident size as its ru_maxrss."""
    return ["/usr/bin/time", "-f", "%M", "-o", rss_file, *cmd]


def wait_child(p, t0, rss_file):
    _, status, ru = os.wait4(p.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(rss_file) as f:
        rss_kb = int(f.read().split()[-1])
    return wall, rss_kb / 1024, (ru.ru_utime + ru.ru_stime) * 1000


def post_cmd(binary, f):
    """`postonce post` of the draft `f` (a Keys body's fields), as a person or CI would."""
    return [binary, "post", "--kind", f["kind"], "--slug", f["slug"], "--caption", f["caption"],
            "--image", f["image_url"], "--link", f["link"], "--json"]


def cold_postonce(binary, env, f):
    p = subprocess.run(post_cmd(binary, f), env=env, capture_output=True)
    if p.returncode != 0 or b'"posted"' not in p.stdout:
        raise SystemExit(f"cold run failed ({p.returncode}): {p.stdout[:300]!r}")


def cold_bare(binary, env, f):
    out = subprocess.run([binary], env=env, input=bare_line("new", f).encode() + b"\n",
                         capture_output=True).stdout
    if b"ok posted" not in out:
        raise SystemExit(f"bare cold run failed: {out[:300]!r}")


def cold_runs(args, svc, n, peers=()):
    """Exec → a full new-key dry run done → exit, for postonce (`postonce post`), the bare
    client (one line on stdin) and each peer (`--once <key>`), alternated; wall, peak RSS and
    CPU of each process (the wall includes /usr/bin/time's own exec, on every side)."""
    res = {"p": [], "b": [], **{name: [] for name in peers}}
    env = aws_env(svc)
    rss_file = os.path.join(svc.dir, "rss")
    keys = Keys(f"http://127.0.0.1:{svc.image_port}/cover.png")
    for _ in range(n):
        _, _, f = keys.body("cold")
        cmd = post_cmd(args.postonce, f)
        t0 = time.perf_counter()
        p = subprocess.Popen(timed(cmd, rss_file), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        out = p.stdout.read()
        res["p"].append(wait_child(p, t0, rss_file))
        if p.returncode != 0 or b'"posted"' not in out:
            raise SystemExit(f"cold run failed ({p.returncode}): {out[:300]!r}")
        _, _, f = keys.body("cold")
        t0 = time.perf_counter()
        p = subprocess.Popen(timed([args.bare], rss_file), env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        p.stdin.write(bare_line("new", f).encode() + b"\n")
        p.stdin.close()
        out = p.stdout.read()
        res["b"].append(wait_child(p, t0, rss_file))
        if b"ok posted" not in out:
            raise SystemExit(f"bare cold run failed: {out[:300]!r}")
        for name in peers:
            key = keys.body(PEERS[name][4])[0]
            t0 = time.perf_counter()
            p = subprocess.Popen(timed([*PEERS[name][2], "--once", key], rss_file),
                                 env=peer_env(svc, name), stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
            out = p.stdout.read()
            res[name].append(wait_child(p, t0, rss_file))
            if p.returncode != 0 or out.strip() != b"ok posted":
                raise SystemExit(f"{name} cold run failed ({p.returncode}): {out[:300]!r}")

    def summary(rows):
        return (statistics.median(r[0] for r in rows), max(r[1] for r in rows),
                statistics.median(r[2] for r in rows))
    return summary(res["p"]), summary(res["b"]), {name: summary(res[name]) for name in peers}


def stripped_size(binary):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "stripped")
        subprocess.run(["strip", "-o", out, binary], check=True)
        return os.path.getsize(out) / 1e6, os.path.getsize(binary) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000, help="CPU-phase iterations (default 2000)")
    ap.add_argument("--cold", type=int, default=20, help="cold runs (default 20)")
    ap.add_argument("--count-runs", type=int, default=5, help="counting-phase runs (default 5)")
    ap.add_argument("--latency-runs", type=int, default=20,
                    help="new-key runs against the 150 ms LinkedIn (default 20)")
    ap.add_argument("--peers", action="store_true", help="also run the peers (bench/peers/)")
    ap.add_argument("--postonce", required=True)
    ap.add_argument("--bare", required=True)
    ap.add_argument("--ddb-dir", required=True)
    ap.add_argument("--postgres", metavar="BINARY",
                    help="also the PostgreSQL phase (bench/pg_phase.py), with this postonce built "
                         "with the `postgres` feature")
    ap.add_argument("--pg-runs", type=int, help="PostgreSQL CPU-phase iterations (default --runs)")
    ap.add_argument("--keep", action="store_true", help="keep the logs folder")
    args = ap.parse_args()
    args.pg_runs = args.pg_runs or args.runs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    peers = install_peers() if args.peers else []

    svc = Services(args.ddb_dir, args.keep)
    logdir = svc.dir
    try:
        subprocess.run([args.postonce, "table", "create"], env=aws_env(svc), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"servers: redis-server :{svc.redis_port}, DynamoDB Local :{svc.ddb_port}, "
              f"image :{svc.image_port}; logs in {logdir}", flush=True)
        for name in list(peers):
            r = subprocess.run([*PEERS[name][2], "--create-table"], env=peer_env(svc, name),
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"--peers: {name}: its table could not be created, its columns are left "
                      f"out:\n{r.stderr.strip()[-600:]}", flush=True)
                peers.remove(name)

        counts = counting_phase(args, svc, logdir)
        for name in ("postonce new", "bare new", "postonce posted", "bare posted",
                     "postonce cold", "bare cold"):
            r, d, (rseq, dseq), img = counts[name]
            print(f"  {name:16} image {img}, Redis {r} [{'; '.join(strip_keys(rseq))}]", flush=True)
            print(f"  {'':16} DynamoDB {d} [{'; '.join(strip_keys(dseq))}]", flush=True)
        for kind in ("new", "posted", "cold"):
            a, b = counts[f"postonce {kind}"][2], counts[f"bare {kind}"][2]
            same = ([strip_keys(x) for x in a] == [strip_keys(x) for x in b]
                    and counts[f"postonce {kind}"][3] == counts[f"bare {kind}"][3])
            what = "cold-run" if kind == "cold" else f"{kind}-key"
            print(f"  the bare client's {what} requests are postonce's: {'yes' if same else 'NO'}",
                  flush=True)
        if peers:
            counts.update(peer_counting(args, svc, logdir, peers))
            for name in (f"{n} {kind}" for kind in ("new", "posted") for n in peers):
                r, d, (rseq, dseq) = counts[name]
                print(f"  {name:17} Redis {r} [{'; '.join(strip_peer_keys(rseq))}]", flush=True)
                print(f"  {'':17} DynamoDB {d} [{'; '.join(strip_peer_keys(dseq))}]", flush=True)

        env = aws_env(svc)
        serve = Serve(args.postonce, env, logdir, "serve")
        local_dir = os.path.join(logdir, "local-store")
        lenv = base_env()
        lenv.update({"POSTONCE_DATA_DIR": local_dir,
                     "POSTONCE_IMAGE_HOSTS": f"http://127.0.0.1:{svc.image_port}"})
        local = Serve(args.postonce, lenv, logdir, "serve-local")
        bare = Bare(args.bare, env)
        entry = Serve(args.bare, env, logdir, "bare-entry")
        keys = Keys(f"http://127.0.0.1:{svc.image_port}/cover.png")
        cpu = {n: Cpu(p) for n, p in [("p new", serve.proc.pid), ("p posted", serve.proc.pid),
                                      ("b new", bare.proc.pid), ("b posted", bare.proc.pid),
                                      ("e new", entry.proc.pid), ("e posted", entry.proc.pid),
                                      ("l new", local.proc.pid)]}
        workers = {n: Peer(n, peer_env(svc, n), logdir, "cpu") for n in peers}
        for n, w in workers.items():
            cpu[f"{n} new"], cpu[f"{n} posted"] = Cpu(w.proc.pid), Cpu(w.proc.pid)
        warm = max(20, args.runs // 50)
        t_start = time.time()
        for i in range(warm + args.runs):
            _, pbody, _ = keys.body("p")
            _, _, bfields = keys.body("b")
            _, lbody, _ = keys.body("l")
            _, ebody, _ = keys.body("e")
            steps = [
                ("e", lambda: (cpu["e new"] if i >= warm else Cpu(entry.proc.pid)).measure(
                    lambda: expect(*entry.post(ebody), "posted", "bare entry new"))),
                ("p", lambda: (cpu["p new"] if i >= warm else Cpu(serve.proc.pid)).measure(
                    lambda: expect(*serve.post(pbody), "posted", "postonce new"))),
                ("b", lambda: (cpu["b new"] if i >= warm else Cpu(bare.proc.pid)).measure(
                    lambda: bare.run(bare_line("new", bfields)))),
                ("l", lambda: (cpu["l new"] if i >= warm else Cpu(local.proc.pid)).measure(
                    lambda: expect(*local.post(lbody), "posted", "local new"))),
            ]
            wkeys = {n: keys.body(PEERS[n][4])[0] for n in workers}
            steps += [(n, lambda n=n, w=w: (cpu[f"{n} new"] if i >= warm else Cpu(w.proc.pid)).measure(
                lambda: w.run("new", wkeys[n]))) for n, w in workers.items()]
            shuffled([step for _, step in steps])
            steps = [
                lambda: (cpu["e posted"] if i >= warm else Cpu(entry.proc.pid)).measure(
                    lambda: expect(*entry.post(ebody), "already_posted", "bare entry posted")),
                lambda: (cpu["p posted"] if i >= warm else Cpu(serve.proc.pid)).measure(
                    lambda: expect(*serve.post(pbody), "already_posted", "postonce posted")),
                lambda: (cpu["b posted"] if i >= warm else Cpu(bare.proc.pid)).measure(
                    lambda: bare.run(bare_line("posted", bfields))),
            ]
            steps += [lambda n=n, w=w: (cpu[f"{n} posted"] if i >= warm else Cpu(w.proc.pid)).measure(
                lambda: w.run("posted", wkeys[n])) for n, w in workers.items()]
            shuffled(steps)
            progress("", i, warm, args.runs, t_start)
        serve_hwm = serve.stop()
        local.stop()
        bare_hwm = bare.stop()
        entry.stop()
        lat_run, lat_floor, lat_linkedin = latency_phase(
            args, svc, logdir, cpu["b new"].wall / max(cpu["b new"].runs, 1))
        peer_hwm = {n: w.stop() for n, w in workers.items()}

        (cold_ms, cold_rss, cold_cpu), (bcold_ms, bcold_rss, bcold_cpu), peer_cold = cold_runs(
            args, svc, args.cold, peers)
        size, unstripped = stripped_size(args.postonce)
        if args.postgres:
            import pg_phase
            pg_counts, pg_cpu = pg_phase.run(args, svc.image_port, logdir)
    finally:
        svc.stop()

    def ratio(a, b):
        return f"{a / b:.2f}×" if b else "—"

    pn, pp, bn, bp, ln = (cpu[k] for k in ("p new", "p posted", "b new", "b posted", "l new"))
    rows = [
        *cpu_rows(pn, pp, bn, bp, ratio),
        ("CPU per new key in local mode (file store)", f"{ln.ms():.2f} ms", "", ""),
        ("wall per run, new / posted (mean)", f"{pn.wall / pn.runs * 1000:.2f} / {pp.wall / pp.runs * 1000:.2f} ms",
         f"{bn.wall / bn.runs * 1000:.2f} / {bp.wall / bp.runs * 1000:.2f} ms", ""),
        ("DynamoDB requests, new / already posted",
         f"{counts['postonce new'][1]} / {counts['postonce posted'][1]}",
         f"{counts['bare new'][1]} / {counts['bare posted'][1]}", ""),
        ("Redis round trips, new / already posted",
         f"{counts['postonce new'][0]} / {counts['postonce posted'][0]}",
         f"{counts['bare new'][0]} / {counts['bare posted'][0]}", ""),
        (f"cold: exec → a full new-key dry run done (median of {args.cold})", f"{cold_ms:.1f} ms",
         f"{bcold_ms:.1f} ms", ratio(cold_ms, bcold_ms)),
        ("  start-up beyond the bare client's cold run", f"{cold_ms - bcold_ms:+.1f} ms", "", ""),
        ("  CPU of a cold run (median)", f"{cold_cpu:.1f} ms", f"{bcold_cpu:.1f} ms", ratio(cold_cpu, bcold_cpu)),
        ("peak RSS (cold run / serve)", f"{cold_rss:.1f} MB / {serve_hwm / 1024:.1f} MB",
         f"{bcold_rss:.1f} MB / {bare_hwm / 1024:.1f} MB",
         f"{ratio(cold_rss, bcold_rss)} / {ratio(serve_hwm, bare_hwm)}"),
        ("release binary, stripped", f"{size:.1f} MB", "", ""),
        (f"new key against a LinkedIn answering in 150 ms (median of {args.latency_runs})",
         f"{lat_run * 1000:.0f} ms", "", ""),
        ("  its unavoidable sequential calls: LinkedIn's 3 as timed at the fake + the bare new-key wall",
         f"{lat_floor * 1000:.0f} ms ({lat_linkedin * 1000:.0f} + {(lat_floor - lat_linkedin) * 1000:.0f})",
         "", f"{ratio(lat_run, lat_floor)} of it"),
    ]
    print()
    print(f"postonce benchmark: {args.runs} runs per kind, interleaved; CPU = utime+stime from "
          f"/proc/<pid>/stat (tick {1000 // TICK} ms) summed over the runs ÷ runs")
    def peer_cells(n):
        """Two cells per row for peer n: its value, and postonce ÷ it."""
        new, posted = cpu[f"{n} new"], cpu[f"{n} posted"]
        c_ms, c_rss, c_cpu = peer_cold[n]
        hwm = peer_hwm[n]
        return [
            (f"{new.ms():.2f} ms", ratio(pn.ms(), new.ms())),
            (f"{posted.ms():.2f} ms", ratio(pp.ms(), posted.ms())),
            (f"{new.ns_ms():.2f} / {posted.ns_ms():.2f} ms",
             f"{ratio(pn.ns_ms(), new.ns_ms())} / {ratio(pp.ns_ms(), posted.ns_ms())}"),
            ("", ""),
            (f"{new.wall / new.runs * 1000:.2f} / {posted.wall / posted.runs * 1000:.2f} ms", ""),
            (f"{counts[f'{n} new'][1]} / {counts[f'{n} posted'][1]}", ""),
            (f"{counts[f'{n} new'][0]} / {counts[f'{n} posted'][0]}", ""),
            (f"{c_ms:.1f} ms", ratio(cold_ms, c_ms)),
            (f"{c_ms - bcold_ms:+.1f} ms", ""),
            (f"{c_cpu:.1f} ms", ratio(cold_cpu, c_cpu)),
            (f"{c_rss:.1f} MB / {hwm / 1024:.1f} MB", f"{ratio(cold_rss, c_rss)} / {ratio(serve_hwm, hwm)}"),
            ("", ""),
            ("", ""),
            ("", ""),
        ]

    extra = [peer_cells(n) for n in peers]
    if peers:
        versions = peer_versions()
        print("peers (bench/peers/): " + "; ".join(f"{PEERS[n][0]}: {versions[n]}" for n in peers)
              + ". A peer's CPU is its worker's, measured the same way in the same shuffled loop; "
              "its cold run is `--once <key>`, exec to exit; its peak RSS is cold run / worker.")
    print()
    head = ["postonce", "bare client", "postonce ÷ bare"]
    for n in peers:
        head += [PEERS[n][0], f"postonce ÷ {n}"]
    print("| | " + " | ".join(head) + " |")
    print("|---|" + "---|" * len(head))
    for i, r in enumerate(rows):
        print("| " + " | ".join([*r, *(c for cells in extra for c in cells[i])]) + " |")
    if args.peers and not peers:
        print()
        print("--peers: no peer could be installed or started (see above)")
    print()
    print("The bare client behind postonce's entry (`bench_bare serve`: the same signed POST /ci, "
          "its HMAC check, its JSON read and a JSON answer; no logging, no pipeline), in the same "
          "loop:")
    print()
    print_entry_table(pn, pp, cpu["e new"], cpu["e posted"], ratio)
    if args.postgres:
        print()
        print(f"PostgreSQL (claims in the database, no Redis; `postonce serve` built with the "
              f"`postgres` feature; {args.pg_runs} runs per kind, interleaved):")
        print()
        print("| | postonce | bare client | postonce ÷ bare |")
        print("|---|---|---|---|")
        for r in pg_phase.rows(pg_counts, pg_cpu, ratio):
            print("| " + " | ".join(r) + " |")
        print()
        print("PostgreSQL, the bare client behind postonce's entry:")
        print()
        print_entry_table(*(pg_cpu[k] for k in ("p new", "p posted", "e new", "e posted")), ratio)


def print_entry_table(pn, pp, en, ep, ratio):
    print("| | postonce | bare client behind the entry | postonce ÷ it |")
    print("|---|---|---|---|")
    for r in cpu_rows(pn, pp, en, ep, ratio):
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
