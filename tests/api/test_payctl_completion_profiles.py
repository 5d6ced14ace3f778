"""payctl's completion scripts and profiles (docs/client.md): `payctl completion bash|zsh|fish`
is written from the binary's own command table, and each shell completes groups, verbs and
options from it; `--profile NAME` takes a URL and key from the config file, below the flags and
the environment, and a file others may read is refused."""

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import PAYCTL
from test_payctl import COMMANDS


def script(shell):
    out = subprocess.run([PAYCTL, "completion", shell], capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return out.stdout


def bash_complete(*words):
    """What the bash completion offers for the command line `words` (the last being typed)."""
    line = ('source <("$1" completion bash); shift; COMP_WORDS=(payctl "$@"); '
            'COMP_CWORD=$#; _payctl; printf "%s\\n" "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "-c", line, "bash", PAYCTL, *words], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return sorted(out.stdout.split())


def zsh_complete(*words):
    """The same through the zsh script, with compadd and compdef standing in for zsh's
    completion system (what _payctl hands compadd is what zsh would offer)."""
    line = ('compdef() { : }; compadd() { shift; print -l -- "$@" }; '
            'source <("$1" completion zsh); shift; words=(payctl "$@"); CURRENT=$(($# + 1)); '
            '_payctl')
    out = subprocess.run(["zsh", "-f", "-c", line, "zsh", PAYCTL, *words], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return sorted(out.stdout.split())


def fish_complete(*words):
    line = f"source (\"$argv[1]\" completion fish | psub); complete -C '{' '.join(words)}'"
    out = subprocess.run(["fish", "--no-config", "-c", line, PAYCTL], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return sorted(l.split("\t")[0] for l in out.stdout.splitlines())


GROUPS = sorted({c.split()[0] for c in COMMANDS} | {"request", "listen", "completion"})


def test_bash_completion_follows_the_command_table():
    assert bash_complete("") == GROUPS
    assert bash_complete("pay") == ["payments"]
    assert bash_complete("payments", "") == sorted(c.split()[1] for c in COMMANDS
                                                   if c.startswith("payments "))
    assert bash_complete("payments", "create", "--acc") == ["--account"]
    assert bash_complete("--url", "http://x", "keys", "re") == ["revoke"]
    assert bash_complete("--profile", "test", "events", "res") == ["resend"]
    assert bash_complete("--pro") == ["--profile"]
    assert "--idempotency-key" in bash_complete("request", "POST", "/v1/accounts", "--idem")
    assert bash_complete("request", "P") == ["PATCH", "POST", "PUT"]
    assert bash_complete("completion", "") == ["bash", "fish", "zsh"]
    assert "--forward-to" in bash_complete("listen", "--")
    # every command's every option, from its own help
    for name in COMMANDS:
        helped = subprocess.run([PAYCTL, *name.split(), "--help"], capture_output=True,
                                text=True).stdout
        options = set(re.findall(r"^  (--[a-z-]+)", helped, re.M))
        assert set(bash_complete(*name.split(), "--")) == options, name


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is missing: scripts/install-deps.sh test")
def test_zsh_completion_parses_and_completes(tmp_path):
    path = tmp_path / "_payctl"
    path.write_text(script("zsh"))
    assert script("zsh").startswith("#compdef payctl\n")
    check = subprocess.run(["zsh", "-n", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert zsh_complete("") == GROUPS
    assert zsh_complete("payments", "") == bash_complete("payments", "")
    assert zsh_complete("payments", "create", "--") == bash_complete("payments", "create", "--")
    assert zsh_complete("--url", "http://x", "webhooks", "") == \
        bash_complete("--url", "http://x", "webhooks", "")


@pytest.mark.skipif(not shutil.which("fish"), reason="fish is missing: scripts/install-deps.sh test")
def test_fish_completion_parses_and_completes(tmp_path):
    path = tmp_path / "payctl.fish"
    path.write_text(script("fish"))
    check = subprocess.run(["fish", "--no-execute", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert fish_complete("payctl", "") == GROUPS
    assert fish_complete("payctl", "webhooks", "") == bash_complete("webhooks", "")
    assert fish_complete("payctl", "payments", "create", "--acc") == ["--account"]
    assert "--profile" in fish_complete("payctl", "--pro")


def test_completion_refuses_other_shells():
    for args in (["completion"], ["completion", "tcsh"], ["completion", "bash", "zsh"]):
        out = subprocess.run([PAYCTL, *args], capture_output=True, text=True)
        assert out.returncode == 2 and out.stdout == "" and "bash|zsh|fish" in out.stderr
    out = subprocess.run([PAYCTL, "completion", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("usage: payctl completion")


def test_the_build_installs_what_payctl_writes():
    build = os.path.dirname(os.path.abspath(PAYCTL))
    for shell in ("bash", "zsh", "fish"):
        with open(os.path.join(build, "completions", f"payctl.{shell}")) as f:
            assert f.read() == script(shell), shell


# ---- profiles ----

def run(args, home, env_extra=None, drop=("PAYD_URL", "PAYD_API_KEY", "PAYD_PROFILE")):
    env = {k: v for k, v in os.environ.items() if k not in drop and k != "XDG_CONFIG_HOME"}
    env["HOME"] = str(home)
    env.update(env_extra or {})
    return subprocess.run([PAYCTL, "--max-retries", "0", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def write_config(home, text, mode=0o600, where=".config/payd"):
    directory = home / where
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def two_users(fresh_server):
    server = fresh_server()
    return server, server.create_user("test-side"), server.create_user("live-side")


def me(out):
    assert out.returncode == 0, (out.stdout, out.stderr)
    return json.loads(out.stdout)["id"]


def test_profiles_keep_two_keys_side_by_side(two_users, tmp_path):
    server, test, live = two_users
    write_config(tmp_path, f"""# two keys, one file
[default]
url = {server.url}
api_key = {live.key}

[test]
url = {server.url}
api_key = {test.key}
""")
    assert me(run(["users", "me"], tmp_path)) == live.id  # [default] when none is named
    assert me(run(["--profile", "test", "users", "me"], tmp_path)) == test.id
    assert me(run(["users", "me"], tmp_path, {"PAYD_PROFILE": "test"})) == test.id
    assert me(run(["users", "me", "--profile=test"], tmp_path)) == test.id

    # the environment and the flags win over the profile, each for what it names
    assert me(run(["--profile", "test", "users", "me"], tmp_path,
                  {"PAYD_API_KEY": live.key})) == live.id
    assert me(run(["--profile", "test", "--api-key", live.key, "users", "me"], tmp_path)) \
        == live.id
    gone = run(["--profile", "test", "--url", "http://127.0.0.1:9", "users", "me"], tmp_path)
    assert gone.returncode == 3 and "cannot reach http://127.0.0.1:9" in gone.stderr

    # $XDG_CONFIG_HOME is where the file is when it is set
    xdg = tmp_path / "xdg"
    write_config(xdg, f"[test]\nurl = {server.url}\napi_key = {live.key}\n", where="payd")
    assert me(run(["--profile", "test", "users", "me"], tmp_path,
                  {"XDG_CONFIG_HOME": str(xdg)})) == live.id


def test_a_config_file_others_may_read_is_refused(two_users, tmp_path):
    server, test, _ = two_users
    path = write_config(tmp_path, f"[test]\nurl = {server.url}\napi_key = {test.key}\n",
                        mode=0o644)
    for args in (["--profile", "test", "users", "me"], ["users", "me"]):
        out = run(args, tmp_path)
        assert out.returncode == 2 and out.stdout == "", out.stderr
        assert "0644" in out.stderr and "chmod 600" in out.stderr and test.key not in out.stderr
    path.chmod(0o620)
    assert run(["--profile", "test", "users", "me"], tmp_path).returncode == 2
    path.chmod(0o600)
    assert me(run(["--profile", "test", "users", "me"], tmp_path)) == test.id
    # with the key and URL from the environment the file is not read at all
    path.chmod(0o644)
    assert me(run(["users", "me"], tmp_path, {"PAYD_URL": server.url,
                                               "PAYD_API_KEY": test.key})) == test.id


@pytest.mark.parametrize("text,words", [
    ("[test]\nurl = http://127.0.0.1:9\n", "no [prod] section"),
    ("[prod\napi_key = x\n", "section header"),
    ("[prod]\ntoken = x\n", "line 2: unknown setting"),
    ("[prod]\njust words\n", "line 2: expected key = value"),
])
def test_profile_mistakes_are_usage_errors(tmp_path, text, words):
    write_config(tmp_path, text)
    out = run(["--profile", "prod", "users", "me"], tmp_path)
    assert out.returncode == 2 and out.stdout == "" and words in out.stderr, out.stderr


def test_a_missing_file_is_an_error_only_when_a_profile_is_named(tmp_path):
    out = run(["--profile", "prod", "users", "me"], tmp_path)
    assert out.returncode == 2 and "cannot read" in out.stderr
    out = run(["users", "me"], tmp_path)
    assert out.returncode == 2 and "no API key" in out.stderr
