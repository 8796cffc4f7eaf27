"""The real VDK client against datajobs in auth mode oidc: a user logged in (a refresh
token of the environment's Ory Hydra, which vdkcli exchanges for access tokens itself)
works on its team's jobs and is refused, with the 403 message the client prints, on
another's."""

import re

from conftest import wait_for

VERSION = re.compile(r"using version ([0-9a-f]{40}) finished successfully")


def test_a_logged_in_user_acts_on_its_team_only(logged_in_vdk, oidc_service, job_dir):
    alice = logged_in_vdk("alice", ["compat-auth-a"])
    bob = logged_in_vdk("bob", ["compat-auth-b"])
    name, team = "compat-auth-job", "compat-auth-a"

    r = alice("create", "-n", name, "-t", team, "--cloud")
    assert f"Data Job with name {name} created and registered in cloud runtime" in r.output
    bob("create", "-n", "compat-auth-bobs", "-t", "compat-auth-b", "--cloud")

    folder = job_dir(name, team)
    r = alice("deploy", "-n", name, "-t", team, "-p", folder, "-r", "first deploy")
    version = VERSION.search(r.output).group(1)
    d = oidc_service.deployment_row(name)
    assert (d["git_commit_sha"], d["last_deployed_by"]) == (version, "alice")
    uploaded = oidc_service.query("SELECT uploaded_by FROM data_job_source WHERE job_name = %s", name)
    assert uploaded == [{"uploaded_by": "alice"}]

    r = alice("list", "-t", team, "-o", "json")
    assert [j["job_name"] for j in r.json()] == [name]
    r = alice("list", "--all", "-o", "json")
    assert [j["job_name"] for j in r.json()] == [name], "never another team's job"
    r = alice("show", "-n", name, "-t", team, "-o", "json")
    assert r.json()["job_name"] == name

    # execute: started by alice, as the token says; kwok runs the pod to completion.
    oidc_service.wait_synced(name)
    r = alice("execute", "--start", "-n", name, "-t", team, "--arguments", '{"day": "2026-11-30"}', "-o", "json")
    execution = r.json()["execution_id"]
    row = oidc_service.query("SELECT job_name, started_by, args FROM data_job_execution WHERE id = %s", execution)
    assert row == [{"job_name": name, "started_by": "manual/vdk-control-cli/alice", "args": {"day": "2026-11-30"}}]

    def status():
        return alice("execute", "--show", "-i", execution, "-n", name, "-t", team, "-o", "json").json()[0]["status"]
    wait_for("alice's execution to succeed", lambda: status() == "succeeded")
    r = alice("execute", "--list", "-n", name, "-t", team, "-o", "json")
    assert [e["id"] for e in r.json()] == [execution]
    r = alice("execute", "--logs", "-i", execution, "-n", name, "-t", team)
    assert f"Logs for execution with id {execution}" in r.output

    # The same commands on team compat-auth-b: refused, nothing changed.
    bobs_folder = job_dir("compat-auth-bobs", "compat-auth-b")
    for args in (("create", "-n", "compat-auth-intruder", "-t", "compat-auth-b", "--cloud"),
                 ("deploy", "-n", "compat-auth-bobs", "-t", "compat-auth-b", "-p", bobs_folder, "-r", "x"),
                 ("delete", "-n", "compat-auth-bobs", "-t", "compat-auth-b", "--yes")):
        r = alice(*args, code=None)
        assert "may not act on the jobs of team compat-auth-b" in r.output, str(r)
    # list and show read through the GraphQL query: it answers with the caller's teams'
    # jobs only, so bob's job does not exist for alice.
    r = alice("list", "-t", "compat-auth-b", "-o", "json")
    assert r.json() == []
    r = alice("show", "-n", "compat-auth-bobs", "-t", "compat-auth-b", code=2)
    assert "Cannot find data job compat-auth-bobs" in r.output
    rows = oidc_service.query("SELECT name, team FROM data_job ORDER BY name")
    assert rows == [{"name": "compat-auth-bobs", "team": "compat-auth-b"}, {"name": name, "team": team}]
    assert oidc_service.deployment_row("compat-auth-bobs") is None

    # bob deploys his job: alice may still not start, list or cancel its executions.
    bob("deploy", "-n", "compat-auth-bobs", "-t", "compat-auth-b", "-p", bobs_folder, "-r", "bob's")
    oidc_service.wait_synced("compat-auth-bobs")
    for args in (("--start", "--arguments", '{"day": "2026-11-30"}'), ("--list",),
                 ("--cancel", "-i", "compat-auth-bobs-1764500000")):
        r = alice("execute", *args, "-n", "compat-auth-bobs", "-t", "compat-auth-b", code=None)
        assert "may not act on the jobs of team compat-auth-b" in r.output, str(r)
    assert oidc_service.query("SELECT id FROM data_job_execution WHERE job_name = %s", "compat-auth-bobs") == []

    alice("delete", "-n", name, "-t", team, "--yes")
    assert oidc_service.query("SELECT name FROM data_job WHERE name = %s", name) == []
