package synchronizer

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

// The profiles' placements (issue 43, docs/profiles.md "The admission policy"). The
// chart's admission policy admits a team's pod only with the node selector and
// tolerations of a profile granted to the team, read from one ConfigMap of the jobs
// namespace (kube.ProfilesConfigMap). The synchronizer keeps it the projection of the
// profiles table as it keeps CronJobs, plus for Config.PlacementGrace the lines that left
// it (kube.RetainPlacements: the Jobs made before a change keep the old placement, and
// their pods must still start): a reconcile (key placementsKey) reads every profile, plans
// against the informer's copy of that one ConfigMap (planPlacements, pure) and does the
// plan through the fenced writer, and is queued again when the first kept line expires. It runs on every profile NOTIFY (a create, an update
// of its placement or grants, a delete), on any event of the ConfigMap (a hand edit or a
// delete is repaired), at the start of a term and after each full pass. It is never
// deleted: the default profile always exists, and without the ConfigMap the policy admits
// no team's pod. One of the name that is not this installation's is left alone, reported.

// placementsKey is the queue item of the placements' reconcile; it cannot be a job name.
const placementsKey = "#profile-placements"

// placements is a term's view of the placements' ConfigMap.
type placements struct {
	lister corelisters.ConfigMapNamespaceLister
	synced cache.InformerSynced
}

// placementsPlan is what a reconcile decided for the placements' ConfigMap.
type placementsPlan struct {
	Action     Action
	Reason     string
	Live, Want *corev1.ConfigMap
	// again asks for another look soon: the plan waits for a deletion to finish.
	again bool
	// expires is when the first line kept past its grant expires (zero: none is kept);
	// the ConfigMap is planned again then, to drop it.
	expires time.Time
}

// startPlacements starts the informer on the placements' ConfigMap (selected by name, of
// any installation: the plan must see another's to leave it alone; its first list queues
// the first reconcile) and returns its stop. Like the team Secrets' it does not wait for the cache:
// a Role that may not read ConfigMaps does not stop CronJobs from syncing.
func (t *term) startPlacements(ctx context.Context) func() {
	factory := informers.NewSharedInformerFactoryWithOptions(t.s.client, 0, informers.WithNamespace(t.render.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = kube.ProfilesConfigMapSelector().String() }))
	informer := factory.Core().V1().ConfigMaps()
	queue := func(any) { t.queue.Add(placementsKey) }
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: queue, UpdateFunc: func(_, obj any) { queue(obj) }, DeleteFunc: queue}); err != nil {
		t.s.log.WarnContext(ctx, "profile_placements_unwatched", "error", err)
		return func() {}
	}
	t.placements = &placements{lister: informer.Lister().ConfigMaps(t.render.Namespace), synced: informer.Informer().HasSynced}
	return startInformers(ctx, factory)
}

// listenProfiles queues the placements' reconcile on every profile NOTIFY and
// (re)connection, which may have missed some.
func (t *term) listenProfiles(ctx context.Context) {
	again := func() { t.queue.Add(placementsKey) }
	controller.Listen(ctx, t.s.db, store.ProfilesChannel, t.s.cfg.RetryBase, t.s.log, func(bool) { again() }, func(string) { again() })
}

// reconcilePlacements plans the placements' ConfigMap from every profile and does the plan.
func (t *term) reconcilePlacements(ctx context.Context) (controller.Result, error) {
	if t.placements == nil {
		return controller.Result{}, nil
	}
	if !t.placements.synced() {
		return controller.Result{RequeueAfter: time.Second}, nil
	}
	records, err := t.s.db.ListProfiles(ctx)
	if err != nil {
		return controller.Result{}, err
	}
	profiles := make([]job.Profile, len(records))
	for i, r := range records {
		profiles[i] = r.Profile
	}
	live, err := t.placements.lister.Get(kube.ProfilesConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return controller.Result{}, fmt.Errorf("read configmap %s from cache: %w", kube.ProfilesConfigMapName, err)
	}
	now := t.s.cfg.Now()
	p := planPlacements(kube.ProfilesConfigMap(t.render, profiles), live, t.render.Installation, now, t.s.cfg.PlacementGrace)
	res := controller.Result{}
	switch {
	case p.again:
		res.RequeueAfter = 2 * time.Second
	case !p.expires.IsZero():
		// A second late: a line expires once grace has passed, not at the instant.
		res.RequeueAfter = p.expires.Sub(now) + time.Second
	}
	return res, t.executePlacements(ctx, p)
}

// placementsOnce is the placements' reconcile of a single pass (RunOnce), once the
// informer's cache has synced.
func (t *term) placementsOnce(ctx context.Context) error {
	if t.placements == nil {
		return nil
	}
	if !waitForCache(ctx, t.placements.synced) {
		return errors.New("profile placements: the ConfigMap cache did not sync (may this service list and watch the ConfigMap " + kube.ProfilesConfigMapName + "?)")
	}
	_, err := t.reconcilePlacements(ctx)
	return err
}

// waitForCache waits for an informer of a single pass (RunOnce) to sync, a minute at most:
// a Role that may not list or watch what it reads never lets it.
func waitForCache(ctx context.Context, synced cache.InformerSynced) bool {
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return cache.WaitForCacheSync(waitCtx.Done(), synced)
}

// planPlacements decides what to do with the placements' ConfigMap: granted is the
// projection of the profiles, live the informer's (nil: none); the ConfigMap wanted is
// granted with the lines of live that left it less than grace before now
// (kube.RetainPlacements). It is pure.
func planPlacements(granted, live *corev1.ConfigMap, installation string, now time.Time, grace time.Duration) placementsPlan {
	p := placementsPlan{Live: live, Want: granted, Action: ActionUnchanged, Reason: "up to date"}
	if live != nil && live.Labels[kube.LabelInstallation] == installation {
		p.Want, p.expires = kube.RetainPlacements(granted, live, now, grace)
	}
	switch {
	case live == nil:
		p.Action, p.Reason = ActionCreate, "the admission policy reads the profiles' placements from it"
	case live.Labels[kube.LabelInstallation] != installation:
		p.Action, p.Reason = ActionConflict, "a ConfigMap not of this datajobs installation has the name; it is left alone"
	case live.DeletionTimestamp != nil:
		p.Action, p.Reason, p.again = ActionWait, "the ConfigMap is being deleted; create it again once it is gone", true
	case !kube.ProfilesConfigMapMatches(live, p.Want):
		p.Action, p.Reason = ActionUpdate, "differs from the profiles and the placements still in their grace (one changed, a grace ended, or the ConfigMap was edited outside datajobs)"
	}
	return p
}

// executePlacements does the plan p (in dry-run mode, logs it). A failed write is
// retried with the queue's backoff (a create that finds the name taken, by a ConfigMap
// the informer has not shown yet, is planned again from it).
func (t *term) executePlacements(ctx context.Context, p placementsPlan) error {
	log := t.s.log.With("configmap", kube.ProfilesConfigMapName, "action", p.Action, "reason", p.Reason)
	if !t.writeDue(ctx, log, "profile_placements", p.Action) {
		return nil
	}
	var err error
	switch p.Action {
	case ActionCreate:
		err = t.s.writer.CreateConfigMap(ctx, p.Want)
	case ActionUpdate:
		err = t.s.writer.UpdateConfigMap(ctx, p.Live, p.Want)
	}
	return logWrite(ctx, log, "profile_placements", err, "profile placements")
}
