"""VDK's DAG plugin (vdk-dag) against datajobs (issue 40, docs/compatibility.md "vdk-dag").

A DAG job is an ordinary data job whose step calls vdk-dag's DagInput().run_dag(jobs):
vdk-dag starts each job of the DAG through the Control Service API once the jobs it
depends on have succeeded, and polls their executions. Here the DAG job runs with
vdk-core's `vdk run` on this machine, as in a pod: kwok's pods run no code, so the DAG's
own step cannot run in one. The jobs it starts are deployed and run (by kwok) as any.

In a datajobs pod vdk-dag's requests carry the pod's token, which the base image's
vdk-datajobs plugin hands it (hack/base-image/vdk-datajobs). The second test gives the
local run that plugin and a token the apiserver bound to a running pod of the DAG job,
exactly what the kubelet projects into the pod.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import DATAJOBS, REPO, VDK as VDKCLI, serve

TEAM = "compat-dag-team"
VDK = Path(sys.executable).parent / "vdk"
PLUGIN = REPO / "hack/base-image/vdk-datajobs"
FLAG = "--job-token-team-executions"


def dag_job(root, name, jobs):
    """A DAG job's folder: config.ini and one step that runs the DAG of jobs."""
    d = root / name
    d.mkdir(parents=True)
    (d / "config.ini").write_text(f"[owner]\nteam = {TEAM}\n")
    (d / "10_dag.py").write_text(textwrap.dedent(f"""\
        from vdk.plugin.dag.dag_runner import DagInput

        def run(job_input):
            DagInput().run_dag({jobs!r})
        """))
    return d


def vdk_run(service, folder, home, extra_env=None):
    """`vdk run folder` as the pod would run it, against the service; returns the process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VDK_", "DATAJOBS_"))}
    env.update({
        "HOME": str(home), "VDK_BASE_CONFIG_FOLDER": str(home),
        "VDK_CONTROL_SERVICE_REST_API_URL": service.url,
        "VDK_CONTROL_HTTP_TOTAL_RETRIES": "0",
        # vdk-dag's waits, shortened: 40 s between a job's status checks by default.
        "VDK_DAGS_TIME_BETWEEN_STATUS_CHECK_SECONDS": "1",
        "VDK_DAGS_DAG_EXECUTION_CHECK_TIME_PERIOD_SECONDS": "1",
        "VDK_DAGS_DELAYED_JOBS_MIN_DELAY_SECONDS": "1",
        "VDK_DAGS_DELAYED_JOBS_RANDOMIZED_ADDED_DELAY_SECONDS": "1",
        "PYTHONWARNINGS": "ignore",
    })
    env.update(extra_env or {})
    return subprocess.run([VDK, "run", str(folder)], env=env, cwd=home, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def deploy_jobs(vdk, service, job_dir, *names):
    for name in names:
        vdk("create", "-n", name, "-t", TEAM, "--cloud")
        vdk("deploy", "-n", name, "-t", TEAM, "-p", job_dir(name, TEAM), "-r", "in a dag")
    for name in names:
        service.wait_synced(name)


def executions(service, name):
    return service.query("SELECT id, status, started_by, args, start_time, end_time FROM data_job_execution "
                         "WHERE job_name = %s ORDER BY start_time", name)


def test_a_dag_job_runs_its_jobs_in_order(vdk, service, job_dir, tmp_path):
    """vdk-dag's requests as they are (list, start, read of executions): A, then B and C
    once A succeeded, each exactly once, with the DAG's arguments and its label."""
    deploy_jobs(vdk, service, job_dir, "compat-dag-a", "compat-dag-b", "compat-dag-c")
    folder = dag_job(tmp_path / "jobs", "compat-dag", [
        {"job_name": "compat-dag-a", "team_name": TEAM, "depends_on": [], "arguments": {"day": "2026-12-01"}},
        {"job_name": "compat-dag-b", "team_name": TEAM, "depends_on": ["compat-dag-a"]},
        {"job_name": "compat-dag-c", "depends_on": ["compat-dag-a"]},  # team_name: the DAG job's
    ])
    home = tmp_path / "dag-home"
    home.mkdir()
    p = vdk_run(service, folder, home)
    assert p.returncode == 0, p.stdout + p.stderr

    [a], [b], [c] = (executions(service, n) for n in ("compat-dag-a", "compat-dag-b", "compat-dag-c"))
    for e in (a, b, c):
        assert e["status"] == "succeeded", e
        assert e["started_by"] == "manual/compat-dag", e  # vdk-dag's label; no caller in auth mode none
    assert a["args"] == {"day": "2026-12-01"}
    assert b["start_time"] >= a["end_time"] and c["start_time"] >= a["end_time"], (a, b, c)


@pytest.fixture(scope="module")
def dag_service(environment, tmp_path_factory, request):
    """datajobs in auth mode none that lets a job's token start its team's executions."""
    usage = subprocess.run([DATAJOBS, "serve", "--help"], capture_output=True, text=True).stdout
    if FLAG not in usage:
        pytest.skip(f"`datajobs serve` has no {FLAG} (docs/compatibility.md, vdk-dag)")
    yield from serve(environment, tmp_path_factory, request, "--auth-mode", "none", FLAG)


