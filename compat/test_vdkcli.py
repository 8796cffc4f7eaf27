"""The real VDK client (`vdkcli` of vdk-control-cli) against datajobs.

Each test drives the client as a user would and checks three things: what the client
prints and its exit code, the rows in datajobs' database, and the CronJob in the cluster
once the synchronizer has applied the change. The option names come from the client's
source (vdk/internal/control/command_groups/job/*.py in the virtualenv).
"""

import filecmp
import re

from conftest import wait_for

VERSION = re.compile(r"using version ([0-9a-f]{40}) finished successfully")


def image_of(cronjob):
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]


def assert_runs_version(service, cronjob, name, version):
    """The CronJob runs the job's version: with a builder, an image built from the
    uploaded sources, by digest, that holds the job's files; without, <registry>/<job>:<version>."""
    image = image_of(cronjob)
    if not service.registry:
        assert image.endswith(f"/{name}:{version}"), image
        return
    assert image.startswith(f"{service.image_prefix()}/{name}@sha256:"), image
    labels, paths = service.image_content(image)
    assert (labels["datajobs.io/job"], labels["datajobs.io/job-version"]) == (name, version)
    assert {"job/config.ini", "job/20_python_step.py", "job/10_create_table.sql"} <= paths, sorted(paths)


def test_create_list_and_show(vdk, service):
    # create --cloud registers the job in the Control Service only (no local folder).
    r = vdk("create", "-n", "compat-alpha", "-t", "compat-list-a", "--cloud")
    assert "Data Job with name compat-alpha created and registered in cloud runtime" in r.output
    vdk("create", "-n", "compat-beta", "-t", "compat-list-b", "--cloud")
    rows = service.query("SELECT name, team, schedule FROM data_job WHERE team LIKE 'compat-list-%%' ORDER BY name")
    assert rows == [{"name": "compat-alpha", "team": "compat-list-a", "schedule": ""},
                    {"name": "compat-beta", "team": "compat-list-b", "schedule": ""}]

    # A second create: the client turns the 409 into a warning and exits 0.
    r = vdk("create", "-n", "compat-alpha", "-t", "compat-list-a", "--cloud")
    assert "already exists" in r.output

    # list filters by team through the GraphQL jobs query; --all lists every team.
    r = vdk("list", "-t", "compat-list-a", "-o", "json")
    assert r.json() == [{"job_name": "compat-alpha", "job_team": "compat-list-a", "status": "NOT_DEPLOYED"}]
    r = vdk("list", "-t", "compat-list-a")
    assert "compat-alpha" in r.stdout and "NOT_DEPLOYED" in r.stdout and "compat-beta" not in r.stdout
    r = vdk("list", "--all", "-o", "json")
    listed = {j["job_name"]: j["job_team"] for j in r.json()}
    assert listed["compat-alpha"] == "compat-list-a" and listed["compat-beta"] == "compat-list-b"
    r = vdk("list", "--all")
    assert "compat-alpha" in r.stdout and "compat-beta" in r.stdout

    # show reads the job, its deployments and its executions.
    r = vdk("show", "-n", "compat-alpha", "-t", "compat-list-a", "-o", "json")
    shown = r.json()
    assert shown["job_name"] == "compat-alpha" and shown["team"] == "compat-list-a"
    assert shown["deployments"] == [] and shown["executions"] == []

    # Another team's job is not found: the client reports it with exit code 2.
    r = vdk("show", "-n", "compat-alpha", "-t", "compat-list-b", code=2)
    assert "Cannot find data job compat-alpha" in r.output


