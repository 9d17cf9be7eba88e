#!/usr/bin/env python3
"""The sweep's cost on every record store (issue 22): files, DynamoDB Local (through the counting
proxy of bench/proxies.py) and PostgreSQL. Run it through bench/sweep.sh.

For each store, two sweeps (`postonce sweep --json`, the dry-run publisher) of D due drafts:
1. among D stored drafts (the due ones only);
2. among N stored drafts (default 100,000): a filler of N - 2D drafts, half posted (out of the due
   index), half scheduled for next month (in the index, not due), written in bulk in the store's
   own format (DynamoDB BatchWriteItem, one PostgreSQL INSERT ... SELECT, the JSON files and
   due-index entries written directly), then D more due drafts.
The due drafts are made through the CLI (`postonce post ... --at <soon>`) and swept once due.

Per sweep: its wall time (exec to exit); its round trips (DynamoDB: requests per operation at
the proxy; PostgreSQL: transactions, each statement being one); what the listing read
(DynamoDB: the queries' ScannedCount; PostgreSQL: the rows read by the listing's plan, EXPLAIN
ANALYZE, per swept status; files: draft files opened before the sweep's first write, seen with
inotify, which include the first run's own read); what the whole sweep read (DynamoDB: items
read; PostgreSQL: rows of postonce_drafts fetched, pg_stat_user_tables) and how many distinct
drafts it touched (files: the distinct draft files opened). The DynamoDB part also counts one
run of a new draft (`postonce post`, as CI sends one) for comparison. Timings are printed as
ratios, never asserted.
"""
import argparse
import ctypes
import ctypes.util
import http.client
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from proxies import DynamoProxy  # noqa: E402

# The sweep's statuses (src/pipeline/sweep.rs SWEPT).
SWEPT = ["new", "failed", "unknown", "needs_review", "scheduled"]
NS = "dryrun:"  # the dry-run publisher's namespace (no network credentials are set)
DUE_IN = 20  # seconds between making the due drafts and their time


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def cli_env(extra, image_port):
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env.update({
        "POSTONCE_IMAGE_HOSTS": f"http://127.0.0.1:{image_port}",
        # One sweep runs all due drafts: a budget that never leaves one for later.
        "POSTONCE_FUNCTION_TIMEOUT_S": "300",
        "POSTONCE_CLAIM_TTL_S": "400",
        "RUST_LOG": "off",
    })
    env.update(extra)
    return env


def run_cli(binary, env, args, check=True):
    p = subprocess.run([binary, *args], env=env, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"postonce {' '.join(args[:2])} exited {p.returncode}: "
                         f"{p.stderr.strip()[-800:]}")
    return p


