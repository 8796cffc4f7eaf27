"""vdk-core's properties and secrets backed by the datajobs API.

A datajobs job pod has no long-lived credential: the kubelet projects a token of the pod's
own (audience datajobs, renewed before it expires) at $DATAJOBS_TOKEN_FILE, and the API
takes it as that job, for its own deployment's properties (read and write) and secrets
(read). This plugin registers clients of type "default", which vdk-core picks when
PROPERTIES_DEFAULT_TYPE / SECRETS_DEFAULT_TYPE are not set, so a step's
job_input.get_all_properties(), set_all_properties() and get_all_secrets() work unchanged.
When VDK's vdk-dag plugin is installed too, its calls to the API (start, list and read the
executions of the DAG's jobs) carry the same token (docs/compatibility.md, "vdk-dag").
Outside a datajobs pod (no token file or API URL in the environment) it registers nothing.

It also gives a failed run an exit code that says whom vdk-core blames (vdk-core itself
exits 1 either way and says it only in its termination message): USER_ERROR_EXIT_CODE for
the job's own error, PLATFORM_ERROR_EXIT_CODE for the platform's. The Job's
podFailurePolicy (internal/kube, docs/cronjob.md) fails the Job at once on the first, so a
deterministic user error is not run again, and retries the second.
"""

import json
import os
import urllib.error
import urllib.parse
import urllib.request

from vdk.api.plugin.hook_markers import hookimpl
from vdk.api.plugin.plugin_input import IPropertiesServiceClient, ISecretsServiceClient

_TIMEOUT_SECONDS = 30

# The exit codes of a failed run (sysexits.h's EX_DATAERR and EX_SOFTWARE), the contract
# with internal/kube's podFailurePolicy (kube.UserErrorExitCode). A success keeps 0; a run
# whose blame vdk-core did not record keeps vdk-core's own code.
USER_ERROR_EXIT_CODE = 65
PLATFORM_ERROR_EXIT_CODE = 70


class _DatajobsAPI:
    """The job's own deployment on the datajobs API, called with the pod's token."""

    def __init__(self):
        self._base = os.environ["VDK_CONTROL_SERVICE_REST_API_URL"].rstrip("/")
        self._token_file = os.environ["DATAJOBS_TOKEN_FILE"]
        self._deployment = os.environ.get("DATAJOBS_DEPLOYMENT_ID", "production")
        # vdk-core names the job after its directory (/job in the image): the pod's own
        # names are what the token is bound to.
        self._job = os.environ.get("DATA_JOB_NAME")
        self._team = os.environ.get("VDK_JOB_TEAM")

    def call(self, method, job_name, team_name, what, body=None):
        job_name, team_name = self._job or job_name, self._team or team_name
        # The kubelet renews the token file: it is read for every call, never kept.
        with open(self._token_file) as f:
            token = f.read().strip()
        quote = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
        url = "%s/data-jobs/for-team/%s/jobs/%s/deployments/%s/%s" % (
            self._base, quote(team_name), quote(job_name), quote(self._deployment), what)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, method=method, data=data, headers={
            "Authorization": "Bearer " + token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=_TIMEOUT_SECONDS) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            # The API's VDK error body says what, why and what to do; the token is not in it.
            detail = e.read(4096).decode("utf-8", "replace")
            raise RuntimeError("datajobs API %s %s answered %d: %s" % (method, what, e.code, detail)) from None
        return json.loads(raw) if raw else {}


class DatajobsProperties(IPropertiesServiceClient):
    def __init__(self):
        self._api = _DatajobsAPI()

    def read_properties(self, job_name, team_name):
        return self._api.call("GET", job_name, team_name, "properties")

    def write_properties(self, job_name, team_name, properties):
        self._api.call("PUT", job_name, team_name, "properties", properties)
        return properties


class DatajobsSecrets(ISecretsServiceClient):
    def __init__(self):
        self._api = _DatajobsAPI()

    def read_secrets(self, job_name, team_name):
        return self._api.call("GET", job_name, team_name, "secrets")

    def write_secrets(self, job_name, team_name, secrets):
        # A job may read its secrets, not change them: the API answers 403, which says so.
        self._api.call("PUT", job_name, team_name, "secrets", secrets)
        return secrets


class PodTokenAuthentication:
    """Stands for vdk-control-api-auth's Authentication where vdk-dag makes one
    (vdk/plugin/dag/remote_data_job.py, RemoteDataJob._login): vdk-dag asks it only for
    read_access_token(), once per request it sends, and gets the pod's token, read
    afresh because the kubelet renews the file. vdk-dag passes no credentials of its own:
    without this it would send no Authorization header at all."""

    def __init__(self, *args, **kwargs):
        self._token_file = os.environ["DATAJOBS_TOKEN_FILE"]

    def read_access_token(self):
        with open(self._token_file) as f:
            return f.read().strip()


def _give_vdk_dag_the_pod_token():
    try:
        from vdk.plugin.dag import remote_data_job
    except ImportError:
        return  # no vdk-dag in this image
    remote_data_job.Authentication = PodTokenAuthentication


@hookimpl
def initialize_job(context):
    if not (os.environ.get("DATAJOBS_TOKEN_FILE") and os.environ.get("VDK_CONTROL_SERVICE_REST_API_URL")):
        return
    context.properties.set_properties_factory_method("default", DatajobsProperties)
    context.secrets.set_secrets_factory_method("default", DatajobsSecrets)
    _give_vdk_dag_the_pod_token()


def exit_code_of(exit_code, blamee):
    """The exit code of a run that vdk-core ended with exit_code, given its blamee."""
    if not exit_code or blamee is None:
        return exit_code
    if getattr(blamee, "name", blamee) == "USER":
        return USER_ERROR_EXIT_CODE
    return PLATFORM_ERROR_EXIT_CODE


@hookimpl(wrapper=True)
def vdk_main(plugin_registry, root_command, command_line_args):
    # vdk-core's vdk_main returns the failed run's exit code after its vdk_exit hooks
    # (the termination message) ran; a success leaves through click's SystemExit(0),
    # which passes through here untouched.
    exit_code = yield
    try:
        from vdk.internal.core import errors

        blamee = errors.get_blamee_overall()
    except Exception:  # an older vdk-core without the blame: its own code stands
        return exit_code
    return exit_code_of(exit_code, blamee)
