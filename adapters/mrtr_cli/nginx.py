"""``mrtr nginx-conf``: an nginx config for several ``mrtr serve`` instances.

Renders ``templates/nginx.conf.template``: a round-robin ``upstream`` of the instances,
HTTP/1.1 with keepalive to them, ``proxy_next_upstream error timeout non_idempotent`` so the
requests of a dead instance move on, and every path (pid, logs, temp files) under one prefix
folder, so nginx runs as an ordinary foreground process (``daemon off;``) started with
``nginx -p PREFIX -c CONF -e stderr`` and stopped by pid. See ``deploy/README.md``.
"""

from __future__ import annotations

import argparse
import re
import shutil
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Final

import attrs

__all__ = [
    "NginxConfig",
    "add_parser",
    "find_nginx",
    "nginx_command",
    "render_nginx_conf",
    "write_nginx_conf",
]

TEMPLATE: Final = "nginx.conf.template"
_HOSTPORT: Final = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")
_SIZE: Final = re.compile(r"^\d+[kKmM]?$")
_TIME: Final = re.compile(r"^\d+(ms|s|m)?$")


@attrs.frozen(kw_only=True)
class NginxConfig:
    """What the generated config says.

    Attributes:
        upstreams: ``host:port`` of each instance, in round-robin order.
        listen: What nginx listens on (``8080`` or ``127.0.0.1:8080``).
        prefix: The folder for the pid file, logs and temp files (absolute).
        keepalive: Idle keepalive connections kept to the instances (per worker).
        max_fails, fail_timeout: An instance that failed ``max_fails`` times is skipped for
            ``fail_timeout``.
        next_upstream_tries: Most instances one request is tried on.
        connect_timeout, read_timeout: nginx time values (``2s``, ``60s``).
        worker_processes: nginx worker processes.
        user: The ``user`` directive (only meaningful when nginx starts as root).
        client_max_body_size: Largest request body (nginx size value).
        error_log: Where nginx logs, and from which level (default ``PREFIX/error.log warn``;
            ``stderr notice`` shows the "start worker process" line a supervisor can wait on).
    """

    upstreams: tuple[str, ...]
    listen: str
    prefix: str
    keepalive: int = 32
    max_fails: int = 1
    fail_timeout: str = "5s"
    next_upstream_tries: int = 3
    connect_timeout: str = "2s"
    read_timeout: str = "60s"
    worker_processes: int = 1
    user: str | None = None
    client_max_body_size: str = "1m"
    error_log: str | None = None

    def __attrs_post_init__(self) -> None:
        if not self.upstreams:
            raise ValueError("at least one upstream is needed")
        for upstream in self.upstreams:
            if not _HOSTPORT.match(upstream):
                raise ValueError(f"upstream {upstream!r} is not HOST:PORT")
        if not re.match(r"^([A-Za-z0-9.\-\[\]:]+:)?\d{1,5}$", self.listen):
            raise ValueError(f"listen {self.listen!r} is not PORT or HOST:PORT")
        if not Path(self.prefix).is_absolute():
            raise ValueError("prefix must be an absolute path")
        if any(c in self.prefix for c in ";{}\"'\n$#") or any(c.isspace() for c in self.prefix):
            raise ValueError("prefix has characters nginx would misread")
        # nginx refuses a keepalive or worker count below one when it starts, and reads
        # "proxy_next_upstream_tries 0" as no limit at all.
        for name, least in (("keepalive", 1), ("next_upstream_tries", 1),
                            ("worker_processes", 1), ("max_fails", 0)):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or count < least:
                raise ValueError(f"{name} must be at least {least}, got {count!r}")
        for value in (self.fail_timeout, self.connect_timeout, self.read_timeout):
            if not _TIME.match(value):
                raise ValueError(f"{value!r} is not an nginx time (e.g. 5s)")
        if not _SIZE.match(self.client_max_body_size):
            raise ValueError(f"{self.client_max_body_size!r} is not an nginx size")
        if self.user is not None and not re.match(r"^[A-Za-z0-9_.\-]+$", self.user):
            raise ValueError(f"user {self.user!r} is not a user name")
        if self.error_log is not None and not re.match(
                r"^(stderr|/[^;{}\"'\n$#]+)( (debug|info|notice|warn|error|crit))?$",
                self.error_log):
            raise ValueError(f"error_log {self.error_log!r} is not 'stderr|/path [level]'")