def make_due(binary, env, image_port, tag, n):
    """n drafts scheduled DUE_IN seconds ahead, through the CLI; waits until they are due."""
    at = int(time.time()) + DUE_IN
    image = f"http://127.0.0.1:{image_port}/cover.png"

    def one(i):
        p = run_cli(binary, env, ["post", "--kind", "bench", "--slug", f"{tag}-{i}",
                                  "--caption", f"Due draft {tag} number {i}", "--image", image,
                                  "--at", rfc3339(at), "--json"])
        if json.loads(p.stdout).get("outcome") != "scheduled":
            raise SystemExit(f"{tag}-{i} was not scheduled (raise DUE_IN): {p.stdout[:300]}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(n)))
    left = at + 1.5 - time.time()
    if left > 0:
        time.sleep(left)


def sweep(binary, env, due):
    t0 = time.perf_counter()
    p = run_cli(binary, env, ["sweep", "--json"])
    wall = time.perf_counter() - t0
    report = json.loads(p.stdout)
    posted = sum(1 for r in report["runs"] if r["outcome"] == "posted")
    if posted != due or report["left_for_later"]:
        raise SystemExit(f"the sweep posted {posted} of {due} due drafts: "
                         f"{json.dumps(report)[:800]}")
    return wall, report


# --- DynamoDB -----------------------------------------------------------------------------

def ddb_call(port, op, body):
    """One request straight to DynamoDB Local (which checks the form of the signature, not the
    signature itself): the seeding only, never counted."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/", body=json.dumps(body), headers={
        "content-type": "application/x-amz-json-1.0",
        "x-amz-target": f"DynamoDB_20120810.{op}",
        "authorization": "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/dynamodb/"
                         "aws4_request, SignedHeaders=host;x-amz-date, Signature=00",
    })
    r = conn.getresponse()
    data = json.loads(r.read() or b"{}")
    conn.close()
    if r.status != 200:
        raise SystemExit(f"DynamoDB {op}: {r.status} {data}")
    return data


def filler_drafts(n, now):
    """(key, posted?, due_at) of the filler: half posted, half scheduled for next month."""
    month = now + 30 * 24 * 3600
    return [(f"bulk-d{i}", i % 2 == 0, month + i) for i in range(n)]


def ddb_seed(port, table, n, now):
    s, num = (lambda v: {"S": v}), (lambda v: {"N": str(v)})
    month = now + 30 * 24 * 3600

    def item(key, posted, due_at):
        it = {"pk": s(f"{NS}draft:{key}"), "key": s(key), "caption": s("filler"),
              "image": s("https://cdn.example.com/x.png"), "attempts": num(0),
              "retryable": {"BOOL": True}, "created_at": num(now), "updated_at": num(now)}
        if posted:
            it.update(status=s("posted"), expires_at=num(month))
        else:
            it.update(status=s("scheduled"), queue=s(f"{NS}scheduled"), due_at=num(due_at),
                      publish_at=num(month))
        return {"PutRequest": {"Item": it}}

    reqs = [item(*d) for d in filler_drafts(n, now)]

    def batch(chunk):
        left = chunk
        while left:
            out = ddb_call(port, "BatchWriteItem", {"RequestItems": {table: left}})
            left = out.get("UnprocessedItems", {}).get(table, [])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(batch, [reqs[i:i + 25] for i in range(0, len(reqs), 25)]))


def ddb_count(proxy, a, b):
    ops = {}
    for op, _ in proxy.log[a[0]:b[0]]:
        ops[op] = ops.get(op, 0) + 1
    reads = proxy.reads[a[1]:b[1]]
    listing = sum(sc for op, sc, _ in reads if op == "Query")
    items = sum(sc for _, sc, _ in reads)
    drafts = {pk for _, pks in proxy.log[a[0]:b[0]] for pk in pks if ":draft:" in f":{pk}"}
    return ops, listing, items, len(drafts)


def dynamodb_store(args, out):
    svc = harness.Services(args.ddb_dir, args.keep)
    try:
        proxy = DynamoProxy(svc.ddb_port)
        env = cli_env({k: v for k, v in harness.aws_env(svc, ddb_port=proxy.port).items()
                       if k.startswith(("POSTONCE_TABLE", "AWS_", "REDIS_"))}, svc.image_port)
        run_cli(args.postonce, env, ["table", "create"])
        # One new draft, as CI sends one, for comparison.
        mark = (len(proxy.log), len(proxy.reads))
        image = f"http://127.0.0.1:{svc.image_port}/cover.png"
        run_cli(args.postonce, env, ["post", "--kind", "bench", "--slug", "ci-new", "--caption",
                                     "A new draft, as CI sends one", "--image", image, "--json"])
        time.sleep(0.1)
        ci_ops, *_ = ddb_count(proxy, mark, (len(proxy.log), len(proxy.reads)))
        print(f"  dynamodb: a new draft (postonce post): {sum(ci_ops.values())} requests "
              f"{fmt_ops(ci_ops)}", flush=True)
        for phase, stored in (("a", args.due), ("b", args.stored)):
            if phase == "b":
                t0 = time.perf_counter()
                n = args.stored - 2 * args.due
                ddb_seed(svc.ddb_port, harness.TABLE, n, int(time.time()))
                print(f"  dynamodb: seeded {n} drafts in {time.perf_counter() - t0:.1f}s "
                      f"(BatchWriteItem)", flush=True)
            make_due(args.postonce, env, svc.image_port, f"due{phase}", args.due)
            mark = (len(proxy.log), len(proxy.reads))
            wall, report = sweep(args.postonce, env, args.due)
            time.sleep(0.1)
            ops, listing, items, touched = ddb_count(proxy, mark, (len(proxy.log),
                                                                   len(proxy.reads)))
            out.append(("dynamodb", stored, args.due, wall, sum(ops.values()), fmt_ops(ops),
                        listing, items, touched))
            print(f"  dynamodb, {stored} stored: {wall:.2f}s, {sum(ops.values())} requests "
                  f"{fmt_ops(ops)}, listing read {listing} items, the sweep {items}, "
                  f"{touched} drafts touched", flush=True)
    finally:
        svc.stop()


def fmt_ops(ops):
    return "(" + ", ".join(f"{op} {n}" for op, n in sorted(ops.items())) + ")"


# --- PostgreSQL ---------------------------------------------------------------------------

def pg_bin(name):
    versions = sorted((int(v), v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit()) \
        if os.path.isdir("/usr/lib/postgresql") else []
    for _, v in reversed(versions):
        path = f"/usr/lib/postgresql/{v}/bin/{name}"
        if os.path.exists(path):
            return path
    found = shutil.which(name)
    if not found:
        raise SystemExit(f"PostgreSQL's {name} is missing: apt-get install -y postgresql")
    return found


class Postgres:
    """A server of its own (initdb as the unprivileged `postgres` user, which initdb needs when
    this runs as root; a free port; a temporary folder), as tests/support/services.rs starts
    one. With `log`, the server's log goes to that file (bench/pg_phase.py reads the statements
    it executes from it)."""

    def __init__(self, log=None):
        self.dir = tempfile.mkdtemp(prefix="postonce-bench-pg-")
        self.port = harness.free_port()
        user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if user:
            subprocess.run(["chown", "postgres", self.dir], check=True)
        subprocess.run([*user, pg_bin("initdb"), "-D", f"{self.dir}/data", "-U", "postonce",
                        "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.user = user
        self.proc = harness.start(
            [*user, pg_bin("postgres"), "-D", f"{self.dir}/data", "-p", str(self.port), "-k",
             self.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", "full_page_writes=off", "-c", "shared_buffers=64MB",
             "-c", "log_line_prefix=%m [%p] "],
            stdout=subprocess.DEVNULL,
            stderr=open(log, "w") if log else subprocess.DEVNULL)
        harness.wait_port(self.port, self.proc)
        for _ in range(100):
            if subprocess.run([pg_bin("pg_isready"), "-q", "-h", "127.0.0.1", "-p",
                               str(self.port), "-U", "postonce"]).returncode == 0:
                return
            time.sleep(0.1)
        raise SystemExit("PostgreSQL did not start")

    def url(self):
        return f"postgres://postonce@127.0.0.1:{self.port}/postgres"

    def psql(self, sql):
        p = subprocess.run([pg_bin("psql"), "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "postonce", "-d", "postgres", "-c", sql],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"psql: {p.stderr}")
        return p.stdout.strip()

    def stop(self, keep):
        subprocess.run([*self.user, pg_bin("pg_ctl"), "-D", f"{self.dir}/data", "stop", "-m",
                        "fast"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def counters(self):
        """(transactions, rows of postonce_drafts fetched) so far, once every other client has
        gone (a backend's statistics are flushed when it exits)."""
        for _ in range(100):
            others = self.psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                               "'client backend' AND pid <> pg_backend_pid()")
            if others == "0":
                break
            time.sleep(0.05)
        row = self.psql(
            "SELECT (SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = "
            "'postgres'), (SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM "
            "pg_stat_user_tables WHERE relname = 'postonce_drafts')")
        x, rows = row.split("|")
        return int(x), int(rows)

    def listing_reads(self, before):
        """Rows the server reads for the sweep's listing (one query per status, as the store
        sends it): the scans' actual rows and the rows their filters removed."""
        total = 0
        for status in SWEPT:
            plan = json.loads(self.psql(
                "EXPLAIN (ANALYZE, FORMAT JSON) SELECT to_jsonb(d) FROM postonce_drafts d "
                f"WHERE d.ns = '{NS}' AND d.status = ANY('{{{status}}}') AND d.due_at IS NOT "
                f"NULL AND d.due_at <= {before} ORDER BY d.due_at, d.key"))
            stack = [plan[0]["Plan"]]
            while stack:
                node = stack.pop()
                if "Scan" in node["Node Type"]:
                    total += node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0) \
                        + node.get("Rows Removed by Index Recheck", 0)
                stack.extend(node.get("Plans", []))
        return total