def test_deploy_lifecycle(vdk, service, job_dir, tmp_path):
    name, team = "compat-deploy", "compat-team"
    vdk("create", "-n", name, "-t", team, "--cloud")
    folder = job_dir(name, team)

    # deploy: uploads the folder as a zip (POST .../sources), copies config.ini into the
    # job (PUT .../jobs/{job}), then deploys the version the upload answered.
    r = vdk("deploy", "-n", name, "-t", team, "-p", folder, "-r", "first deploy")
    v1 = VERSION.search(r.output).group(1)
    sources = service.query("SELECT version_sha, reason FROM data_job_source WHERE job_name = %s", name)
    assert sources == [{"version_sha": v1, "reason": "first deploy"}]
    job = service.query("SELECT schedule, notified_on_job_deploy FROM data_job WHERE name = %s", name)[0]
    assert job == {"schedule": "15 * * * *", "notified_on_job_deploy": ["owner@example.com"]}
    d = service.deployment_row(name)
    assert (d["git_commit_sha"], d["python_version"], d["enabled"], d["schedule"]) == (v1, "3.10", True, "15 * * * *")
    assert d["last_deployed_by"] == "unknown"  # vdkcli sends no user without authentication
    service.wait_synced(name)
    cj = service.cronjob(name)
    assert_runs_version(service, cj, name, v1)
    assert cj["spec"]["schedule"] == "15 * * * *" and cj["spec"]["suspend"] is False
    assert cj["metadata"]["labels"]["datajobs.io/team"] == team
    assert cj["metadata"]["annotations"]["datajobs.io/python-version"] == "3.10"

    r = vdk("deploy", "--show", "-n", name, "-t", team, "-o", "json")
    [shown] = r.json()
    assert (shown["job_version"], shown["python_version"], shown["enabled"]) == (v1, "3.10", True)
    r = vdk("list", "-t", team, "-m", "-o", "json")
    [listed] = r.json()
    assert (listed["status"], listed["job_version"], listed["schedule_cron"]) == ("ENABLED", v1, "15 * * * *")

    # The same files again: the same version (sources are content-addressed), one row.
    r = vdk("deploy", "-n", name, "-t", team, "-p", folder, "-r", "again")
    assert VERSION.search(r.output).group(1) == v1
    assert service.query("SELECT count(*) AS n FROM data_job_source WHERE job_name = %s", name) == [{"n": 1}]

    # A changed file: a new version, and the CronJob's image follows.
    with open(folder / "20_python_step.py", "a") as f:
        f.write("# changed\n")
    r = vdk("deploy", "-n", name, "-t", team, "-p", folder, "-r", "second", "-o", "json")
    v2 = r.json()["job_version"]
    assert v2 != v1 and re.fullmatch(r"[0-9a-f]{40}", v2)
    service.wait_synced(name)
    assert_runs_version(service, service.cronjob(name), name, v2)

    # download-job: GET .../sources gives back the latest upload. The keytab it also asks
    # for is not found (404, as VDK with keytabs off): the client warns and goes on.
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    r = vdk("download-job", "-n", name, "-t", team, "-p", downloads)
    assert "Failed to download keytab" in r.output
    cmp = filecmp.dircmp(folder, downloads / name)
    assert cmp.left_only == cmp.right_only == cmp.diff_files == [], cmp.report()

    # --disable and --enable: PATCH .../deployments/production; the CronJob is suspended
    # and resumed.
    r = vdk("deploy", "--disable", "-n", name, "-t", team)
    assert "status: disabled" in r.output
    assert service.deployment_row(name)["enabled"] is False
    service.wait_synced(name)
    assert service.cronjob(name)["spec"]["suspend"] is True
    r = vdk("list", "-t", team, "-o", "json")
    assert r.json()[0]["status"] == "DISABLED"
    vdk("deploy", "--enable", "-n", name, "-t", team)
    assert service.deployment_row(name)["enabled"] is True
    service.wait_synced(name)
    assert service.cronjob(name)["spec"]["suspend"] is False

    # --update --job-version: back to the first version, with no upload.
    vdk("deploy", "--update", "--job-version", v1, "-n", name, "-t", team)
    assert service.deployment_row(name)["git_commit_sha"] == v1
    service.wait_synced(name)
    assert_runs_version(service, service.cronjob(name), name, v1)

    # --remove: DELETE .../deployments/production; the CronJob goes.
    r = vdk("deploy", "--remove", "-n", name, "-t", team)
    assert f"Deployment of Data Job {name} removed" in r.output
    assert service.deployment_row(name) is None
    wait_for("the CronJob to be deleted", lambda: service.cronjob(name) is None)
    wait_for("the actual deployment row to be deleted",
             lambda: not service.query("SELECT 1 FROM actual_data_job_deployment WHERE data_job_name = %s", name))
    r = vdk("deploy", "--show", "-n", name, "-t", team, "-o", "json")
    assert r.json() == []

    # Deploy again, then delete the whole job: its CronJob, sources and properties go.
    vdk("deploy", "-n", name, "-t", team, "-p", folder, "-r", "third")
    vdk("properties", "-n", name, "-t", team, "--set", "k", "v")
    service.wait_synced(name)
    assert service.cronjob(name) is not None
    r = vdk("delete", "-n", name, "-t", team, "--yes")
    assert f"Deleted Data Job {name}" in r.output
    for table, column in [("data_job", "name"), ("data_job_source", "job_name"), ("job_properties", "job_name"),
                          ("desired_data_job_deployment", "data_job_name")]:
        assert service.query(f"SELECT 1 FROM {table} WHERE {column} = %s", name) == [], table
    wait_for("the CronJob of the deleted job to be deleted", lambda: service.cronjob(name) is None)
    vdk("show", "-n", name, "-t", team, code=2)


