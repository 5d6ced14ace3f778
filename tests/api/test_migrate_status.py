"""`payd migrate --status` and the payd_schema_version gauge say where the schema is, so an
upgrade can be checked before and after it (docs/deployment.md, "Upgrades")."""

import json
import os
import re
import subprocess

from conftest import PAYD


def migrate_status(db):
    out = subprocess.run([PAYD, "migrate", "--status", "--db", db], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out
    return json.loads(out.stdout)


def test_migrate_status_and_the_schema_version_gauge(server, tmp_path):
    status = migrate_status(server.db)
    assert status["pending"] is False, status
    assert status["schema_version"] == status["binary_schema_version"] >= 8, status
    metrics = server.request("GET", "/metrics").raw.decode()
    gauge = re.search(r"^payd_schema_version (\d+)$", metrics, re.M)
    assert gauge and int(gauge.group(1)) == status["schema_version"], metrics[:500]

    # a database no migration has touched: nothing applied, a migration pending, and --status
    # itself changes nothing
    if server.pg_database:
        import pg
        empty = pg.cluster().url(pg.cluster().new_database())
    else:
        import sqlite3
        empty = os.path.join(str(tmp_path), "empty.db")
        sqlite3.connect(empty).close()
    fresh = migrate_status(empty)
    assert fresh == {"schema_version": 0,
                     "binary_schema_version": status["binary_schema_version"],
                     "pending": True}, fresh
    assert migrate_status(empty) == fresh
    subprocess.run([PAYD, "migrate", "--db", empty], check=True, capture_output=True, timeout=60)
    assert migrate_status(empty) == status
