"""/metrics as §12 describes it and as dashboards expect it: valid for `promtool check metrics`
on a live server, payd_build_info, the process_* series, latency histograms by route, the
`code` label, commit batch buckets up to --max-batch, the commits that skip their fsync, and the
WAL's checkpoints."""

import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BACKEND, PAYD


def scrape(server):
    r = server.request("GET", "/metrics")
    assert r.status == 200 and r.header("content-type").startswith("text/plain"), r
    return r.raw.decode()


def samples(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (prometheus) not installed")
def test_promtool_accepts_a_live_scrape(fresh_server):
    s = fresh_server(["--max-batch", "100"])
    user = s.create_user()
    acct = user.create_account()
    user.pay(acct)
    s.request("GET", "/no/such/route")
    user.get("/v1/api_keys")
    text = scrape(s)
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    # promtool exits non-zero on a format error and on lint problems alike; both must be absent.
    assert check.returncode == 0, check.stdout + check.stderr


def test_build_info_names_the_binarys_version(fresh_server):
    s = fresh_server()
    version_line = subprocess.run([PAYD, "--version"], capture_output=True, text=True).stdout
    m = re.match(r"payd (\S+) \(git (\S+)\)", version_line)
    assert m, version_line
    found = samples(scrape(s))
    key = f'payd_build_info{{version="{m.group(1)}",revision="{m.group(2)}"}}'
    assert found.get(key) == 1, [k for k in found if k.startswith("payd_build_info")]


def test_process_series(fresh_server):
    s = fresh_server()
    found = samples(scrape(s))
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes",
                 "process_open_fds", "process_max_fds", "process_start_time_seconds"):
        assert name in found, name
    assert found["process_resident_memory_bytes"] > 1 << 20
    assert found["process_open_fds"] >= 3  # at least stdin, stdout, the listening socket
    # Started a moment ago (this scrape comes after the start), by the wall clock.
    assert 0 <= time.time() - found["process_start_time_seconds"] < 600


def test_latency_by_route_and_code_label(fresh_server):
    s = fresh_server()
    user = s.create_user()
    for _ in range(3):
        user.get("/v1/accounts")
    s.request("GET", "/healthz")
    # a request is counted when libmicrohttpd reports it complete, just after its answer has
    # left: scrape until the third one is in (bounded)
    for _ in range(50):
        found = samples(scrape(s))
        if (found.get('payd_http_requests_total{route="/v1/accounts",method="GET",code="200"}')
                == found.get('payd_http_request_duration_seconds_count{route="/v1/accounts"}')
                == 3):
            break
        time.sleep(0.02)
    assert found['payd_http_request_duration_seconds_count{route="/v1/accounts"}'] == 3
    assert found['payd_http_request_duration_seconds_bucket{route="/v1/accounts",le="+Inf"}'] == 3
    assert found['payd_http_request_duration_seconds_count{route="/healthz"}'] >= 1
    assert found['payd_http_requests_total{route="/v1/accounts",method="GET",code="200"}'] == 3
    assert not [k for k in found if k.startswith("payd_http_requests_total") and "status=" in k]


@pytest.mark.parametrize("max_batch,top", [(256, 256), (100, 128), (1000, 1024)])
def test_batch_buckets_reach_max_batch(fresh_server, max_batch, top):
    s = fresh_server(["--max-batch", str(max_batch)])
    bounds = [float(b) for b in re.findall(r'payd_store_commit_batch_size_bucket\{le="([0-9]+)"\}',
                                           scrape(s))]
    assert bounds == sorted(bounds) and bounds[0] == 1
    assert bounds[-1] == top  # the first power of two holding --max-batch, nothing beyond


def test_the_builtin_charge_commits_without_an_fsync_of_its_own(fresh_server):
    """A payment through the builtin processor without an order is one write job, its charge
    committed with it (docs/architecture.md, "One commit for a local charge"): no unsynced
    commit. One for an order takes the three-commit path, and on SQLite its charge commits
    unsynced (the payment's record, synced after it, makes it durable): one charge alone in its
    batch per payment made one at a time. PostgreSQL commits every batch synced."""
    s = fresh_server()
    user = s.create_user()
    acct = user.create_account()
    before = samples(scrape(s))["payd_store_unsynced_commits_total"]
    for _ in range(3):
        r = user.pay(acct)
        assert r.status == 201, r
    plain = samples(scrape(s))["payd_store_unsynced_commits_total"]
    assert plain - before == 0
    for i in range(3):
        order = user.post("/v1/orders", {"external_order_id": f"unsynced-{i}", "amount": 1000,
                                         "currency": "USD"})
        assert order.status == 201, order
        r = user.pay(acct, order_id=order.json["id"])
        assert r.status == 201, r
    after = samples(scrape(s))["payd_store_unsynced_commits_total"]
    assert after - plain == (3 if BACKEND == "sqlite" else 0)


def test_checkpoints_are_counted(fresh_server):
    """SQLite: the writer checkpoints the WAL about once per 1,000 pages; 600 payments from eight
    threads commit in small batches, each writing about a page per table and index it touches
    (six checkpoints in a run here). PostgreSQL has no WAL of payd's to checkpoint."""
    s = fresh_server()
    user = s.create_user(rate_limit="100000/s")
    acct = user.create_account()
    before = samples(scrape(s))["payd_store_checkpoints_total"]
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _: user.pay(acct).status, range(600)))
    assert made == [201] * 600
    after = samples(scrape(s))["payd_store_checkpoints_total"]
    if BACKEND == "sqlite":
        assert after - before >= 1, (before, after)
    else:
        assert after == before == 0
