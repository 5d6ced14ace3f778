"""Long-poll on GET /v1/events (docs/webhooks.md, "Following events"): ?wait=N holds an empty
page until an event the caller may see is written, or N seconds pass, without a thread per
waiting request; ?type= takes a comma-separated list."""

import datetime
import threading
import time

import pytest

from conftest import BACKEND, Payd


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Payd(str(tmp_path_factory.mktemp("payd")), args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


def now_rfc3339():
    at = datetime.datetime.now(datetime.timezone.utc)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Waiting:
    """A GET run in a thread; .result and .answered_at once it is answered."""

    def __init__(self, user, path):
        self.result, self.answered_at = None, None
        self.started_at = time.monotonic()
        self.thread = threading.Thread(target=self._run, args=(user, path), daemon=True)
        self.thread.start()

    def _run(self, user, path):
        self.result = user.get(path, timeout=60)
        self.answered_at = time.monotonic()

    def join(self, timeout=40):
        self.thread.join(timeout)
        assert self.result is not None, "the waiting request was never answered"
        return self.result


def test_a_waiting_request_answers_as_soon_as_an_event_is_written(server):
    u = server.create_user("soon")
    for _ in range(3):  # a repeated measurement: each must be prompt
        time.sleep(0.01)  # past the millisecond of the round before's event
        w = Waiting(u, f"/v1/events?created_gte={now_rfc3339()}&wait=20")
        time.sleep(0.6)
        assert w.result is None, "an empty page with wait=20 must wait"
        account = u.create_account()
        written_at = time.monotonic()
        r = w.join()
        assert r.status == 200, r
        assert [e["data"]["object"]["id"] for e in r.json["data"]] == [account["id"]]
        assert r.json["data"][0]["type"] == "account.created"
        assert w.answered_at - written_at < 0.5, w.answered_at - written_at


def test_an_empty_wait_answers_the_empty_page_after_its_wait(server):
    u = server.create_user("empty")
    since = now_rfc3339()
    w = Waiting(u, f"/v1/events?created_gte={since}&wait=2")
    r = w.join()
    took = w.answered_at - w.started_at
    assert 1.9 <= took < 3.0, took
    assert r.status == 200, r
    assert r.json["data"] == [] and r.json["has_more"] is False
    assert r.json["next_cursor"] is None
    # wait=0 (the default) answers at once, as before
    started = time.monotonic()
    assert u.get(f"/v1/events?created_gte={since}").json["data"] == []
    assert time.monotonic() - started < 0.5
    # a page that is not empty answers at once whatever the wait
    u.create_account()
    started = time.monotonic()
    assert len(u.get(f"/v1/events?created_gte={since}&wait=30").json["data"]) == 1
    assert time.monotonic() - started < 0.5


def test_a_wait_follows_a_cursor_to_newer_events(server):
    u = server.create_user("cursor")
    u.create_account()
    u.create_account()
    newest = u.get("/v1/events?limit=1").json
    older = u.get(f"/v1/events?limit=1&cursor={newest['next_cursor']}").json
    back = u.get(f"/v1/events?limit=1&cursor={older['prev_cursor']}").json
    assert [e["id"] for e in back["data"]] == [e["id"] for e in newest["data"]]
    after_newest = back["prev_cursor"]  # the events newer than the newest: none yet
    r = Waiting(u, f"/v1/events?limit=1&cursor={after_newest}&wait=1").join()
    assert r.status == 200 and r.json["data"] == [] and r.json["prev_cursor"] is None, r
    # the same cursor again, and an event comes while it waits
    w = Waiting(u, f"/v1/events?limit=1&cursor={after_newest}&wait=20")
    time.sleep(0.3)
    account = u.create_account()
    written_at = time.monotonic()
    r = w.join()
    assert [e["data"]["object"]["id"] for e in r.json["data"]] == [account["id"]]
    assert w.answered_at - written_at < 0.5


def test_a_filtered_wait_is_not_woken_by_another_type(server):
    u = server.create_user("filtered")
    account = u.create_account()
    since = now_rfc3339()
    w = Waiting(u, f"/v1/events?created_gte={since}&type=payment.succeeded&wait=2")
    time.sleep(0.3)
    u.create_account()  # account.created: not what it waits for
    r = w.join()
    assert r.status == 200 and r.json["data"] == [], r
    assert w.answered_at - w.started_at >= 1.9
    # a list of types: either one wakes it
    w = Waiting(u, f"/v1/events?created_gte={since}&type=refund.succeeded,payment.succeeded"
                   "&wait=20")
    time.sleep(0.3)
    assert u.pay(account).status == 201
    paid_at = time.monotonic()
    r = w.join()
    assert [e["type"] for e in r.json["data"]] == ["payment.succeeded"]
    assert w.answered_at - paid_at < 0.5


def test_type_takes_a_comma_separated_list(server):
    u = server.create_user("types")
    account = u.create_account()
    assert u.pay(account).status == 201
    both = u.get("/v1/events?type=account.created,payment.succeeded").json["data"]
    assert sorted(e["type"] for e in both) == ["account.created", "payment.succeeded"]
    one = u.get("/v1/events?type=payment.succeeded").json["data"]
    assert [e["type"] for e in one] == ["payment.succeeded"]
    # the cursor of a filtered list carries on with the same list of types
    page = u.get("/v1/events?type=account.created,payment.succeeded&limit=1").json
    rest = u.get("/v1/events?type=account.created,payment.succeeded&limit=1"
                 f"&cursor={page['next_cursor']}").json
    assert [e["id"] for e in page["data"] + rest["data"]] == [e["id"] for e in both]
    for bad in ["nope", "payment.succeeded,nope", "payment.succeeded,", ",", ""]:
        r = u.get(f"/v1/events?type={bad}")
        assert r.status == 400, (bad, r)
        assert r.json["code"] == "invalid_parameter" and r.json["param"] == "type", r.json


def test_another_users_event_does_not_answer_a_wait(server):
    alice, bob = server.create_user("wait-alice"), server.create_user("wait-bob")
    w = Waiting(alice, f"/v1/events?created_gte={now_rfc3339()}&wait=2")
    time.sleep(0.3)
    bob.create_account()
    r = w.join()
    assert r.status == 200 and r.json["data"] == [], r
    assert w.answered_at - w.started_at >= 1.9


def test_many_waiters_hold_no_thread(server):
    u = server.create_user("many")
    account = u.create_account()
    # just after the account's own event, by the event's time: the test's clock may read the
    # same millisecond as that event, which a created_gte of it would still let through
    event = u.get("/v1/events?type=account.created&limit=1").json["data"][0]
    created = datetime.datetime.strptime(event["created_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
    since = (created + datetime.timedelta(milliseconds=1)).isoformat(timespec="milliseconds") + "Z"
    waiters = [Waiting(u, f"/v1/events?created_gte={since}&wait=20") for _ in range(50)]
    time.sleep(1.0)
    assert all(w.result is None for w in waiters), [w.result for w in waiters if w.result][:1]
    started = time.monotonic()
    assert server.request("GET", "/healthz").status == 200
    assert u.get("/v1/accounts").status == 200
    assert time.monotonic() - started < 0.5
    started = time.monotonic()
    assert u.pay(account).status == 201  # writes payment.succeeded: every waiter sees it
    assert time.monotonic() - started < 1.0
    paid_at = time.monotonic()
    results = [w.join() for w in waiters]
    assert all([e["type"] for e in r.json["data"]] == ["payment.succeeded"] for r in results)
    assert max(w.answered_at for w in waiters) - paid_at < 1.5


def test_wait_out_of_range_is_refused(server):
    u = server.create_user("bad-wait")
    for bad in ["31", "-1", "abc", "1.5", ""]:
        r = u.get(f"/v1/events?wait={bad}")
        assert r.status == 400, (bad, r)
        assert r.json["code"] == "invalid_parameter" and r.json["param"] == "wait", r.json
    assert u.get("/v1/events?wait=0").status == 200


def test_a_stopping_server_answers_its_waiters(fresh_server):
    s = fresh_server()
    u = s.create_user()
    w = Waiting(u, f"/v1/events?created_gte={now_rfc3339()}&wait=30")
    time.sleep(0.5)
    stopped_at = time.monotonic()
    s.stop()
    r = w.join()
    assert r.status == 200 and r.json["data"] == [], r
    assert w.answered_at - stopped_at < 2.0


@pytest.mark.skipif(BACKEND != "postgres", reason="only PostgreSQL is shared by several nodes")
def test_an_event_written_on_another_node_answers_within_its_recheck(server, tmp_path):
    other = Payd(str(tmp_path), db=server.db, args=["--rate-limit", "100000/s"]).start()
    try:
        u = server.create_user("two-nodes")
        other_user = type(u)(other, u.id, u.key)  # the same key, served by the other node
        for _ in range(3):
            w = Waiting(u, f"/v1/events?created_gte={now_rfc3339()}&wait=20")
            time.sleep(0.3)
            account = other_user.create_account()
            written_at = time.monotonic()
            r = w.join()
            assert [e["data"]["object"]["id"] for e in r.json["data"]] == [account["id"]]
            # no note crosses nodes: the waiter's own recheck (every 500 ms) finds it
            assert w.answered_at - written_at < 1.0, w.answered_at - written_at
    finally:
        other.stop()
