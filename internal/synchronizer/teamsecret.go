package synchronizer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/store"
)

// Team OAuth Secrets (issue 26, item 6). VDK gives every job pod its team's OAuth
// credentials as VDK_TEAM_CLIENT_ID and VDK_TEAM_CLIENT_SECRET; here the pods of a team
// with credentials read them from one Secret per team (kube.TeamOAuthSecret) that the
// synchronizer keeps as it keeps CronJobs: a reconcile (key teamSecretsKey) reads the
// credentials of every team with a deployed job, plans against the informer's Secrets of
// this installation (planTeamSecrets, pure) and does each plan. It runs on a credentials
// NOTIFY, on any event of those Secrets (a hand edit is repaired), after a full pass, and
// after a CronJob write of a team that has one. A Secret is deleted when its team has no
// credentials or no deployed job any more, once no CronJob of ours refers to it (the
// reference is not optional, so a pod of such a CronJob would wait for it). A Secret of the
// name that is not this installation's is never written or deleted: the plan reports it.
// Values are in the Secret alone: never in a log line, a plan's reason or a CronJob.

// teamSecretsKey is the queue item of the team Secrets' reconcile; it cannot be a job name.
const teamSecretsKey = "#team-oauth"

// teamSecrets is a term's view of the team OAuth Secrets of its namespace.
type teamSecrets struct {
	keys   *secrets.Keyring
	lister corelisters.SecretNamespaceLister
	synced cache.InformerSynced
}

// teamSecretPlan is what a reconcile decided for the Secret of one team.
type teamSecretPlan struct {
	Team, Name string
	Action     Action
	Reason     string
	Live, Want *corev1.Secret
	// again asks for another look soon: the plan waits for CronJobs or a deletion.
	again bool
}

// startTeamSecrets starts the informer on the namespace's team OAuth Secrets (of every
// installation: the plan must see one of another installation to leave it alone) and
// returns its stop. It does not wait for the cache: a term whose Role may not read
// Secrets still syncs CronJobs, and the reconcile waits until the cache has synced.
func (t *term) startTeamSecrets(ctx context.Context) func() {
	if t.s.cfg.TeamOAuthKeys == nil {
		return func() {}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(t.s.client, 0, informers.WithNamespace(t.render.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = kube.TeamOAuthSelector().String() }))
	informer := factory.Core().V1().Secrets()
	queue := func(any) { t.queue.Add(teamSecretsKey) }
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { queue(obj) },
		UpdateFunc: func(_, obj any) { queue(obj) },
		DeleteFunc: queue,
	}); err != nil {
		t.s.log.WarnContext(ctx, "team_oauth_secrets_unwatched", "error", err)
		return func() {}
	}
	t.teams = &teamSecrets{keys: t.s.cfg.TeamOAuthKeys, lister: informer.Lister().Secrets(t.render.Namespace), synced: informer.Informer().HasSynced}
	return startInformers(ctx, factory)
}

// listenTeamOAuth queues the team Secrets and a full pass (whose CronJobs of a team that
// gained or lost credentials render anew) on every credentials NOTIFY and (re)connection.
func (t *term) listenTeamOAuth(ctx context.Context) {
	again := func() {
		t.queue.Add(teamSecretsKey)
		t.queue.Add(resyncKey)
	}
	controller.Listen(ctx, t.s.db, store.TeamOAuthChannel, t.s.cfg.RetryBase, t.s.log, func(bool) { again() }, func(string) { again() })
}

// reconcileTeamSecrets plans every team's Secret and does each plan.
func (t *term) reconcileTeamSecrets(ctx context.Context) (controller.Result, error) {
	res, _, err := t.syncTeamSecrets(ctx)
	return res, err
}

// syncTeamSecrets plans every team's Secret, does each plan, and returns what it did.
func (t *term) syncTeamSecrets(ctx context.Context) (controller.Result, []TeamSecretPlan, error) {
	if t.teams == nil {
		return controller.Result{}, nil, nil
	}
	if !t.teams.synced() {
		return controller.Result{RequeueAfter: time.Second}, nil, nil
	}
	want, err := t.wantedTeamSecrets(ctx)
	if err != nil {
		return controller.Result{}, nil, err
	}
	lives, err := t.teams.lister.List(labels.Everything())
	if err != nil {
		return controller.Result{}, nil, fmt.Errorf("list team oauth secrets from cache: %w", err)
	}
	var errs []error
	var done []TeamSecretPlan
	res := controller.Result{}
	for _, p := range planTeamSecrets(want, lives, t.render.Installation, t.refersToTeamOAuth) {
		if p.again {
			res.RequeueAfter = 2 * time.Second
		}
		err := t.executeTeamSecret(ctx, p)
		errs = append(errs, err)
		done = append(done, TeamSecretPlan{Team: p.Team, Secret: p.Name, Action: p.Action, Reason: p.Reason, Err: err})
	}
	return res, done, errors.Join(errs...)
}

// TeamSecretPlan is what a single pass (RunOnce) planned and did for the OAuth Secret of
// one team, as `datajobs sync --once` prints it: never its values.
type TeamSecretPlan struct {
	Team, Secret string
	Action       Action
	Reason       string
	// Err is why the write failed, or nil.
	Err error
}

// teamSecretsOnce is the team Secrets' reconcile of a single pass (RunOnce), once the
// informer's cache has synced (within a minute: a Role that may not list Secrets fails it).
func (t *term) teamSecretsOnce(ctx context.Context) ([]TeamSecretPlan, error) {
	if t.teams == nil {
		return nil, nil
	}
	if !waitForCache(ctx, t.teams.synced) {
		return nil, errors.New("team oauth secrets: the Secret cache did not sync (may this service list and watch Secrets?)")
	}
	_, done, err := t.syncTeamSecrets(ctx)
	return done, err
}

