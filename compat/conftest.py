"""Fixtures of the compatibility suite: a datajobs service on a fresh database and
namespace, and a runner of the real VDK client (`vdkcli`, from the pinned
vdk-control-cli) pointed at it.

The suite runs in the virtualenv that hack/setup.sh makes (.cache/compat-venv). It uses
the environment of `make test` (DATAJOBS_TEST_DATABASE_URL, DATAJOBS_TEST_KUBECONFIG);
without it, it starts one itself with `datajobs dev --env-only`, as hack/test.sh does.
"""

import io
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import requests
from psycopg.rows import dict_row

REPO = Path(__file__).resolve().parent.parent
DATAJOBS = Path(os.environ.get("DATAJOBS_BIN", REPO / ".cache/bin/datajobs"))
KUBECTL = REPO / ".cache/k8s-bin/kubectl"
VDKCLI = Path(sys.executable).parent / "vdkcli"
SAMPLE_JOB = Path(__file__).resolve().parent / "sample_job"

# How long the suite waits for the service and the synchronizer: generous, a failure
# shows as a timeout with what was last seen.
READY_TIMEOUT = 60
SYNC_TIMEOUT = 30


def wait_for(what, probe, timeout=SYNC_TIMEOUT):
    """Polls probe until it returns something truthy, and returns it; fails with the
    last value seen after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}; last seen: {value!r}")
        time.sleep(0.2)


@dataclass
class Environment:
    database_url: str
    kubeconfig: str
    # The OCI registry of the environment (host:port), when it runs one: the service then
    # builds job images on the dev base image that `datajobs dev` pushed there.
    registry: str | None = None
    # The OIDC provider (Ory Hydra) `datajobs dev --env-only` started, when built.
    oidc_issuer: str = ""
    oidc_admin_url: str = ""


@pytest.fixture(scope="session")
def environment(tmp_path_factory):
    url = os.environ.get("DATAJOBS_TEST_DATABASE_URL")
    kubeconfig = os.environ.get("DATAJOBS_TEST_KUBECONFIG")
    if url and kubeconfig:
        yield Environment(url, kubeconfig, registry=os.environ.get("DATAJOBS_TEST_REGISTRY"),
                          oidc_issuer=os.environ.get("DATAJOBS_TEST_OIDC_ISSUER", ""),
                          oidc_admin_url=os.environ.get("DATAJOBS_TEST_OIDC_ADMIN_URL", ""))
        return
    state = tmp_path_factory.mktemp("env")
    env_file = state / "env"
    with open(state / "dev.log", "w") as log:
        dev = subprocess.Popen(
            [DATAJOBS, "dev", "--env-only", "--fast", "--state-dir", state / "state",
             "--env-file", env_file, "--log-format", "text"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    def ready():
        if dev.poll() is not None:
            return "exited"
        return env_file.exists() and env_file.stat().st_size > 0 and "ready"
    try:
        started = wait_for("the test environment (datajobs dev --env-only)", ready, timeout=180)
        assert started == "ready", "datajobs dev failed:\n" + (state / "dev.log").read_text()
        values = dict(line.split("=", 1) for line in env_file.read_text().split())
        yield Environment(values["DATAJOBS_TEST_DATABASE_URL"], values["DATAJOBS_TEST_KUBECONFIG"],
                          registry=values.get("DATAJOBS_TEST_REGISTRY"),
                          oidc_issuer=values.get("DATAJOBS_TEST_OIDC_ISSUER", ""),
                          oidc_admin_url=values.get("DATAJOBS_TEST_OIDC_ADMIN_URL", ""))
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.wait(timeout=60)


def database_url(base, name):
    """base, a PostgreSQL URL, with its database replaced by name."""
    parts = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Service:
    """A running `datajobs serve` and what the tests read behind its back."""

    url: str
    database_url: str
    namespace: str
    kubeconfig: str
    log: Path
    # host:port of the registry the service builds images into, or None (no builder).
    registry: str | None = None

    def image_prefix(self):
        return f"{self.registry}/{self.namespace}"

    def image_content(self, image):
        """The labels of an image in the registry and the paths of the files in its layers."""
        repo, digest = image[len(self.registry) + 1:].split("@")
        base = f"http://{self.registry}/v2/{repo}"
        accept = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
        with urllib.request.urlopen(urllib.request.Request(f"{base}/manifests/{digest}", headers={"Accept": accept})) as r:
            manifest = json.load(r)
        with urllib.request.urlopen(f"{base}/blobs/{manifest['config']['digest']}") as r:
            config = json.load(r)
        paths = set()
        for layer in manifest["layers"]:
            with urllib.request.urlopen(f"{base}/blobs/{layer['digest']}") as r:
                with tarfile.open(fileobj=io.BytesIO(r.read()), mode="r:gz") as tf:
                    paths |= {m.name.rstrip("/") for m in tf.getmembers()}
        return config["config"].get("Labels") or {}, paths

    def query(self, sql, *args):
        """Rows (dicts) of a query on the service's database."""
        with psycopg.connect(self.database_url, row_factory=dict_row) as conn:
            return conn.execute(sql, args).fetchall()

    def kubectl(self, *args, check=True):
        return subprocess.run([KUBECTL, "--kubeconfig", self.kubeconfig, "-n", self.namespace, *args],
                              capture_output=True, text=True, check=check, timeout=60)

    def cronjob(self, name):
        """The CronJob of a job, or None."""
        p = self.kubectl("get", "cronjob", name, "-o", "json", "--ignore-not-found")
        return json.loads(p.stdout) if p.stdout.strip() else None

    def deployment_row(self, name):
        rows = self.query("SELECT * FROM desired_data_job_deployment WHERE data_job_name = %s", name)
        return rows[0] if rows else None

    def wait_synced(self, name):
        """Waits until the synchronizer has applied the job's current generation."""
        def synced():
            rows = self.query(
                """SELECT d.status, d.status_generation = j.generation AS current
                   FROM desired_data_job_deployment d JOIN data_job j ON j.name = d.data_job_name
                   WHERE j.name = %s""", name)
            return rows and rows[0]["status"] == "synced" and rows[0]["current"]
        wait_for(f"the deployment of {name} to be synced", synced)


