// Package jobidentity authenticates running data jobs by their pod's projected
// ServiceAccount token (issue 26, docs/api.md "A job's own properties and secrets"). The
// cluster's ServiceAccount issuer is trusted as an OIDC issuer: its discovery document and
// keys are read from the apiserver (no TokenReview, no ClusterRole: the default
// system:service-account-issuer-discovery binding lets any ServiceAccount read them), and
// the token's kubernetes.io claims name the pod it is bound to. A token is accepted only
// while that pod exists with that UID, is a pod of a Job of this installation and runs,
// not being deleted;
// the caller is then that data job, nothing more.
package jobidentity

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// Config configures the verifier of job tokens.
type Config struct {
	// Client reads the issuer's discovery and keys and watches the job pods.
	Client kubernetes.Interface
	// Namespace of the job pods (the service's --namespace).
	Namespace string
	// ServiceAccount is the job pods' ServiceAccount (default kube.DefaultJobServiceAccount).
	ServiceAccount string
	// ServiceAccountTemplate names a team's job pods' ServiceAccount, {team} replaced
	// (default job.DefaultServiceAccountTemplate): a pod of its team's is a job pod too.
	ServiceAccountTemplate string
	// Installation returns this installation's id (store.InstallationID); it is asked
	// until it answers, so the database may be migrated meanwhile.
	Installation func(ctx context.Context) (string, error)
	// CacheSize bounds the remembered verified tokens (default 10,000).
	CacheSize int
	// Logger receives discovery failures (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Verifier authenticates job tokens; Run must run for it to accept any.
type Verifier struct {
	cfg Config

	mu     sync.Mutex
	tokens *auth.TokenVerifier // nil until the issuer is discovered
	pods   podLookup           // nil until the pod informer has synced
	// accounts returns the ServiceAccounts of the execution profiles granted to a team
	// (nil until the ConfigMap's informer runs: none).
	accounts func(team string) []string
	verified map[[sha256.Size]byte]boundToken
}

// podLookup returns a job pod of the namespace by name.
type podLookup func(name string) (*corev1.Pod, bool)

// boundToken is a verified token: the pod it is bound to, until its expiry.
type boundToken struct {
	pod    podRef
	expiry time.Time
}

// podRef is the pod a token is bound to, and the ServiceAccount it is of.
type podRef struct{ name, uid, serviceAccount string }

// New returns a verifier; it contacts nothing until Run.
func New(cfg Config) (*Verifier, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Installation == nil {
		return nil, errors.New("job identity: a Kubernetes client, a namespace and the installation are required")
	}
	cfg.ServiceAccount = cmp.Or(cfg.ServiceAccount, kube.DefaultJobServiceAccount)
	cfg.ServiceAccountTemplate = cmp.Or(cfg.ServiceAccountTemplate, job.DefaultServiceAccountTemplate)
	cfg.CacheSize = cmp.Or(cfg.CacheSize, 10_000)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Verifier{cfg: cfg, verified: map[[sha256.Size]byte]boundToken{}}, nil
}

// Owns reports whether r carries a token of the cluster's ServiceAccount issuer, which
// only Authenticate may accept. Before the issuer is discovered it owns none (they are
// refused as of an untrusted issuer).
func (v *Verifier) Owns(r *http.Request) bool {
	raw, ok := auth.Bearer(r)
	if !ok {
		return false
	}
	v.mu.Lock()
	t := v.tokens
	v.mu.Unlock()
	return t != nil && auth.UnverifiedIssuer(raw) == t.Issuer()
}

// claims are the parts of a projected ServiceAccount token read here.
type claims struct {
	Kubernetes struct {
		Namespace string `json:"namespace"`
		Pod       *struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"pod"`
		ServiceAccount struct {
			Name string `json:"name"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// Authenticate returns the data job whose running pod r's token is bound to. A token of
// another audience, namespace or ServiceAccount, or whose pod is gone, replaced, not a
// job pod of this installation or not running, is Unauthenticated (401).
func (v *Verifier) Authenticate(r *http.Request) (auth.Identity, error) {
	raw, _ := auth.Bearer(r)
	v.mu.Lock()
	tokens, pods, accounts := v.tokens, v.pods, v.accounts
	v.mu.Unlock()
	if tokens == nil || pods == nil {
		return auth.Identity{}, job.Unavailable("job identity", errors.New("the ServiceAccount issuer or the job pods are not read yet"))
	}
	ref, err := v.bound(r.Context(), tokens, raw)
	if err != nil {
		return auth.Identity{}, err
	}
	p, ok := pods(ref.name)
	if !ok || string(p.UID) != ref.uid {
		return auth.Identity{}, job.Unauthenticated("The token's pod no longer exists.")
	}
	caller, err := jobOfPod(p)
	if err != nil {
		return auth.Identity{}, err
	}
	// The jobs' ServiceAccount, the pod's team's, or one of an execution profile granted to
	// the team (docs/profiles.md): a pod of another ServiceAccount of the namespace (anyone
	// who may create pods there) is no job's.
	team := strings.ReplaceAll(v.cfg.ServiceAccountTemplate, job.TeamPlaceholder, caller.Team)
	if ref.serviceAccount != v.cfg.ServiceAccount && ref.serviceAccount != team &&
		(accounts == nil || !slices.Contains(accounts(caller.Team), ref.serviceAccount)) {
		return auth.Identity{}, job.Unauthenticated("The token is not of the data jobs' ServiceAccount " + v.cfg.ServiceAccount +
			", the team's " + team + " or one of an execution profile granted to the team.")
	}
	return auth.Identity{Username: "job:" + caller.Team + "/" + caller.Name, Verified: true, Job: caller}, nil
}

// bound verifies raw (or finds it verified before, until its expiry) and returns its pod.
func (v *Verifier) bound(ctx context.Context, tokens *auth.TokenVerifier, raw string) (podRef, error) {
	key := sha256.Sum256([]byte(raw))
	now := v.cfg.Now()
	v.mu.Lock()
	hit, ok := v.verified[key]
	v.mu.Unlock()
	if ok && now.Before(hit.expiry) {
		return hit.pod, nil
	}
	var c claims
	expiry, err := tokens.Verify(ctx, raw, &c)
	if err != nil {
		return podRef{}, err
	}
	k := c.Kubernetes
	switch {
	case k.Namespace != v.cfg.Namespace:
		return podRef{}, job.Unauthenticated("The token is of a ServiceAccount of another namespace than the data jobs'.")
	case k.Pod == nil || k.Pod.Name == "" || k.Pod.UID == "":
		return podRef{}, job.Unauthenticated("The token is not bound to a pod.")
	}
	ref := podRef{name: k.Pod.Name, uid: k.Pod.UID, serviceAccount: k.ServiceAccount.Name}
	v.mu.Lock()
	if len(v.verified) >= v.cfg.CacheSize {
		clear(v.verified) // a simple bound: the next requests verify again
	}
	v.verified[key] = boundToken{pod: ref, expiry: expiry}
	v.mu.Unlock()
	return ref, nil
}

// jobOfPod is the data job a running pod of a Job of this installation runs (the pod
// lookup selects this installation's pods only).
func jobOfPod(p *corev1.Pod) (*auth.JobCaller, error) {
	ownedByJob := false
	for _, o := range p.OwnerReferences {
		ownedByJob = ownedByJob || (o.Kind == "Job" && o.Controller != nil && *o.Controller)
	}
	c := &auth.JobCaller{Team: p.Labels[kube.LabelTeam], Name: p.Labels[kube.LabelJob], UID: p.Labels[kube.LabelJobUID], Pod: p.Name}
	switch {
	case !ownedByJob || c.Team == "" || c.Name == "":
		return nil, job.Unauthenticated("The token's pod is not a pod of a data job.")
	case p.Status.Phase != corev1.PodRunning:
		return nil, job.Unauthenticated(fmt.Sprintf("The token's pod is %s, not running.", cmp.Or(string(p.Status.Phase), "not started")))
	case p.DeletionTimestamp != nil:
		// A pod being deleted still runs, for its grace period: the pods of a deleted job
		// are, and its token read the secrets of a job created again under its name
		// meanwhile (issue 41, L3).
		return nil, job.Unauthenticated("The token's pod is being deleted.")
	}
	return c, nil
}

// discover reads the issuer's discovery document from the apiserver and returns a
// verifier of its tokens whose keys come from the apiserver too: the document's own
// jwks_uri names the issuer's host, which the service may not reach.
func (v *Verifier) discover(ctx context.Context) (*auth.TokenVerifier, error) {
	rc := v.cfg.Client.CoreV1().RESTClient()
	body, err := rc.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the ServiceAccount issuer's discovery document: %w", err)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Issuer == "" {
		return nil, fmt.Errorf("the ServiceAccount issuer's discovery document names no issuer: %.200s", body)
	}
	return auth.NewTokenVerifier(auth.IssuerConfig{
		Issuer: doc.Issuer, Audience: kube.JobTokenAudience, Now: v.cfg.Now,
		FetchKeys: func(ctx context.Context) ([]byte, error) {
			return v.cfg.Client.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
		},
	})
}
