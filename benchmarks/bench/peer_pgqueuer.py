"""pgqueuer's side of ``benchmarks/run.py`` (runs in ``benchmarks/.venv-peers``), adapted
from the research scripts (``research/peer-bench/bench_pgqueuer.py``). One measurement per
call on a fresh database (the schema is installed here: durability ``durable``, defaults).

    python peer_pgqueuer.py enqueue --mode bulk|single --dsn URI [--n 20000] [--driver apg|psy]
    python peer_pgqueuer.py drain --dsn URI [--n 20000] [--batch-size 10] [--consumers 1] [--driver apg|psy]
    python peer_pgqueuer.py latency --dsn URI [--rate 50] [--duration 20] [--driver apg|psy]

Jobs are no-ops. ``drain`` queues N jobs (untimed, then ANALYZE), starts a fresh worker
process (``drain-worker``: ``QueueManager.run(mode=drain)``) and times it from its start
until the queue table is empty (every job deleted on completion), polled every 20 ms.
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

SYSTEM = "pgqueuer"
BenchFailed = common.BenchFailed


def version() -> str:
    from importlib.metadata import version as v

    return v("pgqueuer")


async def make_queries(dsn: str, driver: str):
    from pgqueuer.db import AsyncpgDriver, PsycopgDriver
    from pgqueuer.queries import Queries

    if driver == "apg":
        import asyncpg

        return Queries(AsyncpgDriver(await asyncpg.connect(dsn=dsn)))
    import psycopg

    return Queries(PsycopgDriver(await psycopg.AsyncConnection.connect(dsn, autocommit=True)))


async def close_queries(q) -> None:
    conn = getattr(q.driver, "_connection", None) or getattr(q.driver, "connection", None)
    if conn is not None:
        res = conn.close()
        if asyncio.iscoroutine(res):
            await res


def sql(dsn: str, query: str):
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query)
        return cur.fetchone() if cur.description else None


async def install(dsn: str) -> None:
    q = await make_queries(dsn, "apg")
    try:
        if not await q.schema_is_installed():
            await q.install()
    finally:
        await close_queries(q)


async def bulk_enqueue(q, n: int, chunk: int) -> None:
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        await q.enqueue(["noop"] * k, [str(start + i).encode() for i in range(k)], [0] * k)


def driver_name(driver: str) -> str:
    return "asyncpg" if driver == "apg" else "psycopg"


async def cmd_enqueue(args) -> None:
    await install(args.dsn)
    q = await make_queries(args.dsn, args.driver)
    t = time.perf_counter()
    if args.mode == "bulk":
        await bulk_enqueue(q, args.n, args.chunk)
    else:
        for i in range(args.n):
            await q.enqueue("noop", str(i).encode())
    elapsed = time.perf_counter() - t
    await close_queries(q)
    count = sql(args.dsn, "SELECT count(*) FROM pgqueuer")[0]
    if count != args.n:
        raise BenchFailed(f"pgqueuer enqueue: {count} jobs in the queue, expected {args.n}")
    api = (
        f"Queries.enqueue(lists), chunks of {args.chunk}"
        if args.mode == "bulk"
        else "Queries.enqueue(one job)"
    )
    common.emit(
        SYSTEM,
        f"enqueue_{args.mode}",
        f"{api}, {driver_name(args.driver)}",
        n=args.n,
        seconds=round(elapsed, 3),
        jobs_per_s=round(args.n / elapsed, 1),
        version=version(),
    )


async def cmd_drain_worker(args) -> None:
    """The fresh worker process: drains the queue, then prints its own figures."""
    from pgqueuer.qm import QueueManager
    from pgqueuer.types import QueueExecutionMode

    stamps: list[float] = []
    qms = []
    for _ in range(args.consumers):
        qm = QueueManager(await make_queries(args.dsn, args.driver))

        @qm.entrypoint("noop")
        async def noop(job) -> None:
            stamps.append(time.time())

        qms.append(qm)
    await asyncio.gather(
        *(qm.run(batch_size=args.batch_size, mode=QueueExecutionMode.drain) for qm in qms)
    )
    print(json.dumps({"processed": len(stamps), "stamps": stamps}), flush=True)


def drain_config(args) -> str:
    consumers = f"{args.consumers} QueueManagers × " if args.consumers > 1 else ""
    return f"{consumers}batch_size {args.batch_size}, {driver_name(args.driver)}"


async def cmd_drain(args) -> None:
    await install(args.dsn)
    q = await make_queries(args.dsn, args.driver)
    await bulk_enqueue(q, args.n, 1000)
    await close_queries(q)
    sql(args.dsn, "ANALYZE pgqueuer")
    import psycopg

    out_path = f"/tmp/pgq-drain-{os.getpid()}.json"
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
                "--driver",
                args.driver,
                "--batch-size",
                str(args.batch_size),
                "--consumers",
                str(args.consumers),
            ],
            stdout=out,
            preexec_fn=common.die_with_parent,
        )
        sampler = common.RssSampler(worker.pid)
        try:
            done = common.wait_until(
                lambda: (
                    not conn.execute(
                        "SELECT EXISTS (SELECT 1 FROM pgqueuer WHERE status = 'queued') OR "
                        "EXISTS (SELECT 1 FROM pgqueuer WHERE status = 'picked')"
                    ).fetchone()[0]
                ),
                args.timeout,
                f"pgqueuer to drain {args.n} jobs",
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
    with open(out_path) as fh:
        stats = json.loads(fh.read().strip().splitlines()[-1])
    os.unlink(out_path)
    if worker.returncode != 0 or stats["processed"] != args.n:
        raise BenchFailed(
            f"pgqueuer drain: worker exit {worker.returncode}, {stats['processed']} of {args.n} "
            "jobs processed"
        )
    wall = done - started
    spread = common.tenths(stats["stamps"])
    common.emit(
        SYSTEM,
        args.part,
        drain_config(args),
        n=args.n,
        seconds=round(wall, 3),
        jobs_per_s=round(args.n / wall, 1),
        steady_jobs_per_s=spread.pop("jobs_per_s"),
        peak_rss_mib=common.mib(peak),
        **spread,
        version=version(),
    )


async def cmd_latency_worker(args) -> None:
    import signal

    from pgqueuer.qm import QueueManager

    qm = QueueManager(await make_queries(args.dsn, args.driver))
    out = open(args.out, "a", buffering=1)  # noqa: SIM115

    @qm.entrypoint("lat")
    async def lat(job) -> None:
        out.write(f"{job.payload.decode()} {time.time():.6f}\n")

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, qm.shutdown.set)
    await qm.run(batch_size=args.batch_size)
    out.close()


def read_stamps(path: str) -> dict[int, float]:
    got = {}
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 2:
                got[int(parts[0])] = float(parts[1])
    return got


def wait_stamps(path: str, n: int, timeout: float, alive) -> dict[int, float]:
    common.wait_until(
        lambda: len(read_stamps(path)) >= n, timeout, f"{n} jobs to start", poll=0.1, alive=alive
    )
    return read_stamps(path)


def latency_result(
    system: str,
    config: str,
    sent: dict[int, tuple[float, float]],
    got: dict[int, float],
    args,
    **extra,
) -> None:
    missing = [s for s in sent if s not in got]
    if missing:
        raise BenchFailed(f"{system} latency: {len(missing)} of {len(sent)} jobs never started")
    from_call = [(got[s] - t0) * 1000 for s, (t0, _) in sent.items()]
    from_commit = [(got[s] - t1) * 1000 for s, (_, t1) in sent.items()]
    common.emit(
        system,
        "latency",
        config,
        sent=len(sent),
        received=len(sent),
        rate=args.rate,
        duration=args.duration,
        enqueue_to_start=common.latency_summary(from_call),
        commit_to_start=common.latency_summary(from_commit),
        **extra,
    )


async def cmd_latency(args) -> None:
    await install(args.dsn)
    path = f"/tmp/pgq-lat-{os.getpid()}.txt"
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
            "--driver",
            args.driver,
            "--batch-size",
            str(args.batch_size),
        ],
        preexec_fn=common.die_with_parent,
    )

    def alive() -> str | None:
        return None if worker.poll() is None else f"the worker exited ({worker.returncode})"

    try:
        q = await make_queries(args.dsn, args.driver)
        for i in range(5):  # warm-up: proves the worker is listening
            await q.enqueue("lat", str(-1 - i).encode())
        wait_stamps(path, 5, 60, alive)
        await asyncio.sleep(0.5)

        async def one(seq: int) -> None:
            await q.enqueue("lat", str(seq).encode())

        sent = await common.paced_producer(one, args.rate, args.duration)
        wait_stamps(path, 5 + len(sent), 60, alive)
        await close_queries(q)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        stamps = read_stamps(path)
        os.unlink(path)
    latency_result(
        SYSTEM,
        f"batch_size {args.batch_size}, {driver_name(args.driver)}, idle (LISTEN)",
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
    p.add_argument("--driver", choices=["apg", "psy"], default="apg")
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--consumers", type=int, default=1)
    p.add_argument("--part", default="drain")
    p.add_argument("--rate", type=float, default=50)
    p.add_argument("--duration", type=float, default=20)
    p.add_argument("--out")
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
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
