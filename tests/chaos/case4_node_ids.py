"""Case 4: node identity. On PostgreSQL two nodes given the same explicit --node-id: the second is
refused at start; three nodes on --node-id auto, under load and with command-line commands
creating users beside them, never issue colliding ids. On SQLite a second `payd serve` of the
same file is refused while command-line commands still work."""
import json
import os
import subprocess
import threading
import time

import chaos
import pg


def refused(url, args):
    out = subprocess.run([chaos.PAYD, "serve", "--listen", f"127.0.0.1:{chaos.free_port()}",
                          "--db", url] + args, capture_output=True, text=True, timeout=30)
    return out.returncode, out.stderr.strip()


def main():
    failures = []
    cluster = pg.cluster()
    name = cluster.new_database()
    url = cluster.url(name)
    wd = chaos.workdir()

    first = chaos.Node(wd, url, chaos.FAST + ["--node-id", "7"], name="n7").start()
    rc, err = refused(url, chaos.FAST + ["--node-id", "7"])
    explicit_refused = rc != 0 and "held by a live node" in err
    if not explicit_refused:
        failures.append(f"a second --node-id 7 was not refused: rc={rc} {err[-200:]}")
    first.stop()

    nodes = [chaos.Node(wd, url, chaos.FAST, name=f"auto{i}").start() for i in range(3)]
    api_key, accounts = chaos.setup_user(url, accounts=3)
    ids, lock, cli_failures = [], threading.Lock(), []

    def client(n):
        for i in range(60):
            body = {"account_id": accounts[n % 3], "amount": 100 + i, "currency": "USD",
                    "source": "tok_visa"}
            s, _, raw = chaos.until_final([nodes[(n + i) % 3].url], "POST", "/v1/payments",
                                          api_key, body, chaos.new_key())
            if s == 201:
                with lock:
                    ids.append(json.loads(raw)["id"])

    def make_users():
        out = subprocess.run([chaos.PAYD, "user", "create", "u", "--db", url],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            cli_failures.append(out.stderr)
        else:
            with lock:
                ids.append(json.loads(out.stdout)["user_id"])

    threads = [threading.Thread(target=client, args=(n,)) for n in range(6)]
    threads += [threading.Thread(target=make_users) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    leased = cluster.psql("SELECT count(DISTINCT node_id) FROM node_leases", name)
    node_ids = set()
    for n in nodes:
        with open(n.log_path) as f:
            for line in f:
                if '"payd serving"' in line:
                    node_ids.add(json.loads(line)["node_id"])
    collisions = len(ids) - len(set(ids))
    conflicts = sum(open(n.log_path).read().count('"result":"conflict"') for n in nodes)
    if len(node_ids) != 3 or leased != "3":
        failures.append(f"auto nodes: ids {sorted(node_ids)}, {leased} leases; want 3 distinct")
    if collisions or conflicts or cli_failures:
        failures.append(f"{collisions} colliding ids, {conflicts} conflicts, "
                        f"{len(cli_failures)} failed user creates: {cli_failures[:1]}")
    for n in nodes:
        n.stop()

    lite = os.path.join(wd, "payd.db")
    owner = chaos.Node(wd, lite, chaos.FAST, name="lite").start()
    rc, err = refused(lite, chaos.FAST)
    lite_refused = rc != 0 and "owns the database" in err
    if not lite_refused:
        failures.append(f"a second serve of one SQLite file was not refused: rc={rc} {err[-200:]}")
    try:
        chaos.setup_user(lite)
        cli_beside = 1
    except RuntimeError as e:
        cli_beside = 0
        failures.append(f"command line beside a SQLite serve failed: {e}")
    owner.stop()
    # the books of both databases verify (no money moved: empty, and still whole)
    for books in (chaos.Books(None, pg_cluster=cluster, pg_db=name), chaos.Books(lite)):
        failures += chaos.ledger_verify(books)[0]
    print(f"case4 node ids: explicit_refused={int(explicit_refused)} auto_nodes={len(node_ids)} "
          f"ids={len(ids)} id_collisions={collisions} conflicts={conflicts} "
          f"cli_failures={len(cli_failures)} sqlite_second_serve_refused={int(lite_refused)} "
          f"cli_beside_serve={cli_beside}", flush=True)
    chaos.finish(failures)


if __name__ == "__main__":
    main()
