"""The nginx config generator and the nginx setup script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from cluster_helpers import ROOT, ensure_installed
from mrtr_cli.main import main
from mrtr_cli.nginx import NginxConfig, render_nginx_conf, write_nginx_conf


def config(tmp_path: Path, **changes: object) -> NginxConfig:
    values: dict[str, object] = {
        "upstreams": ("127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"),
        "listen": "127.0.0.1:8080",
        "prefix": str(tmp_path / "run"),
    }
    values.update(changes)
    return NginxConfig(**values)  # type: ignore[arg-type]


def test_config_has_the_documented_directives(tmp_path: Path) -> None:
    text = render_nginx_conf(config(tmp_path))
    for line in (
        "daemon off;",
        f"pid {tmp_path}/run/nginx.pid;",
        "server 127.0.0.1:8001 max_fails=1 fail_timeout=5s;",
        "server 127.0.0.1:8002 max_fails=1 fail_timeout=5s;",
        "server 127.0.0.1:8003 max_fails=1 fail_timeout=5s;",
        "keepalive 32;",
        "listen 127.0.0.1:8080;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_next_upstream error timeout non_idempotent;",
        "proxy_buffering off;",
    ):
        assert line in text, line
    assert "$remote_addr" in text and "$$" not in text  # nginx variables survive the template


@pytest.mark.parametrize(("changes", "fragment"), [
    ({"upstreams": ()}, "at least one upstream"),
    ({"upstreams": ("127.0.0.1; evil",)}, "not HOST:PORT"),
    ({"listen": "80; include /etc/passwd"}, "not PORT or HOST:PORT"),
    ({"prefix": "relative/dir"}, "absolute"),
    ({"prefix": "/tmp/a;b"}, "misread"),
    ({"read_timeout": "forever"}, "nginx time"),
    ({"keepalive": 0}, "keepalive must be"),
    ({"keepalive": -1}, "keepalive must be"),
    ({"next_upstream_tries": 0}, "next_upstream_tries must be"),  # nginx: 0 is no limit
    ({"worker_processes": 0}, "worker_processes must be"),
    ({"max_fails": -1}, "max_fails must be"),
])
def test_config_refuses_values_nginx_would_misread(tmp_path: Path, changes: dict[str, object],
                                                   fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        config(tmp_path, **changes)


@pytest.mark.parametrize("option", ["--keepalive", "--next-upstream-tries"])
def test_nginx_conf_command_refuses_a_count_below_one(
    tmp_path: Path, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # nginx refuses "keepalive 0;" only when it starts, and reads "proxy_next_upstream_tries
    # 0;" as no limit at all, not as the "most instances one request is tried on" of --help.
    out = tmp_path / "nginx.conf"
    assert main(["nginx-conf", "--upstream", "127.0.0.1:9001", "--prefix", str(tmp_path / "p"),
                 "-o", str(out), option, "0"]) == 2
    assert "must be at least 1" in capsys.readouterr().err
    assert not out.exists()


def test_generated_config_passes_nginx_syntax_check(tmp_path: Path) -> None:
    nginx = ensure_installed("nginx", ["scripts/setup_nginx.sh"])
    cfg = config(tmp_path, user="root" if os.geteuid() == 0 else None)
    conf = write_nginx_conf(cfg, tmp_path / "nginx.conf")
    done = subprocess.run([nginx, "-p", cfg.prefix, "-c", str(conf), "-e", "stderr", "-t"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "syntax is ok" in done.stderr


def test_nginx_conf_command_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "nginx.conf"
    assert main(["nginx-conf", "--upstream", "127.0.0.1:9001", "--listen", "9000",
                 "--prefix", str(tmp_path / "p"), "-o", str(out)]) == 0
    assert "server 127.0.0.1:9001" in out.read_text()
    assert (tmp_path / "p" / "tmp" / "proxy").is_dir()


def test_setup_script_is_idempotent_and_starts_nothing() -> None:
    ensure_installed("nginx", ["scripts/setup_nginx.sh"])
    done = subprocess.run(["bash", "scripts/setup_nginx.sh"], cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("nginx present: ")
    assert not Path("/run/nginx.pid").exists() or not _alive(Path("/run/nginx.pid"))


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True
