from __future__ import annotations


def test_health_reports_the_database(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["database"] == "ok"
