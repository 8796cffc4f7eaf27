package deploytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// BenchmarkAdmissionPolicyPlacements is what the -team-nodes policy costs a pod's create
// (dry run, so nothing else is written) with n profiles of six node selector keys and six
// tolerations each granted to team-a: a pod with neither (the default profile), one with
// the placement of the last line (every line read), one of no line (refused), and the
// same create in a namespace no policy binds, for the floor. docs/profiles.md has the numbers.
func BenchmarkAdmissionPolicyPlacements(b *testing.B) {
	for _, n := range []int{20, 1000} {
		b.Run(fmt.Sprintf("profiles=%d", n), func(b *testing.B) {
			_, jobs := installPlacementPolicy(b)
			rc := testenv.RestConfig(b)
			rc.QPS, rc.Burst = 1000, 1000 // (client-go's default, 5 a second, would be all we measure)
			admin := kubernetes.NewForConfigOrDie(rc)
			ctx := context.WithoutCancel(b.Context())
			profiles := manyProfiles(n)
			_, err := admin.CoreV1().ConfigMaps(jobs).Create(ctx, kube.ProfilesConfigMap(kube.RenderConfig{Namespace: jobs, Installation: "bench"}, profiles), metav1.CreateOptions{})
			require.NoError(b, err)
			last := profiles[n-1]
			tolerations := make([]corev1.Toleration, len(last.Tolerations))
			for i, t := range last.Tolerations {
				tolerations[i] = corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: corev1.TaintEffectNoSchedule}
			}
			unbound := testenv.Namespace(b)
			cases := []struct {
				name, ns string
				pod      func() *corev1.Pod
				admitted bool
			}{
				{"unbound namespace", unbound, func() *corev1.Pod {
					p := handMadePod("team-a", last.NodeSelector, tolerations...)
					p.Spec.ServiceAccountName = "default"
					return p
				}, true},
				{"default profile", jobs, func() *corev1.Pod { return handMadePod("team-a", nil) }, true},
				{"last line", jobs, func() *corev1.Pod { return handMadePod("team-a", last.NodeSelector, tolerations...) }, true},
				{"no line", jobs, func() *corev1.Pod { return handMadePod("team-a", map[string]string{"pool": "none"}, tolerations...) }, false},
			}
			require.Eventually(b, func() bool {
				_, err := admin.CoreV1().Pods(jobs).Create(ctx, cases[2].pod(), dryRun)
				return err == nil
			}, time.Minute, tick, "the policy admits the last line")
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						_, err := admin.CoreV1().Pods(c.ns).Create(ctx, c.pod(), dryRun)
						if (err == nil) != c.admitted {
							b.Fatalf("admitted %v: %v", err == nil, err)
						}
					}
				})
			}
		})
	}
}

// manyProfiles are n profiles granted to team-a, each with six node selector keys and six
// tolerations of its own.
func manyProfiles(n int) []job.Profile {
	profiles := make([]job.Profile, n)
	for i := range profiles {
		p := job.Profile{Name: fmt.Sprintf("p%d", i), Teams: []string{"team-a"}, NodeSelector: map[string]string{}}
		for k := range 6 {
			p.NodeSelector[fmt.Sprintf("example.com/key-%d", k)] = fmt.Sprintf("value-%d-%d", i, k)
			p.Tolerations = append(p.Tolerations, job.Toleration{
				Key: fmt.Sprintf("example.com/taint-%d", k), Operator: "Equal", Value: fmt.Sprintf("v%d", i), Effect: "NoSchedule",
			})
		}
		profiles[i] = p
	}
	return profiles
}
