"""procrastinate's side of ``benchmarks/run.py`` (runs in ``benchmarks/.venv-peers``),
adapted from the research scripts (``research/peer-bench/bench_procrastinate.py``): async
``PsycopgConnector`` (psycopg 3, procrastinate's default), no-op async tasks, the schema
installed on a fresh database per call.

    python peer_procrastinate.py enqueue --mode bulk|single --dsn URI [--n 20000]
    python peer_procrastinate.py drain --dsn URI [--n 20000] [--concurrency 1]
    python peer_procrastinate.py latency --dsn URI [--rate 50] [--duration 20]

``drain`` queues N jobs (untimed, then ANALYZE), starts a fresh worker process
(``drain-worker``: ``run_worker_async(wait=False)``) and times it from its start until no
job is ``todo`` or ``doing`` (polled every 20 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common
from peer_pgqueuer import latency_result, read_stamps, wait_stamps

SYSTEM = "procrastinate"
BenchFailed = common.BenchFailed
STAMPS: list[float] = []
LAT_OUT = None


def version() -> str:
    from importlib.metadata import version as v

    return v("procrastinate")


def make_app(dsn: str, pool_max: int = 10):
    import procrastinate

    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=dsn, kwargs={}, min_size=1, max_size=pool_max
        )
    )

    @app.task(name="noop", queue="bench")
    async def noop(seq: int = 0) -> None:
        STAMPS.append(time.time())

    @app.task(name="lat", queue="lat")
    async def lat(seq: int = 0) -> None:
        LAT_OUT.write(f"{seq} {time.time():.6f}\n")

    return app, noop, lat


def sql(dsn: str, query: str):
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query)
        return cur.fetchone() if cur.description else None


async def install(dsn: str) -> None:
    if sql(dsn, "SELECT to_regclass('procrastinate_jobs')")[0]:
        return
    app, _, _ = make_app(dsn)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def bulk_enqueue(noop, n: int, chunk: int) -> None:
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        await noop.batch_defer_async(*({"seq": start + i} for i in range(k)))


def todo(dsn: str) -> int:
    return sql(dsn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'")[0]


async def cmd_enqueue(args) -> None:
    await install(args.dsn)
    app, noop, _ = make_app(args.dsn)
    async with app.open_async():
        t = time.perf_counter()
        if args.mode == "bulk":
            await bulk_enqueue(noop, args.n, args.chunk)
        else:
            for i in range(args.n):
                await noop.defer_async(seq=i)
        elapsed = time.perf_counter() - t
    count = todo(args.dsn)
    if count != args.n:
        raise BenchFailed(f"procrastinate enqueue: {count} jobs to do, expected {args.n}")
    api = (
        f"Task.batch_defer_async, chunks of {args.chunk}"
        if args.mode == "bulk"
        else "Task.defer_async"
    )
    common.emit(
        SYSTEM,
        f"enqueue_{args.mode}",
        f"{api}, psycopg",
        n=args.n,
        seconds=round(elapsed, 3),
        jobs_per_s=round(args.n / elapsed, 1),
        version=version(),
    )


async def cmd_drain_worker(args) -> None:
    app, _, _ = make_app(args.dsn, pool_max=max(10, args.concurrency + 2))
    async with app.open_async():
        await app.run_worker_async(
            queues=["bench"],
            concurrency=args.concurrency,
            wait=False,
            install_signal_handlers=False,
        )
    print(json.dumps({"processed": len(STAMPS), "stamps": STAMPS}), flush=True)


async def cmd_drain(args) -> None:
    await install(args.dsn)
    app, noop, _ = make_app(args.dsn)
    async with app.open_async():
        await bulk_enqueue(noop, args.n, 1000)
    sql(args.dsn, "ANALYZE procrastinate_jobs")
    import psycopg

    out_path = f"/tmp/procr-drain-{os.getpid()}.json"
    with psycopg.connect(args.dsn, autocommit=True) as conn, open(out_path, "w") as out:
        common.index_only_polls(conn)
        started = time.perf_counter()
        worker = subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "drain-worker",
                "--dsn",
                args.dsn,
                "--concurrency",
                str(args.concurrency),
            ],
            stdout=out,
            preexec_fn=common.die_with_parent,
        )
        sampler = common.RssSampler(worker.pid)
        try:
            done = common.wait_until(
                lambda: (
                    not conn.execute(
                        "SELECT EXISTS (SELECT 1 FROM procrastinate_jobs "
                        "WHERE status IN ('todo', 'doing'))"
                    ).fetchone()[0]
                ),
                args.timeout,
                f"procrastinate to drain {args.n} jobs",
                poll=common.poll_interval(args.n),
                alive=lambda: (
                    None if worker.poll() is None else f"the worker exited ({worker.returncode})"
                ),
            )
            peak = sampler.stop()
            worker.wait(60)
        finally:
            sampler.stop()
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        succeeded = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        ).fetchone()[0]
    with open(out_path) as fh:
        stats = json.loads(fh.read().strip().splitlines()[-1])
    os.unlink(out_path)
    if worker.returncode != 0 or stats["processed"] != args.n or succeeded != args.n:
        raise BenchFailed(
            f"procrastinate drain: worker exit {worker.returncode}, {stats['processed']} of "
            f"{args.n} jobs processed, {succeeded} succeeded"
        )
    wall = done - started
    spread = common.tenths(stats["stamps"])
    common.emit(
        SYSTEM,
        args.part,
        f"concurrency {args.concurrency}, psycopg",
        n=args.n,
        seconds=round(wall, 3),
        jobs_per_s=round(args.n / wall, 1),
        steady_jobs_per_s=spread.pop("jobs_per_s"),
        peak_rss_mib=common.mib(peak),
        **spread,
        version=version(),
    )


async def cmd_latency_worker(args) -> None:
    global LAT_OUT
    LAT_OUT = open(args.out, "a", buffering=1)  # noqa: SIM115
    app, _, _ = make_app(args.dsn)
    async with app.open_async():
        # Defaults: listen_notify=True, fetch_job_polling_interval=5 s (the fallback poll).
        await app.run_worker_async(queues=["lat"], concurrency=args.concurrency, wait=True)
    LAT_OUT.close()


async def cmd_latency(args) -> None:
    await install(args.dsn)
    path = f"/tmp/procr-lat-{os.getpid()}.txt"
    open(path, "w").close()
    worker = subprocess.Popen(
        [
            sys.executable,
            os.path.abspath(__file__),
            "latency-worker",
            "--dsn",
            args.dsn,
            "--out",
            path,
            "--concurrency",
            str(args.concurrency),
        ],
        preexec_fn=common.die_with_parent,
    )

    def alive() -> str | None:
        return None if worker.poll() is None else f"the worker exited ({worker.returncode})"

    try:
        app, _, lat = make_app(args.dsn)
        async with app.open_async():
            for i in range(5):  # warm-up: proves the worker is listening
                await lat.defer_async(seq=-1 - i)
            wait_stamps(path, 5, 60, alive)
            await asyncio.sleep(0.5)

            async def one(seq: int) -> None:
                await lat.defer_async(seq=seq)

            sent = await common.paced_producer(one, args.rate, args.duration)
            wait_stamps(path, 5 + len(sent), 60, alive)
    finally:
        worker.terminate()  # a graceful stop for procrastinate
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        stamps = read_stamps(path)
        os.unlink(path)
    latency_result(
        SYSTEM,
        f"concurrency {args.concurrency}, psycopg, idle (LISTEN)",
        sent,
        stamps,
        args,
        version=version(),
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["enqueue", "drain", "drain-worker", "latency", "latency-worker"])
    p.add_argument("--dsn", required=True)
    p.add_argument("--mode", choices=["bulk", "single"], default="bulk")
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--chunk", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--part", default="drain")
    p.add_argument("--rate", type=float, default=50)
    p.add_argument("--duration", type=float, default=20)
    p.add_argument("--out")
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    # "App is instantiated in the main Python module": true, and harmless for a benchmark.
    logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
    fn = {
        "enqueue": cmd_enqueue,
        "drain": cmd_drain,
        "drain-worker": cmd_drain_worker,
        "latency": cmd_latency,
        "latency-worker": cmd_latency_worker,
    }[args.cmd]
    common.main_guard(lambda: asyncio.run(fn(args)))


if __name__ == "__main__":
    main()
