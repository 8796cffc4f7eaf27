package kube

import (
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/datajobs/datajobs/internal/job"
)

// A team's OAuth credentials (issue 26, item 6) reach its job pods as VDK's do, as
// VDK_TEAM_CLIENT_ID and VDK_TEAM_CLIENT_SECRET, from one Secret per team that the
// synchronizer owns (internal/synchronizer/teamsecret.go). The CronJob holds only a
// reference to it, never a value.
const (
	// EnvTeamClientID and EnvTeamClientSecret are the variables vdk-core reads, and the
	// keys of the team's Secret (VDK's team-oauth Secret has the same keys).
	EnvTeamClientID     = "VDK_TEAM_CLIENT_ID"
	EnvTeamClientSecret = "VDK_TEAM_CLIENT_SECRET"
	// LabelComponent with TeamOAuthComponent marks a team's OAuth Secret among the
	// objects datajobs manages; the synchronizer's Secret informer selects on both.
	LabelComponent     = "app.kubernetes.io/component"
	TeamOAuthComponent = "team-oauth"
)

// TeamOAuthSecretName is the name of the Secret of team's OAuth credentials. A team is a
// DNS label (job.ValidateTeam), so the name is a valid Secret name of at most 83 characters.
func TeamOAuthSecretName(team string) string {
	return "datajobs-team-" + team + "-oauth"
}

// TeamOAuthSelector selects the team OAuth Secrets of every datajobs installation; the
// synchronizer keeps those of its own (LabelInstallation).
func TeamOAuthSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelComponent: TeamOAuthComponent})
}

// TeamOAuthSecret is the Secret of team's OAuth credentials in namespace, labelled as
// installation's.
func TeamOAuthSecret(namespace, installation, team, clientID, clientSecret string) *corev1.Secret {
	l := map[string]string{LabelManagedBy: ManagedByValue, LabelComponent: TeamOAuthComponent, LabelTeam: team}
	if installation != "" {
		l[LabelInstallation] = installation
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: TeamOAuthSecretName(team), Namespace: namespace, Labels: l},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			EnvTeamClientID:     []byte(clientID),
			EnvTeamClientSecret: []byte(clientSecret),
		},
	}
}

// withTeamOAuth gives the job container of a team with OAuth credentials the two
// variables from the team's Secret. The reference is not optional: the kubelet holds the
// container until the Secret exists rather than start a job without the credentials its
// team has. A team without credentials gets nothing, so that its jobs render exactly as
// before credentials reached pods (no redeploy of every job on upgrade).
func withTeamOAuth(c *corev1.Container, j job.Job) {
	if !j.TeamOAuth {
		return
	}
	ref := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: TeamOAuthSecretName(j.Team)},
			Key:                  key,
			Optional:             new(false),
		}}
	}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: EnvTeamClientID, ValueFrom: ref(EnvTeamClientID)},
		corev1.EnvVar{Name: EnvTeamClientSecret, ValueFrom: ref(EnvTeamClientSecret)},
	)
	sortEnv(c.Env)
}

// RefersToTeamOAuth reports whether a CronJob's pods read team's OAuth Secret (from this
// rendering, or from VDK's envFrom of an adopted one): while one does, the Secret stays.
func RefersToTeamOAuth(cj *batchv1.CronJob, team string) bool {
	name := TeamOAuthSecretName(team)
	spec, ok := LiveSpec(cj)
	if !ok { // the cache kept only the names of the Secrets it reads
		return slices.Contains(strings.Fields(cj.Annotations[annotationSecretRefs]), name)
	}
	pod := spec.JobTemplate.Spec.Template.Spec
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				return true
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil && e.SecretRef.Name == name {
				return true
			}
		}
	}
	return false
}
