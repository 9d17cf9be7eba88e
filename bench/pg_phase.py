"""The benchmark's PostgreSQL phase (issue 34): postonce on the self-hosters' store beside the
bare client's PostgreSQL mode, the claims in the database (no Redis), against one PostgreSQL of
its own (bench/sweep.py's `Postgres`: initdb as the unprivileged `postgres` user, a free port).

1. Counting: the server logs every statement it executes (`log_statement = all`, switched on
   for this step only); a few new-key and already-posted runs of each, then the statements of
   one run of each kind, compared as text (whitespace collapsed; parameters left out): the bare
   client's must be postonce's.
2. CPU: a `postonce serve` (a build with the `postgres` feature), the bare client and the bare
   client behind postonce's entry (`bench_bare serve`), a new key and the same key again through
   each, in shuffled order, measured as bench.py's CPU phase
   measures (utime+stime, and schedstat at nanosecond resolution).
"""
import os
import re
import time

import harness
import sweep


def env_for(pg, image_port, data):
    env = harness.base_env()
    env.update({
        "DATABASE_URL": pg.url(),
        "POSTONCE_DATA_DIR": data,
        "POSTONCE_IMAGE_HOSTS": f"http://127.0.0.1:{image_port}",
    })
    return env


# A record of the server's log starts with its prefix (a timestamp); its continuation lines
# start with a tab.
RECORD = re.compile(r"^\d{4}-\d\d-\d\d ")
EXECUTE = re.compile(r"LOG:\s+execute [^:]*:\s(.*)", re.S)


