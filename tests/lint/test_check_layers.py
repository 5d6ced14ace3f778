"""scripts/check-layers.py on trees of its own: the real tree passes, and an include that points
up, sideways, or to a directory in no layer fails with file:line and the rule."""
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-layers.py"


def check(root):
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                          text=True)


def tree(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_tree_points_down():
    r = check(ROOT)
    assert r.returncode == 0, r.stdout
    assert r.stdout == ""


def test_downward_and_own_includes_pass(tmp_path):
    root = tree(tmp_path, {
        "core/a.h": "",
        "http/b.c": '#include "http/b.h"\n#include "core/a.h"\n',
        "api/c.c": '#include "idem/idem.h"\n#include "node/app.h"\n#include "core/a.h"\n',
        "main.c": '#include "server/pipeline.h"\n',
        "client/d.c": '#include "payd/client.h"\n#include "core/a.h"\n',
    })
    r = check(root)
    assert r.returncode == 0, r.stdout


def test_upward_include_fails(tmp_path):
    root = tree(tmp_path,
                {"idem/recovery.c": '#include <stdio.h>\n\n#include "server/pipeline.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert r.stdout.startswith('src/idem/recovery.c:3: includes "server/…": server/ is above idem')


def test_sideways_include_fails(tmp_path):
    root = tree(tmp_path, {
        "http/x.c": '#include "store/store.h"\n',
        "processor/y.c": '  # include "webhook/delivery.h"\n',
    })
    lines = check(root).stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith('src/http/x.c:1: includes "store/…": store/ is beside http')
    assert lines[1].startswith('src/processor/y.c:1: includes "webhook/…": webhook/ is beside '
                               'processor')


def test_http_may_not_use_the_request_layer(tmp_path):
    root = tree(tmp_path, {"http/router.c": '#include "request/route.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert "request/ is above http" in r.stdout


def test_a_wrapped_library_is_included_in_its_layer_only(tmp_path):
    root = tree(tmp_path, {
        "http/server.c": "#include <microhttpd.h>\n",
        "store/db.c": "#include <sqlite3.h>\n#include <libpq-fe.h>\n",
        "processor/sim.c": "#include <stdio.h>\n#include <microhttpd.h>\n",
        "api/x.c": " # include <sqlite3.h>\n",
    })
    r = check(root)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "src/api/x.c:1: includes <sqlite3.h>, which only store/ may: the other layers use "
        "store/'s headers",
        "src/processor/sim.c:2: includes <microhttpd.h>, which only http/ may: the other layers "
        "use http/'s headers",
    ]


def test_client_and_cli_use_core_only(tmp_path):
    root = tree(tmp_path, {
        "client/a.c": '#include "store/db.h"\n',
        "cli/b.c": '#include "client/internal.h"\n',
    })
    r = check(root)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        'src/cli/b.c:1: includes "client/…": cli/ may include only core/, payd/',
        'src/client/a.c:1: includes "store/…": client/ may include only core/, payd/',
    ]


def test_unknown_directories_fail(tmp_path):
    root = tree(tmp_path, {"extra/a.c": "", "api/b.c": '#include "extra/a.h"\n'})
    out = check(root).stdout.splitlines()
    assert out[0].startswith('src/api/b.c:1: includes "extra/…": extra/ is in no layer')
    assert out[1].startswith("src/extra/a.c:1: src/extra is in no layer")


# ---- named types and callbacks (the ties an include check cannot see) ----

SERVER_TYPE = {"server/pipeline.c": "struct server_state {\n    int requests;\n};\n"}


def test_a_forward_declared_upper_type_fails(tmp_path):
    root = tree(tmp_path, {
        **SERVER_TYPE,
        "request/request.h": "/* struct server_state in a comment is no tie */\n"
                             "struct server_state;\n"
                             "typedef struct request {\n"
                             "    struct server_state *server;\n"
                             "} request;\n",
    })
    r = check(root)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        f"src/request/request.h:{n}: names struct server_state, defined in server/: server/ is "
        "above request; a layer names the types of only itself and those below it: core ← store "
        "http ← node ← processor webhook request ← idem ← api ← server ← main.c"
        for n in (2, 4)]


def test_own_lower_and_system_types_pass(tmp_path):
    root = tree(tmp_path, {
        **SERVER_TYPE,
        "core/arena.h": "typedef struct arena { int used; } arena;\n",
        "request/request.h": "struct arena;\nstruct timespec;\n"
                             "typedef struct request { struct arena *a; } request;\n",
        "main.c": "struct server_state;\nstatic struct request *r;\n",
    })
    r = check(root)
    assert r.returncode == 0, r.stdout


def test_an_upward_callback_signature_fails(tmp_path):
    root = tree(tmp_path, {
        "api/payments.h": "typedef struct api_payment { int amount; } api_payment;\n",
        "idem/idem.h": "typedef struct idem_hooks {\n"
                       "    void (*on_paid)(struct api_payment *p);\n"
                       "} idem_hooks;\n",
        "store/store.h": "void store_each(void (*visit)(const api_payment *p, void *arg));\n",
    })
    r = check(root)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    assert lines[0].startswith("src/idem/idem.h:2: callback on_paid names struct api_payment in "
                               "its signature, defined in api/: api/ is above idem")
    assert lines[0].endswith("a lower layer's callback is typed in its own layer's terms")
    assert lines[1].startswith("src/store/store.h:1: callback visit names api_payment in its "
                               "signature, defined in api/: api/ is above store")


RUNNER = {
    "request/step.h": "typedef void (*request_step)(int n);\n"
                      "typedef struct request_runner {\n"
                      "    void (*finish)(int n);\n"
                      "    request_step on_worker;\n"
                      "} request_runner;\n",
    "request/step.c": "void request_finish(request_runner *r) { r->finish(1); r->on_worker(2); }\n",
}


def test_an_upward_callback_handed_down_outside_start_up_fails(tmp_path):
    root = tree(tmp_path, {
        **RUNNER,
        "api/payments.c": "static void paid(int n) { (void)n; }\n"
                          "void payments_setup(request_runner *r)\n"
                          "{\n"
                          "    r->finish = paid;\n"
                          "    request_runner mine = {.on_worker = paid};\n"
                          "}\n",
    })
    r = check(root)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "src/api/payments.c:4: hands paid (api/) to request/'s callback .finish, which request/ "
        "calls: a lower layer is handed an upper layer's function only at start-up (main.c, "
        "processor/sim_server.c, server)",
        "src/api/payments.c:5: hands paid (api/) to request/'s callback .on_worker, which "
        "request/ calls: a lower layer is handed an upper layer's function only at start-up "
        "(main.c, processor/sim_server.c, server)",
    ]


def test_callbacks_handed_down_at_start_up_or_in_a_const_table_pass(tmp_path):
    root = tree(tmp_path, {
        **RUNNER,
        "server/pipeline.c": "static void finish(int n) { (void)n; }\n"
                             "static request_runner runner = {.finish = finish};\n",
        "main.c": "static void work(int n) { (void)n; }\n"
                  "int main(void) { request_runner r; r.on_worker = work; return 0; }\n",
        "api/routes.c": "static void handler(int n) { (void)n; }\n"
                        "const request_runner table[] = {{.finish = handler}};\n",
        # a field of the same name that request/ never calls through
        "store/store.h": "typedef struct store_hooks { void (*done)(int n); } store_hooks;\n",
        "api/x.c": "static void done(int n) { (void)n; }\n"
                   "void x(store_hooks *h) { h->done = done; }\n",
    })
    r = check(root)
    assert r.returncode == 0, r.stdout


# ---- write jobs speak write_result (rule 4) ----

STORE = {
    "store/db.h": "typedef struct db_conn db_conn;\n"
                  "typedef enum db_status { DB_DONE = 0, DB_ERROR = -3 } db_status;\n",
    "store/store.h": '#include "store/db.h"\n'
                     "typedef struct store store;\n"
                     "typedef enum write_result { WRITE_OK, WRITE_FAILED } write_result;\n"
                     "write_result write_result_of_db(db_status rc);\n"
                     "typedef write_result (*write_job_fn)(db_conn *db, void *ctx);\n"
                     "write_result store_write(store *s, write_job_fn fn, void *ctx);\n"
                     "void store_submit(store *s, write_job_fn fn, void *ctx,\n"
                     "                  void (*then)(write_result r, void *arg), void *arg);\n",
    "request/step.h": '#include "store/store.h"\n'
                      "typedef struct request { write_result write_result; } request;\n"
                      "int request_write_then(request *req, write_job_fn fn, void *ctx);\n",
}


def test_write_jobs_that_return_write_result_pass(tmp_path):
    root = tree(tmp_path, {
        **STORE,
        "api/x.c": '#include "request/step.h"\n'
                   "static write_result job(db_conn *db, void *arg)\n"
                   "{\n"
                   "    return write_result_of_db(DB_DONE);\n"
                   "}\n"
                   "static int count(db_conn *db, void *arg) { return 0; } /* not a job */\n"
                   "int x(request *req, store *s)\n"
                   "{\n"
                   "    write_result w = req->write_result;\n"
                   "    store_write(s, job, NULL);\n"
                   "    int n = request_write_then(req, job, NULL) + count(0, 0);\n"
                   "    return n + (w == WRITE_OK);\n"
                   "}\n",
    })
    r = check(root)
    assert r.returncode == 0, r.stdout


def test_an_int_write_job_fails(tmp_path):
    root = tree(tmp_path, {
        **STORE,
        # a job handed to the store, to a layer above it (any write_job_fn parameter), and
        # stored in a write_job_fn field
        "api/x.c": '#include "request/step.h"\n'
                   "static int job(db_conn *db, void *arg)\n"
                   "{\n"
                   "    return DB_ERROR;\n"
                   "}\n"
                   "typedef struct queued { write_job_fn fn; } queued;\n"
                   "int x(request *req, store *s)\n"
                   "{\n"
                   "    store_submit(s, job, NULL,\n"
                   "                 NULL, NULL);\n"
                   "    queued q = {.fn = job};\n"
                   "    return request_write_then(req, &job, NULL);\n"
                   "}\n",
    })
    r = check(root)
    assert r.returncode == 1
    tail = ("as a write job but returns int: a write job returns write_result (store/store.h), "
            "its db_status said through write_result_of_db")
    assert r.stdout.splitlines() == [
        f"src/api/x.c:9: job is handed to store_submit {tail}",
        f"src/api/x.c:12: job is handed to request_write_then {tail}",
        f"src/api/x.c:11: job is handed to .fn {tail}",
    ]


def test_an_int_write_job_type_fails(tmp_path):
    store_h = STORE["store/store.h"].replace("typedef write_result (*write_job_fn)",
                                             "typedef int (*write_job_fn)")
    root = tree(tmp_path, {**STORE, "store/store.h": store_h})
    r = check(root)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "src/store/store.h:5: write_job_fn returns int: a write job returns write_result "
        "(store/store.h)"]


def test_a_cast_write_result_fails(tmp_path):
    root = tree(tmp_path, {
        **STORE,
        "api/x.c": '#include "request/step.h"\n'
                   "int x(request *req)\n"
                   "{\n"
                   "    int raw = (int)req->write_result;\n"
                   "    req->write_result = (write_result)raw;\n"
                   "    return raw == (int) req -> write_result;\n"
                   "}\n",
    })
    r = check(root)
    assert r.returncode == 1
    message = "casts a write_result: a request's write_result is read as it is (store/store.h)"
    assert r.stdout.splitlines() == [f"src/api/x.c:{n}: {message}" for n in (4, 5, 6)]
