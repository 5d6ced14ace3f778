"""What an operator reads and installs, checked against the binaries: the README's flag table
and payd(1) against `payd serve --help`, the man pages against `mandoc -T lint` and payctl's
commands, the systemd unit against `systemd-analyze verify` and its drain timeout, and
`make install`'s files."""

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
BUILD = os.environ.get("PAYD_BUILD", os.path.join(ROOT, "build"))
PAYD = os.environ.get("PAYD_BIN", os.path.join(BUILD, "payd"))
PAYCTL = os.environ.get("PAYCTL_BIN", os.path.join(BUILD, "payctl"))
MAN_PAGES = [os.path.join(ROOT, "man", name) for name in ("payd.1", "payctl.1")]
UNIT = os.path.join(ROOT, "deploy", "payd.service")
ENV_FILE = os.path.join(ROOT, "deploy", "payd.env")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def serve_flags():
    """{flag: default} from `payd serve --help`."""
    out = subprocess.run([PAYD, "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    flags = dict(re.findall(r"^  --([a-z0-9-]+) .*\n +\[PAYD_[A-Z0-9_]+, default ([^\]]*)\]$",
                            out.stdout, re.M))
    assert len(flags) >= 20, out.stdout
    return flags


def duration_s(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", text.strip())
    assert m, text
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def test_readme_flag_table_matches_serve_help():
    readme = read(os.path.join(ROOT, "README.md"))
    # a flag without a default is written "(none)"
    rows = re.findall(r"^\| `--([a-z0-9-]+)` \| (?:`([^`]*)`|\(none\)) \|", readme, re.M)
    table = dict(rows)
    assert len(rows) == len(table), "a flag is listed twice"
    flags = serve_flags()
    assert sorted(table) == sorted(flags), (
        f"missing from README: {sorted(set(flags) - set(table))}; "
        f"not a flag: {sorted(set(table) - set(flags))}")
    for flag, default in flags.items():
        assert table[flag] == default, (flag, table[flag], default)


def test_payd_man_page_lists_every_serve_flag():
    page = read(MAN_PAGES[0])
    listed = set(re.findall(r"^\.It Fl Fl ([a-z0-9-]+)", page[page.index(".Sh SERVE FLAGS"):],
                            re.M))
    assert listed == set(serve_flags())


def test_payctl_man_page_lists_every_command():
    out = subprocess.run([PAYCTL, "--help"], capture_output=True, text=True, timeout=30)
    commands = re.findall(r"^  ([a-z]+ [a-z-]+) ", out.stdout.split("commands:")[1].split(
        "global options:")[0], re.M)
    assert len(commands) >= 20
    page = read(MAN_PAGES[1])
    for command in commands:
        if command.startswith("request "):
            command = "request"
        assert f".It Cm {command}" in page, command


def test_man_pages_pass_mandoc_lint():
    # From their directory: mandoc resolves each page's .Xr to the other there.
    out = subprocess.run(["mandoc", "-T", "lint", *map(os.path.basename, MAN_PAGES)],
                         cwd=os.path.dirname(MAN_PAGES[0]), capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out.stdout + out.stderr
    for page in MAN_PAGES:
        rendered = subprocess.run(["man", "-l", "-P", "cat", page], capture_output=True,
                                  text=True, env=dict(os.environ, MANWIDTH="80"))
        assert rendered.returncode == 0 and "SYNOPSIS" in rendered.stdout, rendered.stderr


def test_systemd_unit_verifies(tmp_path):
    """`systemd-analyze verify` wants ExecStart's binary and the man page of Documentation= to
    exist: check a copy that points at the built binary, with the man pages on MANPATH. It
    reports some problems only as warnings, so any output at all fails."""
    unit = read(UNIT)
    unit = unit.replace("ExecStart=/usr/local/bin/payd ", f"ExecStart={PAYD} ")
    unit = unit.replace("EnvironmentFile=/etc/payd/payd.env", f"EnvironmentFile={ENV_FILE}")
    assert PAYD in unit and ENV_FILE in unit
    (tmp_path / "payd.service").write_text(unit)
    man1 = tmp_path / "man" / "man1"
    man1.mkdir(parents=True)
    for page in MAN_PAGES:
        shutil.copy(page, man1)
    out = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "payd.service")],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, MANPATH=str(tmp_path / "man")))
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out.stdout + out.stderr