@pytest.fixture(scope="session")
def service(environment, tmp_path_factory, request):
    """datajobs in auth mode none: the client sends no credentials."""
    yield from serve(environment, tmp_path_factory, request, "--auth-mode", "none")


@pytest.fixture(scope="session")
def oidc_service(environment, tmp_path_factory, request):
    """datajobs in auth mode oidc, trusting the environment's Ory Hydra."""
    if not environment.oidc_issuer:
        if os.environ.get("DATAJOBS_TEST_REQUIRE_OIDC") == "1":
            pytest.fail("no OIDC provider although DATAJOBS_TEST_REQUIRE_OIDC=1: hack/setup.sh should have built Ory Hydra")
        pytest.skip("no OIDC provider in the environment: build Ory Hydra with `bash hack/hydra/build.sh`")
    yield from serve(environment, tmp_path_factory, request, "--auth-mode", "oidc",
                     "--oidc-issuer-url", environment.oidc_issuer, "--oidc-username-claim", "username")


def serve(environment, tmp_path_factory, request, *auth_args):
    """Runs `datajobs serve` on a fresh database and namespace until the session ends."""
    suffix = secrets.token_hex(4)
    dbname, namespace = f"compat_{suffix}", f"compat-{suffix}"
    with psycopg.connect(environment.database_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {dbname}")
    svc = Service(url="", database_url=database_url(environment.database_url, dbname),
                  namespace=namespace, kubeconfig=environment.kubeconfig,
                  log=tmp_path_factory.mktemp("serve") / "serve.log", registry=environment.registry)
    svc.kubectl("create", "namespace", namespace)
    port = free_port()
    svc.url = f"http://127.0.0.1:{port}"
    # The keyring that encrypts secrets (docs/operations.md): one new key per service.
    key_file = tmp_path_factory.mktemp("keys") / "secrets-keys.json"
    subprocess.run([DATAJOBS, "secrets", "add-key", "--secrets-key-file", str(key_file)], check=True, capture_output=True)
    with open(svc.log, "w") as log:
        proc = subprocess.Popen(
            [DATAJOBS, "serve", "--listen", f"127.0.0.1:{port}", "--admin-listen", "127.0.0.1:0",
             *auth_args, "--database-url", svc.database_url, "--secrets-key-file", str(key_file),
             "--kubeconfig", svc.kubeconfig, "--namespace", namespace, "--log-format", "text", *builder_flags(svc)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def ready():
        if proc.poll() is not None:
            return "exited"
        try:
            with urllib.request.urlopen(svc.url + "/readyz", timeout=2) as r:
                return r.status == 200 and "ready"
        except OSError:
            return False
    try:
        state = wait_for("datajobs serve to be ready", ready, timeout=READY_TIMEOUT)
        assert state == "ready", "datajobs serve exited:\n" + svc.log.read_text()
        yield svc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if request.session.testsfailed:
            sys.stderr.write(f"\n--- datajobs serve log ({svc.log}) ---\n{svc.log.read_text()}\n")
        svc.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        with psycopg.connect(environment.database_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")


def builder_flags(svc):
    """With a registry, the service builds job images (docs/builder.md) on the dev base image."""
    if not svc.registry:
        return []
    base = f"{svc.registry}/datajobs/python-base:dev"
    return ["--image-registry", svc.image_prefix(), "--registry-insecure",
            *(f"--base-image={v}={base}" for v in ("3.9", "3.10", "3.11", "3.12"))]


@dataclass
class Result:
    args: tuple
    code: int
    stdout: str
    stderr: str

    @property
    def output(self):
        """Everything the user sees: click_log writes messages and errors to stderr."""
        return self.stdout + self.stderr

    def json(self):
        return json.loads(self.stdout)

    def __str__(self):
        return (f"vdkcli {' '.join(map(str, self.args))} exited {self.code}\n"
                f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}")


class VDK:
    """Runs the real client, as a user would, against the service. Without credentials,
    authentication is off: with nothing in its config folder and no VDK_API_TOKEN, vdkcli
    sends no Authorization header. With credentials (what `vdk login -t credentials`
    stores after its browser flow: the token URL, the client and a refresh token), they go
    into its config folder; vdkcli then exchanges the refresh token for an access token
    itself and sends it as Authorization: Bearer."""

    def __init__(self, service, home, credentials=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("VDK_")}
        env.update({
            "HOME": str(home),
            "VDK_BASE_CONFIG_FOLDER": str(home),
            "VDK_CONTROL_SERVICE_REST_API_URL": service.url,
            # Fail fast: the client retries 5xx answers with exponential backoff for
            # minutes by default; a 5xx is a failure of the suite either way.
            "VDK_CONTROL_HTTP_TOTAL_RETRIES": "0",
            "VDK_CONTROL_HTTP_READ_TIMEOUT_SECONDS": "60",
            # deploy's options declare -v twice (a client bug, see docs/compatibility.md);
            # click warns about it on every deploy.
            "PYTHONWARNINGS": "ignore::UserWarning",
        })
        if credentials:
            folder = Path(home) / ".vdk.internal"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "vdk-cred.json").write_text(json.dumps(credentials))
        self.env, self.cwd = env, home

    def __call__(self, *args, code=0):
        """Runs vdkcli with args and checks its exit code (any non-zero one when code is
        None)."""
        p = subprocess.run([VDKCLI, *map(str, args)], env=self.env, cwd=self.cwd, capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
        r = Result(args, p.returncode, p.stdout, p.stderr)
        if code is None:
            assert r.code != 0, str(r)
        else:
            assert r.code == code, str(r)
        return r


@pytest.fixture
def vdk(service, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return VDK(service, home)


@pytest.fixture
def job_dir(tmp_path):
    """Returns a function that copies the sample job into a folder named after a job,
    with its team set in config.ini, as `vdk create` would leave it."""
    def make(name, team):
        d = tmp_path / "jobs" / name
        shutil.copytree(SAMPLE_JOB, d)
        config = d / "config.ini"
        config.write_text(config.read_text().replace("team = compat-team", f"team = {team}"))
        return d
    return make


class OIDCProvider:
    """The environment's Ory Hydra, driven through its admin API: users with teams and
    the refresh tokens `vdk login -t api-token` takes."""

    REDIRECT = "http://127.0.0.1:1/callback"

    def __init__(self, issuer, admin_url):
        self.issuer, self.admin_url = issuer, admin_url

    def admin(self, method, path, body):
        r = requests.request(method, self.admin_url + path, json=body, timeout=30)
        assert r.ok, f"{method} {path}: {r.status_code} {r.text}"
        return r.json()

    def user_credentials(self, username, teams):
        """Runs the authorization-code flow for username in teams, playing the browser
        and accepting the login and the consent through the admin API, and returns what
        `vdk login -t credentials` stores at its end: the token URL, the client and the
        refresh token. (`vdk login -t api-token` cannot be used with Hydra: vdkcli sends
        that refresh token without any client authentication, which Hydra requires.)"""
        client = self.admin("POST", "/admin/clients", {
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "redirect_uris": [self.REDIRECT], "scope": "openid offline_access",
            "audience": ["datajobs"], "token_endpoint_auth_method": "client_secret_basic"})
        browser = requests.Session()

        def follow(url):
            r = browser.get(url, allow_redirects=False, timeout=30)
            assert r.status_code in (302, 303), f"GET {url}: {r.status_code} {r.text}"
            return urllib.parse.urlsplit(r.headers["Location"])

        def query(parts, key):
            return urllib.parse.parse_qs(parts.query)[key][0]

        loc = follow(self.issuer + "/oauth2/auth?" + urllib.parse.urlencode({
            "client_id": client["client_id"], "response_type": "code", "scope": "openid offline_access",
            "redirect_uri": self.REDIRECT, "state": secrets.token_hex(8), "audience": "datajobs"}))
        accepted = self.admin("PUT", "/admin/oauth2/auth/requests/login/accept?login_challenge="
                              + urllib.parse.quote(query(loc, "login_challenge")), {"subject": username})
        loc = follow(accepted["redirect_to"])
        accepted = self.admin("PUT", "/admin/oauth2/auth/requests/consent/accept?consent_challenge="
                              + urllib.parse.quote(query(loc, "consent_challenge")), {
                                  "grant_scope": ["openid", "offline_access"],
                                  "grant_access_token_audience": ["datajobs"],
                                  "session": {"access_token": {"groups": teams, "username": username}}})
        code = query(follow(accepted["redirect_to"]), "code")
        token_url = self.issuer.rstrip("/") + "/oauth2/token"
        r = requests.post(token_url, auth=(client["client_id"], client["client_secret"]), timeout=30, data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": self.REDIRECT})
        assert r.ok, f"token: {r.status_code} {r.text}"
        return {"auth_type": "credentials", "authorization_url": token_url, "refresh_token": r.json()["refresh_token"],
                "client_id": client["client_id"], "client_secret": client["client_secret"],
                "access_token": None, "access_token_expiration_time": 0}


@pytest.fixture(scope="session")
def oidc(environment):
    if not environment.oidc_issuer:
        if os.environ.get("DATAJOBS_TEST_REQUIRE_OIDC") == "1":
            pytest.fail("no OIDC provider although DATAJOBS_TEST_REQUIRE_OIDC=1: hack/setup.sh should have built Ory Hydra")
        pytest.skip("no OIDC provider in the environment: build Ory Hydra with `bash hack/hydra/build.sh`")
    return OIDCProvider(environment.oidc_issuer, environment.oidc_admin_url)


@pytest.fixture
def logged_in_vdk(oidc_service, oidc, tmp_path):
    """Returns a function that logs a user with teams in and gives a runner of the
    client as that user."""
    def login(username, teams):
        home = tmp_path / ("home-" + username)
        home.mkdir()
        return VDK(oidc_service, home, credentials=oidc.user_credentials(username, teams))
    return login