def render_nginx_conf(config: NginxConfig, *, conf_path: str = "nginx.conf") -> str:
    """The nginx config text for ``config``."""
    template = Template(
        resources.files("mrtr_cli").joinpath("templates", TEMPLATE).read_text(encoding="utf-8"))
    servers = "\n".join(
        f"        server {u} max_fails={config.max_fails} fail_timeout={config.fail_timeout};"
        for u in config.upstreams)
    return template.substitute(
        prefix=config.prefix,
        conf=conf_path,
        servers=servers,
        listen=config.listen,
        keepalive=config.keepalive,
        next_upstream_tries=config.next_upstream_tries,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        worker_processes=config.worker_processes,
        user_line=f"user {config.user};" if config.user else "",
        client_max_body_size=config.client_max_body_size,
        error_log=config.error_log or f"{config.prefix}/error.log warn",
    )


def write_nginx_conf(config: NginxConfig, path: str | Path) -> Path:
    """Render ``config`` to ``path`` and create the prefix's temp folders."""
    file = Path(path).resolve()
    prefix = Path(config.prefix)
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / "tmp" / sub).mkdir(parents=True, exist_ok=True)
    file.write_text(render_nginx_conf(config, conf_path=str(file)), encoding="utf-8")
    return file


def find_nginx() -> str | None:
    """The nginx binary (``PATH``, then Debian's ``/usr/sbin/nginx``), if installed."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None


def nginx_command(nginx: str, config: NginxConfig, conf: str | Path) -> list[str]:
    """The command line that runs the config in the foreground."""
    return [nginx, "-p", config.prefix, "-c", str(conf), "-e", "stderr"]


def add_parser(sub: Any) -> None:
    """Register ``mrtr nginx-conf``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "nginx-conf", help="write an nginx config balancing several mrtr serve instances")
    p.add_argument("--upstream", action="append", required=True, metavar="HOST:PORT",
                   help="an instance (repeatable, round-robin order)")
    p.add_argument("--listen", default="8080",
                   help="PORT or HOST:PORT nginx listens on (default 8080)")
    p.add_argument("--prefix", required=True, help="folder for pid, logs and temp files")
    p.add_argument("--output", "-o", help="where to write the config (default: stdout)")
    p.add_argument("--user", help="nginx 'user' directive (when started as root)")
    p.add_argument("--keepalive", type=int, default=32, metavar="N",
                   help="idle keepalive connections kept open to the instances, per nginx "
                        "worker (default 32)")
    p.add_argument("--next-upstream-tries", type=int, default=3, metavar="N",
                   help="most instances one request is tried on when an instance fails "
                        "(default 3)")
    p.set_defaults(func=cmd_nginx_conf)


def cmd_nginx_conf(args: argparse.Namespace, out: Any, ui: Any) -> int:
    """Write the config and print how to run it."""
    try:
        config = NginxConfig(
            upstreams=tuple(args.upstream), listen=args.listen,
            prefix=str(Path(args.prefix).resolve()), user=args.user,
            keepalive=args.keepalive, next_upstream_tries=args.next_upstream_tries,
        )
    except ValueError as exc:
        ui.print(f"mrtr nginx-conf: {exc}")
        return 2
    try:
        if args.output:
            conf = write_nginx_conf(config, args.output)
            ui.print(f"wrote {conf}; run: {' '.join(nginx_command('nginx', config, conf))}")
        else:
            for sub_dir in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
                (Path(config.prefix) / "tmp" / sub_dir).mkdir(parents=True, exist_ok=True)
            print(render_nginx_conf(config), end="")
    except OSError as exc:
        ui.print(f"mrtr nginx-conf: {exc.filename}: {exc.strerror or exc}")
        return 1
    return 0
