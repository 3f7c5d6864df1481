"""The deployments in deploy/: the Kubernetes manifests (deploy/k8s, kustomize) against
the Kubernetes schemas (kubernetes-validate, strict: no unknown field passes), built with
``kubectl kustomize`` where kubectl is installed; deploy/compose.yaml with ``docker compose
config`` where Docker's compose is installed; and what both must get right for this
service: probes on routes that exist, a grace period that lets gunicorn end its streams,
an autoscaler and disruption budgets that select the API's pods, a proxy that does not
buffer event streams, and only settings the service reads."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from ports import free_port

from service.api import openapi_document
from service.config import COMMAND_CONNECTIONS, Config

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"
COMPOSE = ROOT / "deploy" / "compose.yaml"
NGINX = ROOT / "deploy" / "nginx.conf"
#: The oldest Kubernetes the manifests are meant for (autoscaling/v2 and policy/v1 GA).
KUBERNETES_VERSIONS = ["1.30", kubernetes_validate.latest_version()]
#: gunicorn's graceful_timeout (its default; service/gunicorn_conf.py keeps it).
GUNICORN_GRACE_SECONDS = 30
SETTINGS = set(Config._ENV.values())


def kustomization() -> dict:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def manifests() -> list[dict]:
    """Every resource the kustomization lists, as written."""
    found = []
    for name in kustomization()["resources"]:
        found += [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]
    return found


def resource(kind: str, name: str) -> dict:
    matching = [m for m in manifests() if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(matching) == 1, f"{kind}/{name}: {len(matching)} found"
    return matching[0]


def test_the_kustomization_lists_every_manifest():
    listed = set(kustomization()["resources"])
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_against_the_kubernetes_schemas(version):
    for manifest in manifests():
        kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_kustomization_builds_into_valid_resources():
    built = subprocess.run(
        ["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60
    )
    assert built.returncode == 0, built.stderr
    resources = [doc for doc in yaml.safe_load_all(built.stdout) if doc]
    assert len(resources) == len(manifests())
    for built_resource in resources:
        kubernetes_validate.validate(built_resource, KUBERNETES_VERSIONS[-1], strict=True)
        if built_resource["kind"] != "Namespace":
            assert built_resource["metadata"]["namespace"] == "ddz"
    images = {
        c["image"]
        for r in resources
        if r["kind"] in ("Deployment", "Job")
        for c in r["spec"]["template"]["spec"]["containers"]
    }
    assert images == {"ghcr.io/example/ddz:latest"}  # every workload runs the one image


def container(kind: str, name: str) -> dict:
    (only,) = resource(kind, name)["spec"]["template"]["spec"]["containers"]
    return only


def test_the_api_probes_routes_that_exist_and_its_pods_stop_in_time():
    paths = openapi_document()["paths"]
    api = container("Deployment", "ddz-api")
    ready, alive = api["readinessProbe"]["httpGet"], api["livenessProbe"]["httpGet"]
    assert (ready["path"], alive["path"]) == ("/readyz", "/healthz")
    assert ready["path"] in paths and alive["path"] in paths
    ports = {p["name"]: p["containerPort"] for p in api["ports"]}
    assert ready["port"] in ports and alive["port"] in ports
    assert api["command"][:3] == ["gunicorn", "-c", "python:service.gunicorn_conf"]
    # preStop, then gunicorn's own grace (streams end at once, requests get 30 s) fit in
    # the pod's grace period, so that Kubernetes never SIGKILLs a request in flight.
    pod = resource("Deployment", "ddz-api")["spec"]["template"]["spec"]
    pre_stop = int(api["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] > pre_stop + GUNICORN_GRACE_SECONDS


def test_autoscaler_budgets_service_and_ingress_reach_the_right_pods():
    for deployment in ("ddz-api", "ddz-worker"):
        labels = resource("Deployment", deployment)["spec"]["template"]["metadata"]["labels"]
        selector = resource("PodDisruptionBudget", deployment)["spec"]["selector"]["matchLabels"]
        assert selector.items() <= labels.items()
    api_labels = resource("Deployment", "ddz-api")["spec"]["template"]["metadata"]["labels"]
    target = resource("HorizontalPodAutoscaler", "ddz-api")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "ddz-api")
    service = resource("Service", "ddz-api")["spec"]
    assert service["selector"].items() <= api_labels.items()
    (port,) = service["ports"]
    assert port["targetPort"] in {p["name"] for p in container("Deployment", "ddz-api")["ports"]}
    ingress = resource("Ingress", "ddz")
    (rule,) = ingress["spec"]["rules"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "ddz-api", "port": {"name": port["name"]}}
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert (
        int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) > Config.stream_seconds
    )


def test_workers_and_migrations_run_the_cli():
    assert container("Deployment", "ddz-worker")["command"] == ["ddz", "worker"]
    assert container("Job", "ddz-migrate")["command"] == ["ddz", "migrate"]


def test_the_configuration_holds_only_settings_the_service_reads():
    config = resource("ConfigMap", "ddz-config")["data"]
    secret = resource("Secret", "ddz-secrets")["stringData"]
    assert set(config) | set(secret) <= SETTINGS
    assert {"DATABASE_URL", "DDZ_OPERATOR_TOKEN"} <= set(secret)
    connections, streams = int(config["DDZ_WORKER_CONNECTIONS"]), int(config["DDZ_MAX_STREAMS"])
    assert connections - streams >= COMMAND_CONNECTIONS
    for workload in ("ddz-api", "ddz-worker"):
        sources = container("Deployment", workload)["envFrom"]
        assert {"configMapRef": {"name": "ddz-config"}} in sources
        assert {"secretRef": {"name": "ddz-secrets"}} in sources


# --- deploy/compose.yaml --------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_runs_migrations_first_then_two_apis_behind_the_proxy_and_two_workers():
    services = compose()["services"]
    assert set(services) == {"postgres", "backup", "redis", "migrate", "api", "worker", "proxy"}
    assert services["migrate"]["command"] == ["ddz", "migrate"]
    assert services["worker"]["command"] == ["ddz", "worker"]
    for name in ("api", "worker"):
        assert services[name]["deploy"]["replicas"] == 2
        after = services[name]["depends_on"]["migrate"]["condition"]
        assert after == "service_completed_successfully"
    assert services["proxy"]["depends_on"]["api"]["condition"] == "service_healthy"
    assert "/healthz" in " ".join(services["api"]["healthcheck"]["test"])
    assert set(services["api"]["environment"]) <= SETTINGS


def test_postgres_archives_its_wal_and_the_backups_run_encrypted_on_a_schedule():
    """Both deployments back up with pgBackRest (tests/test_restore_drill.py restores with
    compose's settings): WAL archived, backups encrypted with a key from a secret, full,
    differential and incremental backups scheduled, retention set."""
    services = compose()["services"]
    settings = " ".join(services["postgres"]["command"])
    assert "archive_mode=on" in settings
    assert "archive_command=pgbackrest --stanza=ddz archive-push %p" in settings
    assert services["backup"]["command"] == ["ddz-backup-schedule"]
    assert services["backup"]["volumes"] == services["postgres"]["volumes"]
    for name in ("postgres", "backup"):
        assert "PGBACKREST_REPO1_CIPHER_PASS" in services[name]["environment"]
    schedule = (ROOT / "deploy" / "pgbackrest" / "schedule.sh").read_text()
    assert all(f"kind={kind}" in schedule for kind in ("full", "diff", "incr"))
    k8s = configparser.ConfigParser()
    k8s.read_string(resource("ConfigMap", "ddz-pgbackrest")["data"]["pgbackrest.conf"])
    composed = configparser.ConfigParser()
    composed.read(ROOT / "deploy" / "pgbackrest" / "pgbackrest.conf")
    for conf in (k8s["global"], composed["global"]):
        assert conf["repo1-cipher-type"] == "aes-256-cbc"
        assert "repo1-cipher-pass" not in conf  # the key comes from a secret
        # Full backups kept by age (a count would shrink the window with each one taken by
        # hand): four weeks at least of point-in-time recovery.
        assert conf["repo1-retention-full-type"] == "time"
        assert int(conf["repo1-retention-full"]) >= 28
    assert "PGBACKREST_REPO1_CIPHER_PASS" in resource("Secret", "ddz-backup-secrets")["stringData"]
    kinds = {}
    for job in (m for m in manifests() if m["kind"] == "CronJob"):
        assert job["spec"]["concurrencyPolicy"] == "Forbid"
        pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        (backup,) = pod["containers"]
        assert backup["command"][:2] == ["pgbackrest", "--stanza=ddz"]
        kind = backup["command"][2].removeprefix("--type=")
        kinds[kind] = job["spec"]["schedule"]
        assert {"secretRef": {"name": "ddz-backup-secrets"}} in backup["envFrom"]
    assert kinds == {"full": "0 1 * * 0", "diff": "0 1 * * 1-6", "incr": "0 0,2-23 * * *"}


def test_the_proxy_passes_streams_unbuffered_and_keeps_them_open():
    conf = NGINX.read_text()
    stream = re.search(r"location ~ \^/v1/matches/\[\^/\]\+/stream\$ \{(.*?)\}", conf, re.S)
    assert stream, "no location for the event streams"
    body = stream.group(1)
    assert re.search(r"proxy_buffering\s+off;", body)
    timeout = re.search(r"proxy_read_timeout\s+(\d+)s;", body)
    assert timeout and int(timeout.group(1)) > Config.stream_seconds
    assert re.search(r"client_max_body_size\s+16k;", conf)
    assert Config.max_body_bytes == 16 * 1024


def docker_compose() -> list[str] | None:
    if shutil.which("docker") is None:
        return None
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    return ["docker", "compose"] if probe.returncode == 0 else None


@pytest.mark.skipif(docker_compose() is None, reason="Docker's compose is not installed")
def test_docker_compose_accepts_the_file():
    checked = subprocess.run(
        [*docker_compose(), "-f", str(COMPOSE), "config", "--quiet"],
        env={"DDZ_OPERATOR_TOKEN": "t", "PATH": "/usr/bin:/bin:/usr/local/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr


@pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
def test_nginx_as_configured_passes_commands_and_a_live_stream_through(
    database_url, redis_url, tmp_path
):
    """deploy/nginx.conf in front of the API (gunicorn as deployed): a command through
    the proxy is answered, and its event reaches a stream open through the proxy while
    the stream stays open."""
    from api_support import HttpApi, act_once, open_stream, read_messages, seated_match, wait_for
    from processes import gunicorn

    with gunicorn(database_url, redis_url, tmp_path / "api.log") as (api_base, _):
        port = free_port()
        conf = NGINX.read_text()
        conf = conf.replace("server api:8000;", f"server {api_base.removeprefix('http://')};")
        conf = conf.replace("listen 80;", f"listen 127.0.0.1:{port};")
        # Its files under tmp_path, in the foreground; the rest as deployed.
        temp = "".join(
            f"    {kind}_temp_path {tmp_path}/{kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        conf = conf.replace("http {\n", "http {\n" + temp)
        conf = f"daemon off;\npid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n" + conf
        (tmp_path / "nginx.conf").write_text(conf)
        nginx = subprocess.Popen(
            ["nginx", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
            stderr=subprocess.PIPE,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: _answers(base + "/healthz"))
            api = HttpApi(base)
            players, match_id = seated_match(api, "proxied")
            conn, response = open_stream(base, match_id, players[0].token, timeout=30)
            try:
                assert response.status == 200
                version = int(read_messages(response, 1)[0].id)
                answer = act_once(players, match_id)
                received = read_messages(response, answer["version"] - version)
                assert int(received[-1].id) == answer["version"]
            finally:
                response.close()
                conn.close()
        finally:
            nginx.terminate()
            nginx.wait(timeout=30)


def _answers(url: str) -> bool:
    import requests

    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


# --- losing a machine: deploy/compose.ha.yaml and deploy/k8s-ha ------------------------

HA_COMPOSE = ROOT / "deploy" / "compose.ha.yaml"
K8S_HA = ROOT / "deploy" / "k8s-ha"


def test_compose_ha_runs_patroni_on_three_etcd_members_and_redis_under_three_sentinels():
    services = yaml.safe_load(HA_COMPOSE.read_text())["services"]
    etcd = sorted(name for name in services if name.startswith("etcd"))
    nodes = sorted(name for name in services if re.fullmatch(r"pg\d", name))
    sentinels = sorted(name for name in services if name.startswith("sentinel"))
    assert len(etcd) == 3 and len(nodes) == 3 and len(sentinels) == 3
    assert all(services[n]["build"] == "patroni" for n in nodes)
    members = services["etcd1"]["environment"]["ETCD_INITIAL_CLUSTER"]
    assert all(f"{name}=http://{name}:2380" in members for name in etcd)
    patroni = yaml.safe_load((ROOT / "deploy" / "patroni" / "patroni.yml").read_text())
    assert patroni["etcd3"]["hosts"] == ",".join(f"{name}:2379" for name in etcd)
    dcs = patroni["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] and dcs["synchronous_mode_strict"]
    # The service reaches whichever node takes writes, and the master the sentinels name.
    app = services["api"]["environment"]
    assert set(app) <= SETTINGS
    for name in ("migrate", "api", "worker"):
        assert services[name]["environment"] == app
    url = psycopg_conninfo(re.sub(r"\$\{[^}]*\}", "password", app["DATABASE_URL"]))
    assert url["host"].split(",") == nodes and url["target_session_attrs"] == "read-write"
    assert app["REDIS_SENTINELS"] == ",".join(f"{name}:26379" for name in sentinels)
    conf = (ROOT / "deploy" / "redis" / "sentinel.conf").read_text()
    monitored = re.search(r"^sentinel monitor (\S+) (\S+) 6379 (\d+)$", conf, re.M)
    assert monitored and monitored.group(1) == app["REDIS_SENTINEL_MASTER"]
    assert monitored.group(2) == "redis1" and int(monitored.group(3)) == 2  # two of three
    assert services["redis2"]["command"][:3] == ["redis-server", "--replicaof", "redis1"]


def psycopg_conninfo(url: str) -> dict:
    import psycopg

    return psycopg.conninfo.conninfo_to_dict(url)


@pytest.mark.skipif(docker_compose() is None, reason="Docker's compose is not installed")
def test_docker_compose_accepts_the_ha_file():
    checked = subprocess.run(
        [*docker_compose(), "-f", str(HA_COMPOSE), "config", "--quiet"],
        env={
            "DDZ_OPERATOR_TOKEN": "t",
            "PATRONI_PASSWORD": "p",
            "DDZ_DB_PASSWORD": "d",
            "PATH": "/usr/bin:/bin:/usr/local/bin",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr


def built_ha() -> list[dict]:
    built = subprocess.run(
        ["kubectl", "kustomize", str(K8S_HA)], capture_output=True, text=True, timeout=60
    )
    assert built.returncode == 0, built.stderr
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_ha_kustomization_builds_valid_resources_reaching_its_own_servers():
    resources = built_ha()
    by_kind: dict[str, list[dict]] = {}
    for built_resource in resources:
        by_kind.setdefault(built_resource["kind"], []).append(built_resource)
        if built_resource["kind"] != "Namespace":
            assert built_resource["metadata"]["namespace"] == "ddz"
        if built_resource["kind"] != "PostgresCluster":  # the operator's: its CRD checks it
            kubernetes_validate.validate(built_resource, KUBERNETES_VERSIONS[-1], strict=True)
    # The operator takes the backups: none of ../k8s's CronJobs and their settings.
    assert "CronJob" not in by_kind
    assert "ddz-pgbackrest" not in {c["metadata"]["name"] for c in by_kind["ConfigMap"]}
    # Every workload reads DATABASE_URL from the operator's Secret for the user ddz.
    (cluster,) = by_kind["PostgresCluster"]
    assert [u["name"] for u in cluster["spec"]["users"]] == ["ddz"]
    for workload in (*by_kind["Deployment"], *by_kind["Job"]):
        (only,) = workload["spec"]["template"]["spec"]["containers"]
        if workload["metadata"]["name"] in ("ddz-api", "ddz-worker", "ddz-migrate"):
            env = {e["name"]: e for e in only["env"]}
            source = env["DATABASE_URL"]["valueFrom"]["secretKeyRef"]
            assert source == {"name": "ddz-pguser-ddz", "key": "uri"}
    # Redis through the sentinels beside each Redis pod.
    config = next(c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == "ddz-config")
    assert set(config["data"]) <= SETTINGS
    (redis,) = by_kind["StatefulSet"]
    pods = [f"{redis['metadata']['name']}-{i}" for i in range(redis["spec"]["replicas"])]
    service = redis["spec"]["serviceName"]
    assert config["data"]["REDIS_SENTINELS"].split(",") == [
        f"{pod}.{service}.ddz.svc:26379" for pod in pods
    ]
    assert len(pods) == 3
    scripts = next(c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == "ddz-redis")
    assert (
        f"sentinel monitor {config['data']['REDIS_SENTINEL_MASTER']} $master 6379 2"
        in (scripts["data"]["sentinel.sh"])
    )


def test_the_postgres_cluster_replicates_synchronously_and_backs_up_as_the_cronjobs_did():
    """deploy/k8s-ha's PostgresCluster (Crunchy Data's PGO): three instances, one per
    node, Patroni's synchronous mode (strict), and pgBackRest's backups to the bucket,
    path, encryption, retention and schedule of deploy/k8s's backup CronJobs."""
    cluster = yaml.safe_load((K8S_HA / "postgrescluster.yaml").read_text())["spec"]
    (instances,) = cluster["instances"]
    assert instances["replicas"] >= 3
    spread = instances["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert spread[0]["topologyKey"] == "kubernetes.io/hostname"
    patroni = cluster["patroni"]["dynamicConfiguration"]
    assert patroni["synchronous_mode"] and patroni["synchronous_mode_strict"]
    backups = cluster["backups"]["pgbackrest"]
    (repo,) = backups["repos"]
    before = configparser.ConfigParser()
    before.read_string(resource("ConfigMap", "ddz-pgbackrest")["data"]["pgbackrest.conf"])
    was = before["global"]
    assert repo["s3"] == {
        "bucket": was["repo1-s3-bucket"],
        "endpoint": was["repo1-s3-endpoint"],
        "region": was["repo1-s3-region"],
    }
    now = backups["global"]
    for key in (
        "repo1-path",
        "repo1-cipher-type",
        "repo1-retention-full-type",
        "repo1-retention-full",
        "repo1-retention-diff",
    ):
        assert now[key] == was[key], key
    schedules = {
        m["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][
            2
        ].removeprefix("--type="): m["spec"]["schedule"]
        for m in manifests()
        if m["kind"] == "CronJob"
    }
    assert repo["schedules"] == {
        "full": schedules["full"],
        "differential": schedules["diff"],
        "incremental": schedules["incr"],
    }
    (secret,) = [c["secret"]["name"] for c in backups["configuration"]]
    stored = yaml.safe_load((K8S_HA / "postgres-backup-secret.yaml").read_text())
    assert stored["metadata"]["name"] == secret
    assert "repo1-cipher-pass=" in stored["stringData"]["s3.conf"]  # the key, from a secret