def pg_seed(pg, n, now):
    month = now + 30 * 24 * 3600
    pg.psql(
        "INSERT INTO postonce_drafts (ns, key, caption, image, status, attempts, retryable, "
        "reminded, delay_told, created_at, updated_at, expires_at, publish_at, due_at) "
        f"SELECT '{NS}', 'bulk-d' || i, 'filler', 'https://cdn.example.com/x.png', "
        "CASE WHEN i % 2 = 0 THEN 'posted' ELSE 'scheduled' END, 0, true, false, false, "
        f"{now}, {now}, CASE WHEN i % 2 = 0 THEN {month} END, "
        f"CASE WHEN i % 2 = 1 THEN {month} END, CASE WHEN i % 2 = 1 THEN {month} + i END "
        f"FROM generate_series(0, {n - 1}) AS i")
    pg.psql("ANALYZE postonce_drafts")


def postgres_store(args, out):
    pg = Postgres()
    image_port = harness.image_server(os.path.join(harness.ROOT, "examples", "cover.png"))
    data = tempfile.mkdtemp(prefix="postonce-bench-pgdata-")
    try:
        env = cli_env({"DATABASE_URL": pg.url(), "POSTONCE_DATA_DIR": data}, image_port)
        run_cli(args.postonce, env, ["db", "migrate"])
        base = pg.counters()
        idle = pg.counters()
        overhead = idle[0] - base[0]  # the counters' own query
        for phase, stored in (("a", args.due), ("b", args.stored)):
            if phase == "b":
                t0 = time.perf_counter()
                n = args.stored - 2 * args.due
                pg_seed(pg, n, int(time.time()))
                print(f"  postgres: seeded {n} drafts in {time.perf_counter() - t0:.1f}s "
                      f"(one INSERT ... SELECT)", flush=True)
            make_due(args.postonce, env, image_port, f"due{phase}", args.due)
            listing = pg.listing_reads(int(time.time()))
            x0, r0 = pg.counters()
            wall, report = sweep(args.postonce, env, args.due)
            x1, r1 = pg.counters()
            xacts, rows = x1 - x0 - overhead, r1 - r0
            out.append(("postgres", stored, args.due, wall, xacts, "statements", listing, rows,
                        len(report["runs"])))
            print(f"  postgres, {stored} stored: {wall:.2f}s, {xacts} statements, listing read "
                  f"{listing} rows, the sweep fetched {rows} rows of postonce_drafts",
                  flush=True)
    finally:
        pg.stop(args.keep)
        shutil.rmtree(data, ignore_errors=True)


