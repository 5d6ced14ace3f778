"""The command lines as a new user meets them: --version on both binaries, help on stdout with
exit 0, usage mistakes on stderr with exit 2 and the unknown command named."""

import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
BUILD = os.environ.get("PAYD_BUILD", os.path.join(ROOT, "build"))
PAYD = os.environ.get("PAYD_BIN", os.path.join(BUILD, "payd"))
PAYCTL = os.environ.get("PAYCTL_BIN", os.path.join(BUILD, "payctl"))


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(payd VERSION ([0-9.]+)", f.read()).group(1)


@pytest.mark.parametrize("binary", [PAYD, PAYCTL], ids=["payd", "payctl"])
def test_version_names_the_release_and_revision(binary):
    out = run(binary, "--version")
    assert out.returncode == 0 and out.stderr == ""
    name = os.path.basename(binary)
    m = re.fullmatch(rf"{name} (\S+) \(git (\S+)\)\n", out.stdout)
    assert m, out.stdout
    assert m.group(1) == project_version()
    revision = m.group(2)
    if os.path.exists(os.path.join(ROOT, ".git")):
        # A commit of this repository (the build may predate the latest commit).
        commit = revision.removesuffix("-dirty")
        assert re.fullmatch(r"[0-9a-f]{12}", commit), revision
        assert run("git", "-C", ROOT, "cat-file", "-e", commit + "^{commit}").returncode == 0
    else:
        assert revision == "unknown"


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["serve", "--help"]])
def test_help_goes_to_stdout(args):
    out = run(PAYD, *args)
    assert out.returncode == 0 and out.stdout.startswith("usage: payd") and out.stderr == ""


def test_top_usage_names_every_command():
    text = run(PAYD, "--help").stdout
    for command in ("serve", "migrate", "user create", "account create", "key create",
                    "key list", "key revoke", "id decode", "processor-sim", "dev seed",
                    "dev store-bench", "--version"):
        assert re.search(rf"^  {re.escape(command)}\b", text, re.M), command


@pytest.mark.parametrize("args,named", [
    (["frob"], "'frob'"),
    (["user", "delete"], "'user delete'"),
    (["key", "rotate"], "'key rotate'"),
    (["dev", "nothing"], "'dev nothing'"),
])
def test_unknown_commands_are_named(args, named):
    out = run(PAYD, *args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"payd: unknown command {named}"), out.stderr


def test_no_command_is_a_usage_error():
    out = run(PAYD)
    assert out.returncode == 2 and out.stdout == "" and "usage: payd" in out.stderr


def test_payctl_unknown_group_is_named():
    out = run(PAYCTL, "frob")
    assert out.returncode == 2 and out.stdout == "" and '"frob"' in out.stderr
