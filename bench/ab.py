"""Two builds of postonce (each with the `postgres` feature) as two `postonce serve`s in one
interleaved loop against one PostgreSQL of its own (bench/pg_phase.py's set-up): a new key and
the same key again through each, in shuffled order, CPU per request from each server's
schedstat. What a change did to a run's CPU, measured beside the code before it on the same
machine at the same moment, where two runs of `bench/run.sh` differ by more than a small change.

Usage: python3 bench/ab.py BINARY_A BINARY_B [RUNS (default 600)]
"""
import os
import sys
import tempfile

import harness
import pg_phase
import sweep


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.split("Usage: ")[1])
    a, b = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) == 4 else 600
    logdir = tempfile.mkdtemp(prefix="postonce-ab-")
    image_port = harness.image_server(os.path.join(harness.ROOT, "examples", "cover.png"))
    pg = sweep.Postgres(log=os.path.join(logdir, "postgres.log"))
    try:
        env = pg_phase.env_for(pg, image_port, os.path.join(logdir, "data"))
        sweep.run_cli(a, env, ["db", "migrate"])
        serves = {"A": harness.Serve(a, env, logdir, "a"), "B": harness.Serve(b, env, logdir, "b")}
        keys = harness.Keys(f"http://127.0.0.1:{image_port}/cover.png")
        cpu = {(n, k): harness.Cpu(s.proc.pid) for n, s in serves.items() for k in ("new", "posted")}
        warm = 20
        try:
            for i in range(warm + runs):
                steps = []
                for name, serve in serves.items():
                    _, body, _ = keys.body(name.lower())

                    def one(kind, serve=serve, body=body, name=name):
                        meter = cpu[(name, kind)] if i >= warm else harness.Cpu(serve.proc.pid)
                        want = "posted" if kind == "new" else "already_posted"
                        meter.measure(lambda: harness.expect(*serve.post(body), want, f"{name} {kind}"))
                    steps.append((lambda one=one: one("new"), lambda one=one: one("posted")))
                for half in (0, 1):
                    harness.shuffled([s[half] for s in steps])
        finally:
            for s in serves.values():
                s.stop()
        for kind in ("new", "posted"):
            x, y = cpu[("A", kind)].ns_ms(), cpu[("B", kind)].ns_ms()
            print(f"{kind:6} A {x:.3f} ms   B {y:.3f} ms   B ÷ A {y / x:.3f} ({(y / x - 1) * 100:+.1f} %)")
    finally:
        pg.stop(False)


if __name__ == "__main__":
    main()