# --- files --------------------------------------------------------------------------------

IN_OPEN, IN_MOVED_TO = 0x20, 0x80


class Opens:
    """inotify on one folder: the files opened in it, in order, and where its first rename-in
    (a write) fell."""

    def __init__(self, folder):
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0 or self.libc.inotify_add_watch(
                self.fd, folder.encode(), IN_OPEN | IN_MOVED_TO) < 0:
            raise SystemExit(f"inotify on {folder} failed")
        self.opened, self.first_write = [], None

    def drain(self):
        while True:
            try:
                buf = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                return
            i = 0
            while i < len(buf):
                _, mask, _, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode()
                i += 16 + n
                if mask & IN_OPEN and name.endswith(".json"):
                    self.opened.append(name)
                elif mask & IN_MOVED_TO and self.first_write is None:
                    self.first_write = len(self.opened)

    def close(self):
        os.close(self.fd)


def files_seed(folder, n, now):
    month = now + 30 * 24 * 3600
    drafts, due = os.path.join(folder, "drafts"), os.path.join(folder, "due")
    for key, posted, due_at in filler_drafts(n, now):
        d = {"key": key, "content": {"caption": "filler", "image": "https://cdn.example.com/x.png",
                                     "link": None, "alt": None},
             "status": "posted" if posted else "scheduled", "attempts": 0, "last_error": None,
             "retryable": True, "next_retry_at": None, "pending": None, "reminded": False,
             "source": "ci", "created_at": now, "updated_at": now,
             "expires_at": month if posted else None}
        if not posted:
            d.update(publish_at=month, due_at=due_at)
            open(os.path.join(due, f"scheduled.{due_at:020d}.{key}"), "w").close()
        with open(os.path.join(drafts, f"{key}.json"), "w") as f:
            json.dump(d, f)
    subprocess.run(["sync"], check=True)


