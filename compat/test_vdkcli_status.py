"""What the real VDK client shows of a deployment that failed, and why (issue 21)."""

import pytest

from conftest import wait_for
from test_vdkcli import VERSION, image_of


def test_a_version_nobody_uploaded_or_pushed_is_a_user_error_vdk_list_explains(vdk, service, job_dir):
    """`vdk deploy --update --job-version <typo>` used to end synced with the CronJob on
    <registry>/<job>:<typo>, which does not exist. Now the deployment is a user error whose
    message names the image looked up, `vdk list` prints it (the deployment's status is
    the one field of it the client shows), and the CronJob keeps its last good image."""
    if not service.registry:
        pytest.skip("no registry in the environment: the prebuilt image cannot be looked up")
    name, team = "compat-typo", "compat-typo-team"  # a team of its own: other tests list theirs
    vdk("create", "-n", name, "-t", team, "--cloud")
    r = vdk("deploy", "-n", name, "-t", team, "-p", job_dir(name, team), "-r", "good")
    good = VERSION.search(r.output).group(1)
    service.wait_synced(name)
    image = image_of(service.cronjob(name))

    vdk("deploy", "--update", "--job-version", "relaese-2", "-n", name, "-t", team)

    def failed():
        rows = service.query(
            """SELECT d.status, d.message FROM desired_data_job_deployment d JOIN data_job j ON j.name = d.data_job_name
               WHERE j.name = %s AND d.status_generation = j.generation""", name)
        return rows and rows[0]["status"] == "user_error" and rows[0]
    row = wait_for(f"the deployment of {name} to fail", failed)
    reference = f"{service.image_prefix()}/{name}:relaese-2"
    assert reference in row["message"] and "does not exist" in row["message"], row["message"]

    [listed] = vdk("list", "-t", team, "-m", "-o", "json").json()
    assert listed["last_deployment_status"].startswith("USER_ERROR: "), listed
    assert reference in listed["last_deployment_status"], listed
    assert listed["job_version"] == "relaese-2"

    cronjob = service.cronjob(name)
    assert image_of(cronjob) == image, "the CronJob keeps its last good image"
    assert cronjob["metadata"]["annotations"]["datajobs.io/job-version"] == good

    # The console's own fields stay apart.
    r = vdk("deploy", "--show", "-n", name, "-t", team, "-o", "json")
    assert r.json()[0]["job_version"] == "relaese-2"
