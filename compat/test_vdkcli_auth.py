"""The real VDK client against datajobs in auth mode oidc: a user logged in (a refresh
token of the environment's Ory Hydra, which vdkcli exchanges for access tokens itself)
works on its team's jobs and is refused, with the 403 message the client prints, on
another's."""

import re

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

    # The same commands on team compat-auth-b: refused, nothing changed.
    for args in (("create", "-n", "compat-auth-intruder", "-t", "compat-auth-b", "--cloud"),
                 ("deploy", "-n", "compat-auth-bobs", "-t", "compat-auth-b", "-p", job_dir("compat-auth-bobs", "compat-auth-b"), "-r", "x"),
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

    alice("delete", "-n", name, "-t", team, "--yes")
    assert oidc_service.query("SELECT name FROM data_job WHERE name = %s", name) == []