def files_store(args, out):
    image_port = harness.image_server(os.path.join(harness.ROOT, "examples", "cover.png"))
    data = tempfile.mkdtemp(prefix="postonce-bench-files-")
    folder = os.path.join(data, "dry-run")
    try:
        env = cli_env({"POSTONCE_DATA_DIR": data}, image_port)
        for phase, stored in (("a", args.due), ("b", args.stored)):
            if phase == "b":
                t0 = time.perf_counter()
                n = args.stored - 2 * args.due
                files_seed(folder, n, int(time.time()))
                print(f"  files: seeded {n} drafts in {time.perf_counter() - t0:.1f}s "
                      f"(JSON files and due-index entries)", flush=True)
            make_due(args.postonce, env, image_port, f"due{phase}", args.due)
            opens = Opens(os.path.join(folder, "drafts"))
            wall, report = sweep(args.postonce, env, args.due)
            opens.drain()
            opens.close()
            listing = opens.first_write if opens.first_write is not None else len(opens.opened)
            # inotify merges an open into the one before it when it is the same file's and
            # still unread: the total is not a count, the distinct files are.
            touched = len(set(opens.opened))
            out.append(("files", stored, args.due, wall, None, "", listing, None, touched))
            print(f"  files, {stored} stored: {wall:.2f}s, draft files opened: {listing} before "
                  f"the first write, {touched} distinct", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stored", type=int, default=100_000, help="drafts stored (default 100000)")
    ap.add_argument("--due", type=int, default=100, help="due drafts per sweep (default 100)")
    ap.add_argument("--stores", default="files,dynamodb,postgres")
    ap.add_argument("--postonce", required=True)
    ap.add_argument("--ddb-dir", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folders")
    args = ap.parse_args()
    if args.stored < 2 * args.due:
        raise SystemExit("--stored must be at least twice --due")
    out = []
    stores = {"files": files_store, "dynamodb": dynamodb_store, "postgres": postgres_store}
    try:
        for name in args.stores.split(","):
            stores[name](args, out)
    finally:
        harness.stop_all()
    print()
    print(f"sweep cost: {args.due} due drafts among {args.due} and among {args.stored} stored "
          f"(dry-run publisher; `postonce sweep --json`, exec to exit)")
    print()
    print("| store | stored | wall | round trips (per due draft) | listing read | "
          "the sweep read | drafts touched |")
    print("|---|---|---|---|---|---|---|")
    unit = {"dynamodb": ("items", "items"), "postgres": ("rows", "rows fetched"),
            "files": ("files opened*", "")}
    for store, stored, due, wall, trips, detail, listing, read, touched in out:
        trips_cell = "—" if trips is None else f"{trips} ({trips / due:.2f}) {detail}"
        read_cell = "—" if read is None else f"{read} {unit[store][1]}"
        print(f"| {store} | {stored} | {wall:.2f} s | {trips_cell} | {listing} "
              f"{unit[store][0]} | {read_cell} | {touched} |")
    print()
    for store in dict.fromkeys(r[0] for r in out):
        a, b = [r for r in out if r[0] == store]
        cells = [f"wall {b[3] / a[3]:.2f}×"]
        if a[4]:
            cells.append(f"round trips {b[4] / a[4]:.2f}×")
        cells.append(f"listing read {b[6] / max(a[6], 1):.2f}× ({b[6]} for {b[2]} due: "
                     f"{b[6] / b[2]:.2f} per due draft)")
        print(f"{store}: {b[1]} stored ÷ {a[1]} stored: " + ", ".join(cells))
    if any(r[0] == "files" for r in out):
        print("* files: the draft files opened before the sweep's first write: the listing's, "
              "and the first run's own read")


if __name__ == "__main__":
    main()
