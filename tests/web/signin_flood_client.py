"""The attacker of tests/web/test_signin_flood.py, in a process of its own (so that its
hundreds of threads do not hold the GIL of the process that times the other requests):
``python -m tests.web.signin_flood_client PORT COOKIE CSRF COUNT USERNAME...`` sends COUNT
wrong-password sign-ins from as many threads, released at once, and prints their answers as
JSON lines ``{"status": ..., "retry_after": ...}``."""

from __future__ import annotations

import http.client
import json
import sys
import threading
import urllib.parse


def sign_in(port: int, cookie: str, form: str) -> tuple[int, str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(
            "POST",
            "/login",
            body=form,
            headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie},
        )
        response = conn.getresponse()
        response.read()
        return response.status, response.getheader("retry-after")
    finally:
        conn.close()


def main(port: int, cookie: str, csrf: str, count: int, usernames: list[str]) -> None:
    gate = threading.Barrier(count)
    answers: list[tuple[int, str | None]] = []

    def one(i: int) -> None:
        form = urllib.parse.urlencode(
            {"csrf_token": csrf, "username": usernames[i % len(usernames)], "password": f"w{i}"}
        )
        gate.wait()
        answers.append(sign_in(port, cookie, form))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for status, retry_after in answers:
        print(json.dumps({"status": status, "retry_after": retry_after}))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