def test_properties(vdk, service):
    name, team = "compat-props", "compat-team"
    vdk("create", "-n", name, "-t", team, "--cloud")

    # The client sends deployment id "TODO"; any id names the job's properties.
    vdk("properties", "-n", name, "-t", team, "--set", "db-host", "db.example.com", "--set", "retries", "3")
    props = service.query("SELECT properties_json FROM job_properties WHERE job_name = %s", name)
    assert props == [{"properties_json": {"db-host": "db.example.com", "retries": "3"}}]
    r = vdk("properties", "-n", name, "-t", team, "--list", "-o", "json")
    assert r.json() == {"db-host": "db.example.com", "retries": "3"}
    r = vdk("properties", "-n", name, "-t", team, "--get", "retries", "-o", "json")
    assert r.json() == {"retries": "3"}
    r = vdk("properties", "-n", name, "-t", team, "--list")
    assert "db.example.com" in r.stdout

    # --set of an existing key keeps its type; --delete removes a key (read, then PUT).
    vdk("properties", "-n", name, "-t", team, "--set", "retries", "5", "--delete", "db-host")
    r = vdk("properties", "-n", name, "-t", team, "--list", "-o", "json")
    assert r.json() == {"retries": "5"}
    vdk("properties", "-n", name, "-t", team, "--delete-all-job-properties")
    assert vdk("properties", "-n", name, "-t", team, "--list", "-o", "json").json() == {}


def test_secrets(vdk, service):
    # The pinned vdkcli has `secrets`: the values it sets are read back through the API,
    # and the database holds them encrypted only.
    name, team = "compat-secrets", "compat-team"
    vdk("create", "-n", name, "-t", team, "--cloud")
    vdk("secrets", "-n", name, "-t", team, "--set", "db-password", "pw-9f2c41", "--set", "token", "tk-77aa10")
    assert vdk("secrets", "-n", name, "-t", team, "--list", "-o", "json").json() == {"db-password": "pw-9f2c41", "token": "tk-77aa10"}
    assert vdk("secrets", "-n", name, "-t", team, "--get", "token", "-o", "json").json() == {"token": "tk-77aa10"}
    stored = service.query("SELECT s.secrets::text AS s FROM job_secrets s JOIN data_job j ON j.uid = s.job_uid WHERE j.name = %s", name)
    assert len(stored) == 1 and "pw-9f2c41" not in stored[0]["s"] and "pw-9f2c41".encode().hex() not in stored[0]["s"]

    vdk("secrets", "-n", name, "-t", team, "--delete", "db-password")
    assert vdk("secrets", "-n", name, "-t", team, "--list", "-o", "json").json() == {"token": "tk-77aa10"}
    r = vdk("secrets", "-n", "compat-missing", "-t", team, "--list", code=2)
    assert "was not found" in r.output


