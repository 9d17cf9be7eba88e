"""Where a warm run's CPU time goes, kernel included (README "Performance"): `postonce serve` and
the bare client behind the entry (`bench_bare serve`), one after the other, each against servers
of its own (bench/callgrind_warm.py's set-up: 20 runs to warm up, then RUNS runs of one kind),
sampled by `perf record -e cpu-clock` while those runs go. Where callgrind counts user-space
instructions, this samples time: the system calls and the stalls on memory are in it.

Prints, per run, the time of each group of functions (the kernel, the allocator, `memcpy`, the
log lines and spans, the database client, hyper, postonce's own code, ...) on each side and the
difference, then the functions that differ most. Sampling costs time of its own and the
machine's load moves the times; compare the two sides of one invocation and their shares, not
the times with bench/run.sh's.

Usage: python3 bench/perf_warm.py POSTONCE BARE new|posted pg|ddb [RUNS (default 1000)]
  POSTONCE: a `postonce` built with the `postgres` feature; BARE: `bench_bare`. Build both with
  CARGO_PROFILE_RELEASE_STRIP=none so that functions keep their names. Needs `perf` (Debian:
  linux-perf) and a kernel that lets this user sample (perf_event_paranoid ≤ 1, or root). The
  `perf.data` files stay in a temporary directory, printed at the end.
"""
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from callgrind_warm import WarmServe

HZ = 10000

# The first pattern a function's name matches names its group (the kernel's are [k]).
GROUPS = [
    ("log lines and spans", r"tracing|sharded_slab|thread_local|log_line|Instrumented"),
    ("PostgreSQL client", r"tokio_postgres|deadpool|postgres_protocol|postgres_types|bench_bare::pg"),
    ("AWS SDK", r"aws_|smithy"),
    ("redis", r"redis::"),
    ("hyper, http", r"hyper|http::|httparse|http_body"),
    ("reqwest", r"reqwest"),
    ("tokio", r"tokio::|mio::|tokio_util"),
    ("serde, JSON", r"serde"),
    ("formatting", r"core::fmt|alloc::fmt"),
    ("allocator", r"malloc|free|_int_|realloc|unlink_chunk|consolidate|raw_vec|__rust_|alloc::alloc"),
    ("memcpy, memcmp", r"memmove|memcpy|memset|memcmp|strlen"),
    ("cover check", r"image|crc|png"),
    ("URL parsing", r"url::|idna"),
    ("SHA-256, HMAC", r"sha2|hmac|sha256|ring_core"),
    ("postonce's own, bench_bare's own", r"postonce|bench_bare"),
]


def profile(binary, store, kind, runs, out):
    with WarmServe(binary, store) as w:
        box = {}

        def begin():
            box["perf"] = subprocess.Popen(
                ["perf", "record", "-e", "cpu-clock", "-F", str(HZ), "-p", str(w.proc.pid), "-o", out],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(1.0)  # perf attaches before the first counted run

        def end():
            perf = box["perf"]
            perf.send_signal(signal.SIGINT)
            _, err = perf.communicate(timeout=120)
            if perf.returncode not in (0, -signal.SIGINT) or not os.path.exists(out):
                raise SystemExit(f"perf record failed ({perf.returncode}): {err.decode(errors='replace')[-400:]}"
                                 "\n(perf_event_paranoid must let this user sample: "
                                 "sysctl kernel.perf_event_paranoid=1, or run as root)")
        w.measure(kind, runs, begin, end)


def samples(path):
    out = subprocess.run(["perf", "report", "-i", path, "--stdio", "--sort", "sym", "-F", "sample,sym"],
                         capture_output=True, text=True, check=True).stdout
    by_sym = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+\[(.)\]\s+(.*)$", line)
        if m:
            name = re.sub(r"::h[0-9a-f]{16}$", "", m.group(3).strip())
            by_sym[("[k] " if m.group(2) == "k" else "") + name] += int(m.group(1))
    return by_sym


def group_of(sym):
    if sym.startswith("[k] "):
        return "kernel"
    return next((g for g, p in GROUPS if re.search(p, sym)), "the rest (libc, crates)")


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__.split("Usage: ")[1])
    postonce, bare, kind, store = sys.argv[1:5]
    runs = int(sys.argv[5]) if len(sys.argv) == 6 else 1000
    if kind not in ("new", "posted") or store not in ("pg", "ddb"):
        sys.exit(__doc__.split("Usage: ")[1])
    keep = tempfile.mkdtemp(prefix="postonce-perf-")
    os.environ.setdefault("POSTONCE_BIN", postonce)
    per = {}
    for name, binary in (("postonce", postonce), ("bare", bare)):
        path = os.path.join(keep, f"{name}.data")
        profile(binary, store, kind, runs, path)
        per[name] = samples(path)
    us = 1e6 / HZ / runs  # µs of CPU per sample, per run
    a, b = per["postonce"], per["bare"]
    ga, gb = collections.Counter(), collections.Counter()
    for s, n in a.items():
        ga[group_of(s)] += n
    for s, n in b.items():
        gb[group_of(s)] += n
    ta, tb = sum(a.values()), sum(b.values())
    print(f"{kind} key on {store}, {runs} runs of each, sampled at {HZ} Hz (CPU per run, µs)")
    print(f"  {'':34} {'postonce':>9} {'bare':>9} {'difference':>11} {'of the gap':>11}")
    for g in sorted(set(ga) | set(gb), key=lambda g: -(ga[g] - gb[g])):
        d = ga[g] - gb[g]
        print(f"  {g:34} {ga[g] * us:9.1f} {gb[g] * us:9.1f} {d * us:+11.1f} {100 * d / (ta - tb):10.1f}%")
    print(f"  {'total':34} {ta * us:9.1f} {tb * us:9.1f} {(ta - tb) * us:+11.1f}   ratio {ta / tb:.2f}×")
    print("  the functions that differ most:")
    for s in sorted(set(a) | set(b), key=lambda s: -(a[s] - b[s]))[:20]:
        print(f"    {(a[s] - b[s]) * us:+7.1f}  {s[:110]}")
    print(f"(perf.data files in {keep})")


if __name__ == "__main__":
    main()
