"""docker-compose.yml holds together without `docker compose` (not installed where the tests run): the
rules compose checks when it loads the file and that the schema alone does not catch. (The file was also
validated once against the compose-spec JSON schema, by hand; the schema is not vendored here.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.config import load_config

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def _active(profile: str | None) -> set[str]:
    return {n for n, s in SERVICES.items() if not s.get("profiles") or profile in s["profiles"]}


def _depends(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    deps = service.get("depends_on") or {}
    return dict(deps) if isinstance(deps, dict) else {d: {} for d in deps}


@pytest.mark.parametrize("profile", [None, "cluster", "monitoring"])
def test_every_dependency_is_started_with_it_and_healthy_when_asked(profile: str | None) -> None:
    active = _active(profile)
    for name in active:
        for dep, cond in _depends(SERVICES[name]).items():
            assert dep in active, f"{name} depends on {dep}, which profile {profile} does not start"
            if cond.get("condition") == "service_healthy":  # a healthcheck of its own, or the image's
                assert SERVICES[dep].get("healthcheck") or SERVICES[dep].get("image", "").startswith("shardproxy"), dep


@pytest.mark.parametrize("profile", [None, "cluster", "monitoring"])
def test_host_ports_do_not_clash(profile: str | None) -> None:
    ports = [str(p).rsplit(":", 1)[0] for n in _active(profile) for p in SERVICES[n].get("ports", [])]
    assert len(ports) == len(set(ports)), ports


def test_named_volumes_are_declared_and_mounted_directories_exist() -> None:
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith((".", "/")):
                assert (REPO / source).exists(), (name, source)
            else:
                assert source in (COMPOSE.get("volumes") or {}), (name, source)


def test_the_cluster_profile_is_etcd_and_two_proxies_of_one_cluster_configuration() -> None:
    cluster = {n for n, s in SERVICES.items() if "cluster" in (s.get("profiles") or [])}
    assert cluster == {"etcd", "proxy-a", "proxy-b"}
    for proxy in ("proxy-a", "proxy-b"):
        [mount] = [v for v in SERVICES[proxy]["volumes"] if v.endswith(":/app/conf:ro")]
        mode = load_config(REPO / mount.split(":")[0]).mode
        assert mode is not None and mode.endpoints == (("etcd", 2379),)  # the etcd service, by its name


@pytest.mark.parametrize("proxy", ["proxy", "proxy-a", "proxy-b"])
def test_conf_is_read_only_and_the_state_directory_a_writable_volume(proxy: str) -> None:
    """DistSQL changes and the XA log need a writable place: the configuration's proxy-state-directory is a
    volume of its own, mounted read-write, while conf/ stays read-only (as with conf/ writable before)."""
    volumes = [str(v) for v in SERVICES[proxy]["volumes"]]
    [conf] = [v for v in volumes if v.endswith(":/app/conf:ro")]
    state = load_config(REPO / conf.split(":")[0]).state_dir
    assert state is not None and state.is_absolute()
    [mount] = [v for v in volumes if v.split(":")[1] == str(state)]
    assert not mount.endswith(":ro") and mount.split(":")[0] in COMPOSE["volumes"]
    assert SERVICES[proxy].get("stop_grace_period"), "docker stop would SIGKILL the drain after 10 s"