def test_backup_units_verify(tmp_path):
    """The backup service and its timer, checked the same way, with the built binary."""
    service = read(os.path.join(ROOT, "deploy", "payd-backup.service"))
    service = service.replace("/usr/local/bin/payd ", f"{PAYD} ")
    service = service.replace("EnvironmentFile=/etc/payd/payd.env", f"EnvironmentFile={ENV_FILE}")
    assert f"{PAYD} backup --to" in service and ENV_FILE in service
    (tmp_path / "payd-backup.service").write_text(service)
    shutil.copy(os.path.join(ROOT, "deploy", "payd-backup.timer"), tmp_path)
    man1 = tmp_path / "man" / "man1"
    man1.mkdir(parents=True)
    for page in MAN_PAGES:
        shutil.copy(page, man1)
    out = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "payd-backup.service"),
                          str(tmp_path / "payd-backup.timer")],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, MANPATH=str(tmp_path / "man")))
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out.stdout + out.stderr


def test_haproxy_tls_termination_line_is_valid(tmp_path):
    """deploy/haproxy.cfg's commented TLS bind, switched on with a pair made here, passes
    `haproxy -c`."""
    cfg = read(os.path.join(ROOT, "deploy", "haproxy.cfg"))
    line = "# bind :443 ssl crt /etc/haproxy/payd.pem"
    assert line in cfg
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)
    (tmp_path / "payd.pem").write_text(cert.read_text() + key.read_text())
    cfg = cfg.replace(line, f"bind 127.0.0.1:8443 ssl crt {tmp_path / 'payd.pem'}")
    cfg = cfg.replace("/etc/haproxy/payd-errors", os.path.join(ROOT, "deploy", "payd-errors"))
    (tmp_path / "haproxy.cfg").write_text(cfg)
    out = subprocess.run(["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


def unit_settings():
    settings = {}
    for line in read(UNIT).splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


def env_settings():
    return dict(re.findall(r"^(PAYD_[A-Z0-9_]+)=(.*)$", read(ENV_FILE), re.M))


def test_unit_is_hardened_and_drains_before_it_kills():
    unit = unit_settings()
    for key, value in {"Type": "notify", "NotifyAccess": "main", "WatchdogSec": "30s",
                       "User": "payd", "ProtectSystem": "strict", "NoNewPrivileges": "yes",
                       "StateDirectory": "payd", "Restart": "on-failure",
                       "KillSignal": "SIGTERM"}.items():
        assert unit.get(key) == [value], key
    drain = duration_s(env_settings()["PAYD_SHUTDOWN_TIMEOUT"])
    assert duration_s(unit["TimeoutStopSec"][0]) > drain


def test_env_file_names_only_real_flags():
    named = set(re.findall(r"^#? ?PAYD_([A-Z0-9_]+)=", read(ENV_FILE), re.M))
    flags = {f.upper().replace("-", "_") for f in serve_flags()}
    assert named and named <= flags, named - flags


def test_install_puts_man_pages_and_completion_in_place(tmp_path):
    out = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for path in ("bin/payd", "bin/payctl", "share/man/man1/payd.1", "share/man/man1/payctl.1",
                 "share/bash-completion/completions/payctl",
                 "share/zsh/vendor-completions/_payctl",
                 "share/fish/vendor_completions.d/payctl.fish"):
        assert (tmp_path / path).is_file(), path
    version = subprocess.run([str(tmp_path / "bin/payctl"), "--version"], capture_output=True,
                             text=True)
    assert version.returncode == 0 and version.stdout.startswith("payctl ")


def test_version_outside_git_is_unknown(tmp_path):
    """A tarball has no .git: the build still works and names the revision "unknown"."""
    out = tmp_path / "version.c"
    subprocess.run(["cmake", f"-DSRC={tmp_path}", f"-DOUT={out}", "-DVERSION=9.8.7", "-P",
                    os.path.join(ROOT, "cmake/version.cmake")], check=True, capture_output=True)
    text = read(out)
    assert 'payd_version[] = "9.8.7";' in text and 'payd_revision[] = "unknown";' in text
    subprocess.run(["cmake", f"-DSRC={ROOT}", f"-DOUT={out}", "-DVERSION=9.8.7", "-P",
                    os.path.join(ROOT, "cmake/version.cmake")], check=True, capture_output=True)
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    assert f'payd_revision[] = "{head}' in read(out)