def pod_token(service, job, team, tmp):
    """A token the apiserver binds to a running pod of job, as the kubelet projects it
    into the job's pods (testenv.JobPod and testenv.JobToken in Go): a Job that no
    controller manages and its pod on no node, set Running by hand."""
    installation = service.query("SELECT id::text AS id FROM installation")[0]["id"]
    uid = service.query("SELECT uid::text AS uid FROM data_job WHERE name = %s", job)[0]["uid"]
    labels = {"app.kubernetes.io/managed-by": "datajobs", "datajobs.io/installation": installation,
              "datajobs.io/job": job, "datajobs.io/team": team, "datajobs.io/job-uid": uid}
    spec = {"restartPolicy": "Never", "serviceAccountName": "datajobs-job", "automountServiceAccountToken": False,
            "nodeSelector": {"datajobs.io/test-node": "none"},
            "containers": [{"name": "job", "image": "registry.invalid/none:1"}]}
    service.kubectl("create", "serviceaccount", "datajobs-job", check=False)
    k8s_job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job + "-dag", "labels": labels},
               "spec": {"managedBy": "datajobs.io/test", "template": {"metadata": {"labels": labels}, "spec": spec}}}
    def create(obj):
        f = tmp / (obj["kind"] + ".json")
        f.write_text(json.dumps(obj))
        return json.loads(service.kubectl("create", "-o", "json", "-f", str(f)).stdout)
    created = create(k8s_job)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": job + "-dag-pod", "labels": labels, "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": created["metadata"]["name"],
            "uid": created["metadata"]["uid"], "controller": True}]}, "spec": spec}
    pod = create(pod)
    service.kubectl("patch", "pod", pod["metadata"]["name"], "--subresource=status", "--type=merge",
                    "-p", '{"status":{"phase":"Running"}}')
    return service.kubectl("create", "token", "datajobs-job", "--audience", "datajobs", "--duration", "10m",
                           "--bound-object-kind", "Pod", "--bound-object-name", pod["metadata"]["name"],
                           "--bound-object-uid", pod["metadata"]["uid"]).stdout.strip()


def plugin_path(root):
    """A folder for PYTHONPATH that holds the base image's vdk-datajobs plugin as an
    installed distribution (its module and an entry point), as the image installs it."""
    d = root / "plugins"
    info = d / "vdk_datajobs-0.1.0.dist-info"
    info.mkdir(parents=True)
    (d / "vdk_datajobs.py").symlink_to(PLUGIN / "vdk_datajobs.py")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vdk-datajobs\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[vdk.plugin.run]\nvdk-datajobs = vdk_datajobs\n")
    return d


def test_a_dag_jobs_pod_token_starts_its_teams_jobs_and_no_other_teams(dag_service, job_dir, tmp_path):
    """In its pod, vdk-dag's requests carry the pod's token (through vdk-datajobs): the
    DAG job may start, list and read its own team's executions, recorded as started by
    it; a DAG that names another team's job fails on the 403 and starts nothing there."""
    service = dag_service
    home = tmp_path / "dag-home"
    home.mkdir()
    cli = VDKCLI(service, home)
    for name, team in (("compat-dag-d", TEAM), ("compat-dag-other", "compat-dag-other-team")):
        cli("create", "-n", name, "-t", team, "--cloud")
        cli("deploy", "-n", name, "-t", team, "-p", job_dir(name, team), "-r", "in a dag")
        service.wait_synced(name)
    cli("create", "-n", "compat-dag-pod", "-t", TEAM, "--cloud")
    token = tmp_path / "token"
    token.write_text(pod_token(service, "compat-dag-pod", TEAM, tmp_path))
    pod_env = {"DATAJOBS_TOKEN_FILE": str(token), "DATA_JOB_NAME": "compat-dag-pod", "VDK_JOB_TEAM": TEAM,
               "PYTHONPATH": str(plugin_path(tmp_path))}

    folder = dag_job(tmp_path / "jobs", "compat-dag-pod", [{"job_name": "compat-dag-d", "depends_on": []}])
    p = vdk_run(service, folder, home, pod_env)
    assert p.returncode == 0, p.stdout + p.stderr
    [d] = executions(service, "compat-dag-d")
    assert d["status"] == "succeeded", d
    assert d["started_by"] == f"manual/compat-dag-pod/job:{TEAM}/compat-dag-pod", d

    other = dag_job(tmp_path / "other", "compat-dag-pod", [
        {"job_name": "compat-dag-other", "team_name": "compat-dag-other-team", "depends_on": []}])
    p = vdk_run(service, other, home, pod_env)
    assert p.returncode != 0, p.stdout + p.stderr
    assert "403" in p.stdout + p.stderr
    assert executions(service, "compat-dag-other") == []