def executed(log_path, offset):
    """The statements the server executed since `offset` in its log: (new offset, texts)."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        f.seek(offset)
        text = f.read()
        end = f.tell()
    records, cur = [], None
    for line in text.splitlines():
        if RECORD.match(line):
            cur = [line]
            records.append(cur)
        elif cur is not None:
            cur.append(line)
    out = []
    for r in records:
        m = EXECUTE.search("\n".join(r))
        if m:
            out.append(" ".join(m.group(1).split()))
    return end, out


def set_logging(pg, on):
    pg.psql(f"ALTER SYSTEM SET log_statement = '{'all' if on else 'none'}'")
    pg.psql("SELECT pg_reload_conf()")
    time.sleep(0.2)


def short(sql):
    """A statement's first words, to list a run's statements on one line."""
    words = sql.split()
    return " ".join(words[:4]) + (" …" if len(words) > 4 else "")


def counting(args, pg, env, log_path, image_port, logdir):
    serve = harness.Serve(args.postgres, env, logdir, "serve-pg-counting")
    bare = harness.Bare(args.bare, env)
    keys = harness.Keys(f"http://127.0.0.1:{image_port}/cover.png")
    seen = {}
    set_logging(pg, True)
    offset = os.path.getsize(log_path)
    try:
        def counted(name, fn):
            nonlocal offset
            fn()
            time.sleep(0.05)
            offset, sqls = executed(log_path, offset)
            seen.setdefault(name, []).append(sqls)

        for _ in range(args.count_runs + 1):  # the first pair prepares the statements
            _, body, _ = keys.body("c")
            counted("postonce new", lambda: harness.expect(*serve.post(body), "posted", "pg new"))
            counted("postonce posted", lambda: harness.expect(*serve.post(body), "already_posted",
                                                            "pg posted"))
            _, _, fields = keys.body("d")
            counted("bare new", lambda: bare.run(harness.bare_line("new", fields)))
            counted("bare posted", lambda: bare.run(harness.bare_line("posted", fields)))
    finally:
        set_logging(pg, False)
        serve.stop()
        bare.stop()
    result = {}
    for name, runs in seen.items():
        steady = runs[1:]
        result[name] = (sorted(len(r) for r in steady)[len(steady) // 2], steady[-1])
    return result


def cpu_phase(args, env, image_port, logdir):
    serve = harness.Serve(args.postgres, env, logdir, "serve-pg")
    bare = harness.Bare(args.bare, env)
    entry = harness.Serve(args.bare, env, logdir, "bare-entry-pg")
    keys = harness.Keys(f"http://127.0.0.1:{image_port}/cover.png")
    cpu = {n: harness.Cpu(p) for n, p in [("p new", serve.proc.pid), ("p posted", serve.proc.pid),
                                        ("b new", bare.proc.pid), ("b posted", bare.proc.pid),
                                        ("e new", entry.proc.pid), ("e posted", entry.proc.pid)]}
    runs = args.pg_runs
    warm = max(20, runs // 50)
    t0 = time.time()
    try:
        for i in range(warm + runs):
            _, pbody, _ = keys.body("p")
            _, _, bfields = keys.body("b")
            _, ebody, _ = keys.body("e")

            def meter(name, pid):
                return cpu[name] if i >= warm else harness.Cpu(pid)
            pairs = [
                (lambda: meter("p new", serve.proc.pid).measure(
                    lambda: harness.expect(*serve.post(pbody), "posted", "pg new")),
                 lambda: meter("p posted", serve.proc.pid).measure(
                    lambda: harness.expect(*serve.post(pbody), "already_posted", "pg posted"))),
                (lambda: meter("b new", bare.proc.pid).measure(
                    lambda: bare.run(harness.bare_line("new", bfields))),
                 lambda: meter("b posted", bare.proc.pid).measure(
                    lambda: bare.run(harness.bare_line("posted", bfields)))),
                (lambda: meter("e new", entry.proc.pid).measure(
                    lambda: harness.expect(*entry.post(ebody), "posted", "pg entry new")),
                 lambda: meter("e posted", entry.proc.pid).measure(
                    lambda: harness.expect(*entry.post(ebody), "already_posted", "pg entry posted"))),
            ]
            for half in (0, 1):
                harness.shuffled([p[half] for p in pairs])
            harness.progress("PostgreSQL ", i, warm, runs, t0)
    finally:
        serve.stop()
        bare.stop()
        entry.stop()
    return cpu


def run(args, image_port, logdir):
    """Both steps on a PostgreSQL of its own; the rows of the PostgreSQL table and the
    counting lines, printed."""
    log_path = os.path.join(logdir, "postgres.log")
    pg = sweep.Postgres(log=log_path)
    data = os.path.join(logdir, "pg-data-dir")
    try:
        env = env_for(pg, image_port, data)
        sweep.run_cli(args.postgres, env, ["db", "migrate"])
        counts = counting(args, pg, env, log_path, image_port, logdir)
        for name in ("postonce new", "bare new", "postonce posted", "bare posted"):
            n, sqls = counts[name]
            print(f"  PostgreSQL {name:16} {n} statements [{'; '.join(short(s) for s in sqls)}]",
                  flush=True)
        for kind in ("new", "posted"):
            same = counts[f"postonce {kind}"][1] == counts[f"bare {kind}"][1]
            print(f"  the bare client's PostgreSQL {kind}-key statements are postonce's: "
                  f"{'yes' if same else 'NO'}", flush=True)
        cpu = cpu_phase(args, env, image_port, logdir)
    finally:
        pg.stop(args.keep)
    return counts, cpu


def rows(counts, cpu, ratio):
    pn, pp, bn, bp = (cpu[k] for k in ("p new", "p posted", "b new", "b posted"))
    return [
        *harness.cpu_rows(pn, pp, bn, bp, ratio),
        ("wall per run, new / posted (mean)",
         f"{pn.wall / pn.runs * 1000:.2f} / {pp.wall / pp.runs * 1000:.2f} ms",
         f"{bn.wall / bn.runs * 1000:.2f} / {bp.wall / bp.runs * 1000:.2f} ms", ""),
        ("statements, new / already posted",
         f"{counts['postonce new'][0]} / {counts['postonce posted'][0]}",
         f"{counts['bare new'][0]} / {counts['bare posted'][0]}", ""),
    ]
