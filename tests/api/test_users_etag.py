"""Optimistic concurrency (§9) on GET/PATCH /v1/users/me: strong ETags, If-None-Match → 304,
If-Match → 412 with current_etag (weak tags never match), a stale body version → 409, and of
writers racing with one ETag exactly one wins."""

from concurrent.futures import ThreadPoolExecutor


def me(user, headers=None):
    return user.get("/v1/users/me", headers=headers)


def patch(user, body, headers=None):
    return user.request("PATCH", "/v1/users/me", body, headers=headers)


def test_get_and_304(server):
    u = server.create_user("etag-get", email="g@example.com")
    r = me(u)
    assert r.status == 200, r
    body = r.json
    assert (body["id"], body["object"], body["name"], body["email"], body["version"]) == (
        u.id, "user", "etag-get", "g@example.com", 1)
    assert body["created_at"] and body["updated_at"]
    assert r.header("ETag") == '"v1"'
    for inm in ['"v1"', 'W/"v1"', '*', '"v7", "v1"']:
        nm = me(u, {"If-None-Match": inm})
        assert nm.status == 304 and nm.raw == b"" and nm.header("ETag") == '"v1"', (inm, nm)
    assert me(u, {"If-None-Match": '"v2"'}).status == 200


def test_patch_bumps_version_and_etag(server):
    u = server.create_user("etag-patch")
    r = patch(u, {"name": "Ada"})
    assert r.status == 200 and r.json["name"] == "Ada" and r.json["version"] == 2, r
    assert r.header("ETag") == '"v2"'
    r = patch(u, {"email": "ada@example.com"}, {"If-Match": '"v2"'})
    assert r.status == 200 and r.json["email"] == "ada@example.com" and r.json["version"] == 3
    r = patch(u, {"name": "Ada L.", "version": 3})
    assert r.status == 200 and r.json["version"] == 4 and r.json["name"] == "Ada L."
    r = patch(u, {"name": "Any"}, {"If-Match": "*"})
    assert r.status == 200 and r.json["version"] == 5
    got = me(u)
    assert got.json == r.json and got.header("ETag") == '"v5"'
    assert me(u, {"If-None-Match": '"v2"'}).status == 200  # the old tag is stale


def test_failed_if_match_is_412_with_current_etag(server):
    u = server.create_user("etag-412")
    for tag in ['"v9"', 'W/"v1"', 'garbage']:
        r = patch(u, {"name": "x"}, {"If-Match": tag})
        assert r.status == 412, (tag, r)
        assert r.json["code"] == "version_conflict" and r.json["current_etag"] == '"v1"', r
    assert me(u).json["version"] == 1 and me(u).json["name"] == "etag-412"


def test_stale_body_version_is_409(server):
    u = server.create_user("etag-409")
    assert patch(u, {"name": "one"}).status == 200
    r = patch(u, {"name": "two", "version": 1})
    assert r.status == 409, r
    assert (r.json["code"], r.json["current_version"], r.json["current_etag"]) == (
        "version_conflict", 2, '"v2"')
    assert me(u).json["name"] == "one"


def test_validation(server):
    u = server.create_user("etag-bad")
    for body, code, param in [({"name": ""}, "invalid_parameter", "name"),
                              ({"name": "x" * 101}, "invalid_parameter", "name"),
                              ({"email": "not-an-address"}, "invalid_parameter", "email"),
                              ({"version": 0}, "invalid_parameter", "version"),
                              ({"version": "1"}, "invalid_parameter", "version"),
                              ({"api_key": "x"}, "unknown_parameter", "api_key")]:
        r = patch(u, body)
        assert (r.status, r.json["code"], r.json["param"]) == (400, code, param), (body, r)
    r = u.request("PATCH", "/v1/users/me", raw_body=b"name=x",
                  headers={"Content-Type": "text/plain"})
    assert r.status == 415
    assert server.request("GET", "/v1/users/me").status == 401
    # an empty PATCH changes nothing, so it does not bump the version
    r = patch(u, {})
    assert r.status == 200 and r.json["version"] == 1


def test_racing_patches_with_one_etag(server):
    u = server.create_user("etag-race")
    etag = me(u).header("ETag")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: patch(u, {"name": f"writer-{i}"}, {"If-Match": etag}),
                                range(8)))
    assert sorted(r.status for r in answers) == [200] + [412] * 7, answers
    winner = next(r for r in answers if r.status == 200).json
    assert all(r.json["current_etag"] == '"v2"' for r in answers if r.status == 412)
    assert me(u).json == winner and winner["version"] == 2


def test_racing_patches_with_one_body_version(server):
    u = server.create_user("version-race")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: patch(u, {"name": f"w{i}", "version": 1}), range(8)))
    assert sorted(r.status for r in answers) == [200] + [409] * 7, answers
    assert me(u).json["version"] == 2
