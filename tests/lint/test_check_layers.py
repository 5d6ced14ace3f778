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
