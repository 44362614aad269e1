"""``/metrics`` over HTTP: a viewer token's tenant only, a plain 401 without one."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from pgsched import stats
from pgsched.db import Database
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec
from tests.db.test_stats import seed


def executions_by_task(text: str) -> dict[tuple[str, str, str], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "pgsched_executions_total":
                out[(s.labels["tenant"], s.labels["task"], s.labels["state"])] = s.value
    return out


def test_a_scrape_shows_the_token_tenant_only(db: Database, sql, api, client) -> None:
    a = tasks.create(db, TaskSpec(name="alpha", command="true"))
    b = tasks.create(db, TaskSpec(name="beta", command="true", tenant="other"))
    assert a is not None and b is not None
    seed(sql, a["id"], 12, ago_from=5, ago_to=600)
    sql.execute(
        "UPDATE pgsched.execution_history SET tenant = 'other', task_id = %s WHERE id %% 3 = 0",
        (b["id"],),
    )
    stats.roll_up(db)
    per = {
        r["tenant"]: r["n"]
        for r in sql.execute(
            "SELECT tenant, count(*) AS n FROM pgsched.execution_history GROUP BY 1"
        ).fetchall()
    }

    response = api("viewer").get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    got = executions_by_task(response.text)
    assert {k[0] for k in got} == {"default"} and {k[1] for k in got} == {"alpha"}
    assert sum(got.values()) == per["default"]

    other = executions_by_task(api("viewer", "other").get("/metrics").text)
    assert {k[:2] for k in other} == {("other", "beta")} and sum(other.values()) == per["other"]


def test_without_a_token_a_scraper_gets_401_not_a_login_page(client) -> None:
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "location" not in response.headers
    bad = client.get("/metrics", headers={"Authorization": "Bearer pgs_not-a-token"})
    assert bad.status_code == 401
