package kube

import (
	"context"
	"path"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
)

// A job pod's identity (issue 26, docs/cronjob.md "Job identity"): a projected
// ServiceAccount token of audience JobTokenAudience, bound to the pod, that the kubelet
// renews before it expires; the service accepts it while the pod runs
// (internal/jobidentity). The ServiceAccount has no RBAC permissions: the token proves who
// the pod is to datajobs and is worth nothing to the apiserver.
const (
	// DefaultJobServiceAccount is the job pods' ServiceAccount (RenderConfig.JobServiceAccount).
	DefaultJobServiceAccount = "datajobs-job"
	// JobTokenAudience is the token's audience: it is accepted by datajobs only.
	JobTokenAudience = "datajobs"
	// JobTokenExpirationSeconds is the token's lifetime; the kubelet renews it at 80%.
	JobTokenExpirationSeconds int64 = 600
	// JobTokenDir is where the token volume is mounted; the token is its file "token".
	JobTokenDir = "/var/run/secrets/datajobs.io"
	// JobTokenPath is the token's file in the job container.
	JobTokenPath = JobTokenDir + "/token"

	jobTokenVolume = "datajobs-token"
)

// Environment variables of a job's identity, besides DATA_JOB_NAME and VDK_JOB_TEAM.
const (
	// EnvControlServiceURL is the API's URL for job pods (RenderConfig.JobAPIURL), the
	// variable vdk-control-cli and vdk-core's control-service plugin read.
	EnvControlServiceURL = "VDK_CONTROL_SERVICE_REST_API_URL"
	// EnvDeploymentID is the deployment id of the job's API paths.
	EnvDeploymentID = "DATAJOBS_DEPLOYMENT_ID"
	// EnvTokenFile is the token's path (JobTokenPath).
	EnvTokenFile = "DATAJOBS_TOKEN_FILE"
)

// withJobIdentity gives the pod of job j the projected token of its ServiceAccount (its
// team's: serviceAccountOf) and the variables that tell the job's code where the API and
// its token are.
func withJobIdentity(spec *corev1.PodSpec, j job.Job, cfg RenderConfig) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: jobTokenVolume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: JobTokenAudience, ExpirationSeconds: new(JobTokenExpirationSeconds), Path: path.Base(JobTokenPath),
			}}},
			// No mode: the kubelet gives the file to the pod's RunAsUser with mode 0600.
		}},
	})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: jobTokenVolume, MountPath: JobTokenDir, ReadOnly: true})
	c.Env = append(c.Env,
		corev1.EnvVar{Name: EnvDeploymentID, Value: j.Name},
		corev1.EnvVar{Name: EnvTokenFile, Value: JobTokenPath},
	)
	if cfg.JobAPIURL != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvControlServiceURL, Value: cfg.JobAPIURL})
	}
	sortEnv(c.Env)
}

// EnsureJobServiceAccount creates the job pods' ServiceAccount name in the Writer's
// namespace when it is missing, labelled as installation's; without it the apiserver admits
// no job pod. It never changes or deletes one that exists, whoever made it (the Helm chart
// makes it in a cluster; a synchronizer makes it in `datajobs dev` and tests), and grants
// it nothing: the token it yields is meant for datajobs alone.
func (w *Writer) EnsureJobServiceAccount(ctx context.Context, name, installation string) (created bool, err error) {
	sas := w.client.CoreV1().ServiceAccounts(w.namespace)
	if _, err := sas.Get(ctx, name, metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		return false, err
	}
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.namespace, Labels: map[string]string{
			LabelManagedBy: ManagedByValue, LabelInstallation: installation,
		}},
		// No API token in any pod that names it by mistake; job pods mount their own.
		AutomountServiceAccountToken: new(false),
	}
	_, err = fenced(ctx, w, func() (*corev1.ServiceAccount, error) {
		return sas.Create(ctx, sa, metav1.CreateOptions{FieldManager: FieldManager})
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	return true, nil
}
