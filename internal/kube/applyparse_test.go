package kube

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/testenv"
)

// Every server-side apply the Applier sends asks the apiserver to parse its body once
// (fieldValidation Ignore). Under the default, Warn, the apiserver parses an apply's YAML
// a second time, strictly, for warnings of unknown or duplicate fields (issue 28: 1.2 of
// the 8.7 ms of apiserver CPU an apply cost). Creates by apply are not forced, changes are.
// What makes Ignore lose nothing is checked too: the very body passes Strict validation.
func TestAppliesAskForOneParseOfTheirBody(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var mu sync.Mutex
	var applies []url.Values
	rc := testenv.RestConfig(t)
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("Content-Type") == string(types.ApplyPatchType) {
				mu.Lock()
				applies = append(applies, r.URL.Query())
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	a := NewWriter(kubernetes.NewForConfigOrDie(rc), c.ns).CronJobs()
	j, d := testJob(), testDeployment()
	rendered, _ := Render(j, d, c.cfg)
	created, err := a.Apply(t.Context(), nil, rendered)
	require.NoError(t, err)
	d.Enabled = false
	changed, _ := Render(j, d, c.cfg)
	got, err := a.Apply(t.Context(), created, changed)
	require.NoError(t, err)
	require.True(t, *got.Spec.Suspend)

	require.Len(t, applies, 2, "a create by apply and a change")
	for i, force := range []string{"false", "true"} {
		require.Equal(t, metav1.FieldValidationIgnore, applies[i].Get("fieldValidation"), "apply %d", i)
		require.Equal(t, force, applies[i].Get("force"), "apply %d", i)
		require.Equal(t, FieldManager, applies[i].Get("fieldManager"), "apply %d", i)
	}

	ac, err := applyConfiguration(changed)
	require.NoError(t, err)
	body, err := json.Marshal(ac.WithResourceVersion(got.ResourceVersion))
	require.NoError(t, err)
	_, err = c.client.BatchV1().CronJobs(c.ns).Patch(t.Context(), changed.Name, types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager: FieldManager, Force: new(true), FieldValidation: metav1.FieldValidationStrict, DryRun: []string{metav1.DryRunAll},
	})
	require.NoError(t, err, "the rendered body has no field the apiserver does not know")
}