// wantedTeamSecrets returns, per team with credentials and a deployed job, its Secret; nil
// for a team whose client secret this keyring cannot open (its Secret is left as it is).
func (t *term) wantedTeamSecrets(ctx context.Context) (map[string]*corev1.Secret, error) {
	creds, err := t.s.db.DeliveredTeamOAuth(ctx)
	if err != nil {
		return nil, err
	}
	want := make(map[string]*corev1.Secret, len(creds))
	for _, o := range creds {
		secret, err := t.teams.keys.Open(secrets.TeamOwner(o.Team), o.Secret)
		if err != nil {
			t.s.log.WarnContext(ctx, "team_oauth_unopened", "team", o.Team, "error", err,
				"detail", "its Secret is left as it is; check --secrets-key-file holds the key of the credentials")
			want[o.Team] = nil
			continue
		}
		want[o.Team] = kube.TeamOAuthSecret(t.render.Namespace, t.render.Installation, o.Team, o.ClientID, string(secret))
	}
	return want, nil
}

// refersToTeamOAuth reports whether a CronJob of this installation (or an unlabelled
// managed one, to be safe) refers to team's Secret.
func (t *term) refersToTeamOAuth(team string) bool {
	cjs, err := t.lister.List(labels.SelectorFromSet(labels.Set{kube.LabelTeam: team}))
	if err != nil {
		return true // keep the Secret: the next look decides
	}
	for _, cj := range cjs {
		id, labelled := cj.Labels[kube.LabelInstallation]
		if managed(cj) && (!labelled || id == t.render.Installation) && kube.RefersToTeamOAuth(cj, team) {
			return true
		}
	}
	return false
}

// planTeamSecrets decides what to do with the Secret of every team of want and with every
// Secret of this installation among lives. It is pure.
func planTeamSecrets(want map[string]*corev1.Secret, lives []*corev1.Secret, installation string, referred func(team string) bool) []teamSecretPlan {
	byName := make(map[string]*corev1.Secret, len(lives))
	for _, s := range lives {
		byName[s.Name] = s
	}
	var plans []teamSecretPlan
	for _, team := range slices.Sorted(maps.Keys(want)) {
		name := kube.TeamOAuthSecretName(team)
		live, w := byName[name], want[team]
		delete(byName, name)
		p := teamSecretPlan{Team: team, Name: name, Live: live, Want: w, Action: ActionUnchanged, Reason: "up to date"}
		switch {
		case live != nil && live.Labels[kube.LabelInstallation] != installation:
			p.Action, p.Reason = ActionConflict, "a team OAuth Secret of another datajobs installation has this name; it is left alone"
		case w == nil:
			p.Action, p.Reason = ActionKeep, "the team's client secret cannot be opened with this keyring; the Secret is left as it is"
		case live == nil:
			p.Action, p.Reason = ActionCreate, "the team has OAuth credentials and a deployed job"
		case live.DeletionTimestamp != nil:
			p.Action, p.Reason, p.again = ActionWait, "the Secret is being deleted; create it again once it is gone", true
		case !secretMatches(live, w):
			p.Action, p.Reason = ActionUpdate, "differs from the team's credentials (they changed, or the Secret was edited outside datajobs)"
		}
		plans = append(plans, p)
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		live := byName[name]
		if live.Labels[kube.LabelInstallation] != installation || live.DeletionTimestamp != nil {
			continue // another installation's, or already going
		}
		p := teamSecretPlan{
			Team: live.Labels[kube.LabelTeam], Name: name, Live: live, Action: ActionDelete,
			Reason: "the team has no OAuth credentials or no deployed job",
		}
		if referred(p.Team) {
			p.Action, p.Reason, p.again = ActionKeep, "a CronJob still refers to it; deleted once none does", true
		}
		plans = append(plans, p)
	}
	return plans
}

// secretMatches is true when live holds want's data, type and labels.
func secretMatches(live, want *corev1.Secret) bool {
	return live.Type == want.Type && subsetOf(want.Labels, live.Labels) &&
		maps.EqualFunc(live.Data, want.Data, bytes.Equal)
}

// executeTeamSecret does one plan (in dry-run mode, logs it). A create that finds the name
// taken by a Secret outside the informer's view (not labelled as datajobs') is a conflict:
// reported and left alone, like a foreign CronJob.
func (t *term) executeTeamSecret(ctx context.Context, p teamSecretPlan) error {
	log := t.s.log.With("team", p.Team, "secret", p.Name, "action", p.Action, "reason", p.Reason)
	if !t.writeDue(ctx, log, "team_oauth_secret", p.Action) {
		if p.Action == ActionConflict {
			t.s.metrics.teamSecret(p.Action, nil)
		}
		return nil
	}
	var err error
	switch p.Action {
	case ActionCreate:
		err = t.s.secrets.Create(ctx, p.Want)
		if apierrors.IsAlreadyExists(err) {
			p.Action, p.Reason = ActionConflict, "a Secret not managed by datajobs has this name; it is left alone"
			t.s.log.WarnContext(ctx, "team_oauth_secret_conflict", "team", p.Team, "secret", p.Name, "action", p.Action, "reason", p.Reason)
			t.s.metrics.teamSecret(p.Action, nil)
			return nil
		}
	case ActionUpdate:
		err = t.s.secrets.Update(ctx, p.Live, p.Want)
	case ActionDelete:
		err = t.s.secrets.Delete(ctx, p.Live)
	}
	t.s.metrics.teamSecret(p.Action, err)
	return logWrite(ctx, log, "team_oauth_secret", err, string(p.Action)+" team oauth secret")
}
