package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// BenchmarkPropertiesByJobTokenVsPersonToken measures GET .../properties of one job over
// loopback HTTP, with the token of its running pod (the cluster issuer's, bound to the pod)
// and with a person's token (Hydra's), alternating the two for a few rounds and keeping
// each one's best p50, so that the load of other processes lands on neither side alone.
// It reports p50s and their ratio (target: job ≤ 1.5x person; docs/benchmarks.md).
//
//	bash hack/with-env.sh .cache/bin/datajobs go test -run XXX -bench BenchmarkPropertiesByJobTokenVsPersonToken -benchtime 1x ./internal/server/
func BenchmarkPropertiesByJobTokenVsPersonToken(b *testing.B) {
	p := testenv.OIDC(b)
	dbURL, ns, addr := testenv.DatabaseURL(b), testenv.Namespace(b), testenv.FreeAddr(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{
			Listen: addr, AdminListen: "127.0.0.1:0", DatabaseURL: dbURL, Namespace: ns, Kubeconfig: testenv.Kubeconfig(b), SyncMode: server.SyncOff,
			Auth: server.AuthConfig{Mode: server.AuthOIDC, OIDC: auth.OIDCConfig{IssuerURLs: []string{p.IssuerURL}, Audience: testenv.Audience, UsernameClaim: "username"}},
		}, nil)
	}()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	base := "http://" + addr
	person := p.ClientToken(b, "bench-bob", "team-b")
	client := &http.Client{}
	do := func(token, method, path, body string) int {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor := func(what string, f func() bool) {
		for deadline := time.Now().Add(30 * time.Second); !f(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal(what)
			}
		}
	}
	waitFor("the server starts", func() bool {
		return do(person, "POST", "/data-jobs/for-team/team-b/jobs", `{"job_name":"bench-job","description":"d"}`) == http.StatusCreated
	})
	props := "/data-jobs/for-team/team-b/jobs/bench-job/deployments/bench-job/properties"
	if c := do(person, "PUT", props, `{"db":"warehouse","batch":100}`); c != http.StatusNoContent {
		b.Fatalf("PUT properties: %d", c)
	}
	db, err := store.Open(ctx, store.Config{URL: dbURL})
	if err != nil {
		b.Fatal(err)
	}
	installation, err := db.InstallationID(ctx)
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	pod := testenv.JobPod(b, testenv.Clientset(b), ns, "bench-job-exec", kube.DefaultJobServiceAccount, map[string]string{
		kube.LabelManagedBy: kube.ManagedByValue, kube.LabelInstallation: installation,
		kube.LabelJob: "bench-job", kube.LabelTeam: "team-b", kube.LabelJobUID: "any",
	})
	jobToken := testenv.JobToken(b, testenv.Clientset(b), pod, kube.JobTokenAudience)
	waitFor("the job token is accepted", func() bool { return do(jobToken, "GET", props, "") == http.StatusOK })

	p50 := func(token string) time.Duration {
		lat := make([]time.Duration, 0, 2000)
		for range cap(lat) {
			start := time.Now()
			if c := do(token, "GET", props, ""); c != http.StatusOK {
				b.Fatalf("GET properties: %d", c)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		return lat[len(lat)/2]
	}
	bestJob, bestPerson := time.Hour, time.Hour
	for range 5 {
		bestPerson = min(bestPerson, p50(person))
		bestJob = min(bestJob, p50(jobToken))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(bestJob), "job-p50-ms")
	b.ReportMetric(ms(bestPerson), "person-p50-ms")
	b.ReportMetric(ms(bestJob)/ms(bestPerson), "job/person")
	fmt.Printf("GET properties p50: job token %.3f ms, person token %.3f ms, ratio %.2f\n", ms(bestJob), ms(bestPerson), ms(bestJob)/ms(bestPerson))
}