def test_errors_reach_the_user_as_vdk_error_bodies(vdk, service, job_dir):
    # A missing job: the sources upload answers 404 with datajobs' body, which the
    # client prints as what/why.
    r = vdk("deploy", "-n", "compat-missing", "-t", "compat-team", "-p", job_dir("compat-missing", "compat-team"),
            "-r", "x", code=2)
    assert 'The data job "compat-missing" was not found for team "compat-team"' in r.output
    r = vdk("properties", "-n", "compat-missing", "-t", "compat-team", "--list", code=2)
    assert "was not found" in r.output

    # A version that cannot be an image tag is refused with 400 before anything changes.
    vdk("create", "-n", "compat-errors", "-t", "compat-team", "--cloud")
    r = vdk("deploy", "--update", "--job-version", "not/a/tag", "-n", "compat-errors", "-t", "compat-team", code=2)
    assert "Parameter job_version is not valid" in r.output
    assert service.deployment_row("compat-errors") is None


def test_execute(vdk, service, job_dir):
    name, team = "compat-exec", "compat-team"
    vdk("create", "-n", name, "-t", team, "--cloud")
    vdk("deploy", "-n", name, "-t", team, "-p", job_dir(name, team), "-r", "to run")
    service.wait_synced(name)

    # --start: POST .../executions; the client reads the id from the Location header.
    r = vdk("execute", "--start", "-n", name, "-t", team, "--arguments", '{"day": "2026-11-30", "n": 3}', "-o", "json")
    first = r.json()["execution_id"]
    assert first.startswith(name + "-")
    row = service.query("SELECT type, started_by, args FROM data_job_execution WHERE id = %s", first)[0]
    assert row == {"type": "manual", "started_by": "manual/vdk-control-cli", "args": {"day": "2026-11-30", "n": 3}}
    job = wait_for("the execution's Job", lambda: service.kubectl("get", "job", first, "-o", "json", check=False).stdout)
    assert '"--arguments"' in job

    # kwok runs the pod to completion: the execution succeeds.
    def status(execution_id):
        return vdk("execute", "--show", "-i", execution_id, "-n", name, "-t", team, "-o", "json").json()[0]["status"]
    wait_for("the execution to succeed", lambda: status(first) == "succeeded")
    [shown] = vdk("execute", "--show", "-i", first, "-n", name, "-t", team, "-o", "json").json()
    assert (shown["id"], shown["type"], shown["job_name"]) == (first, "manual", name)
    assert shown["end_time"] and shown["job_version"]

    r = vdk("execute", "--list", "-n", name, "-t", team, "-o", "json")
    assert first in [e["id"] for e in r.json()]
    r = vdk("execute", "--logs", "-i", first, "-n", name, "-t", team)
    assert f"Logs for execution with id {first}" in r.output
    # The log the leader kept when it ended: what kwok, the fake node's kubelet, served
    # through pods/log for the pod (devenv.DefaultPodLogLine).
    assert "this pod ran on the fake node kwok-node-0, which runs no container" in r.output

    # --cancel of a finished execution: 400, which the client reports.
    r = vdk("execute", "--cancel", "-i", first, "-n", name, "-t", team, code=2)
    assert "cannot be cancelled" in r.output

    # With the node cordoned the next run's pod waits: it is cancelled, its Job deleted.
    service.kubectl("cordon", "kwok-node-0")
    try:
        second = vdk("execute", "--start", "-n", name, "-t", team, "-o", "json").json()["execution_id"]
        # A second start while one is under way: 409.
        r = vdk("execute", "--start", "-n", name, "-t", team, code=2)
        assert "already executing" in r.output
        r = vdk("execute", "--cancel", "-i", second, "-n", name, "-t", team)
        assert "Job cancelled successfully" in r.output
        wait_for("the execution to be cancelled", lambda: status(second) == "cancelled")
        assert service.kubectl("get", "job", second, "--ignore-not-found", "-o", "name").stdout == ""
    finally:
        service.kubectl("uncordon", "kwok-node-0")
