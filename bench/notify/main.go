// Command notify benchmarks the notifications outbox (issue 25, docs/notifications.md)
// against a real PostgreSQL, kube-apiserver and Mailpit (the environment of
// `hack/with-env.sh`, plus a Mailpit of its own):
//
//   - deploys: -jobs jobs, each with contacts of its own, are deployed and a synchronizer
//     pass applies them: the outbox rows it writes per deploy (expected 1: one event);
//   - no-op: a second pass over the synced fleet: the outbox rows it writes (expected 0);
//   - outcomes: one execution of each job finishes at once (one tracker statement, as its
//     group commit writes them), with the dispatcher running at its default settings: the
//     outbox rows per outcome (expected 1), and the time from the statement's commit to
//     each mail accepted by Mailpit (its receive time; p50, p99, max).
//
// It reads DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG:
//
//	bash hack/with-env.sh .cache/bin/datajobs go run ./bench/notify
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/datajobs/datajobs/bench/internal/benchenv"
	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/notify/email"
	"github.com/datajobs/datajobs/internal/notify/webhook"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/tracker"
)

const team = "bench"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/notify:", err)
		os.Exit(1)
	}
}

type env struct {
	*benchenv.Env
	mail *devenv.Mailpit
	log  *slog.Logger
}

func run() error {
	jobs := flag.Int("jobs", 1000, "jobs deployed, and executions finishing at once (one per job)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	admin, kubeconfig := os.Getenv("DATAJOBS_TEST_DATABASE_URL"), os.Getenv("DATAJOBS_TEST_KUBECONFIG")
	if admin == "" || kubeconfig == "" {
		return errors.New("DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG are required (run under hack/with-env.sh)")
	}
	e, cleanup, err := setup(ctx, admin, kubeconfig)
	defer cleanup()
	if err != nil {
		return err
	}
	names, err := e.createAndDeploy(ctx, *jobs)
	if err != nil {
		return err
	}

	// Deploys, then a no-op pass.
	s := synchronizer.New(synchronizer.Config{
		Render:   kube.RenderConfig{Namespace: e.NS, ImageRegistry: "registry.local/datajobs"},
		Settings: controller.Settings{Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)},
	}, e.DB, e.Client, nil)
	before := e.outboxRows(ctx)
	if rep, err := s.RunOnce(ctx, e.Epoch); err != nil || len(rep.Errors) > 0 {
		return fmt.Errorf("sync the deploys: %v %w", rep.Errors, err)
	}
	deployed := e.outboxRows(ctx)
	fmt.Printf("deploys: %d jobs applied by one pass: %s\n", len(names), deployed.minus(before).per(len(names), "deploy"))
	if rep, err := s.RunOnce(ctx, e.Epoch); err != nil || len(rep.Errors) > 0 {
		return fmt.Errorf("the no-op pass: %v %w", rep.Errors, err)
	}
	noop := e.outboxRows(ctx)
	fmt.Printf("no-op pass over %d synced jobs: %s\n", len(names), noop.minus(deployed).per(len(names), "job"))

	// The dispatcher, at its default settings, delivers the deploy mails first (untimed).
	stop, err := e.dispatch(ctx)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := e.waitMails(ctx, len(names)); err != nil {
		return fmt.Errorf("the deploy mails: %w", err)
	}

	// Every job's run finishes at once.
	noop = e.outboxRows(ctx) // with the deploy mails' deliveries
	updates := make([]job.ExecutionUpdate, len(names))
	end := time.Now().UTC().Truncate(time.Second)
	start := end.Add(-time.Minute)
	for i, n := range names {
		updates[i] = job.ExecutionUpdate{
			ID: n.name + "-run-1", JobName: n.name, JobUID: n.uid, Type: job.ExecScheduled, OpID: n.name + "-run-1",
			Status: job.ExecSucceeded, StartTime: &start, EndTime: &end, Log: &job.StoredLog{Pending: true},
		}
	}
	if _, err := e.DB.RecordExecutions(ctx, job.Fence{Epoch: e.Epoch}, updates); err != nil {
		return err
	}
	committed := time.Now()
	// The tracker's log queue then keeps each log (its events wait for it, store.LogTailWait),
	// with its default workers; the pod reads it would do first are not part of this.
	if err := e.keepLogs(ctx, names); err != nil {
		return err
	}
	mails, err := e.waitMails(ctx, 2*len(names))
	if err != nil {
		return fmt.Errorf("the outcome mails: %w", err)
	}
	fmt.Printf("outcomes: %d executions finished in one tracker statement, then delivered: %s\n",
		len(names), e.outboxRows(ctx).minus(noop).per(len(names), "outcome"))
	var lat []time.Duration
	for _, m := range mails {
		if strings.Contains(m.Subject, "succeeded") && strings.Contains(m.Subject, "execution") {
			lat = append(lat, m.Created.Sub(committed))
		}
	}
	if len(lat) != len(names) {
		return fmt.Errorf("%d outcome mails, want %d", len(lat), len(names))
	}
	p := stats.Percentiles(lat, 50, 99, 100)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Printf("outcome committed -> mail accepted by Mailpit, %d at once: first %s, p50 %s, p99 %s, max %s\n",
		len(lat), r(slices.Min(lat)), r(p[0]), r(p[1]), r(p[2]))
	return nil
}

type named struct{ name, uid string }

// keepLogs keeps every job's run log as the tracker's log queue does after the final
// statuses, tracker.DefaultLogWorkers at a time.
func (e *env) keepLogs(ctx context.Context, names []named) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(tracker.DefaultLogWorkers)
	for _, n := range names {
		g.Go(func() error {
			_, err := e.DB.StoreExecutionLog(ctx, job.Fence{Epoch: e.Epoch}, n.name+"-run-1", job.StoredLog{Logs: "done\n"})
			return err
		})
	}
	return g.Wait()
}

// createAndDeploy creates n jobs, each with contacts of its own (so that no recipient's
// rate limit is in play) and execution notifications on, and deploys each, 8 at a time.
func (e *env) createAndDeploy(ctx context.Context, n int) ([]named, error) {
	out := make([]named, n)
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	version := "v1"
	for range 8 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("bench-job-%05d", i)
				contact := []string{name + "@example.com"}
				j, err := e.Svc.CreateJob(ctx, team, job.Job{
					Name: name, Team: team, Schedule: "0 3 1 1 *", EnableExecutionNotifications: true,
					Contacts: job.Contacts{NotifiedOnJobDeploy: contact, NotifiedOnJobSuccess: contact},
				})
				if err == nil {
					_, err = e.Svc.Deploy(ctx, team, name, job.DeploymentChange{JobVersion: &version}, "bench")
				}
				if err != nil {
					errs <- err
					continue
				}
				out[i] = named{name, j.UID}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return out, nil
}

// dispatch runs the leader's dispatcher, at its default settings, until stop.
func (e *env) dispatch(ctx context.Context) (func(), error) {
	sender, err := email.New(email.Config{URL: "smtp://" + e.mail.SMTPAddr, From: "datajobs@example.com"})
	if err != nil {
		return nil, err
	}
	// As the server wires it (internal/server/notify.go): e-mail, and the webhook channel
	// whose Targets reads each team's webhooks.
	hooks := &notify.Webhooks{Sender: webhook.NewSender(webhook.Config{}), Store: e.DB}
	d := notify.New(notify.Config{
		Channels: map[string]notify.Channel{notify.ChannelEmail: sender, notify.ChannelWebhook: hooks},
		Targets:  hooks.Targets, Settings: controller.Settings{Logger: e.log},
	}, e.DB)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = maintenance.New(maintenance.Config{Logger: e.log}, maintenance.Dispatch(d)).Run(ctx, e.Epoch)
	}()
	return func() { cancel(); <-done }, nil
}

// rows are the row counts of the outbox's two tables.
type rows struct{ events, deliveries int }

func (r rows) minus(o rows) rows { return rows{r.events - o.events, r.deliveries - o.deliveries} }

func (r rows) per(n int, what string) string {
	return fmt.Sprintf("%d event rows (%.3f per %s), %d delivery rows (%.3f per %s)",
		r.events, float64(r.events)/float64(n), what, r.deliveries, float64(r.deliveries)/float64(n), what)
}

// outboxRows counts the rows of both outbox tables.
func (e *env) outboxRows(ctx context.Context) rows {
	var r rows
	if err := e.Conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM notification_event), (SELECT count(*) FROM notification_delivery)`).Scan(&r.events, &r.deliveries); err != nil {
		panic(err)
	}
	return r
}

// mailpitMessage is a message of Mailpit's list.
type mailpitMessage struct {
	Subject string    `json:"Subject"`
	Created time.Time `json:"Created"`
}

// waitMails polls Mailpit until it holds want messages (10 minutes at most), and returns
// them.
func (e *env) waitMails(ctx context.Context, want int) ([]mailpitMessage, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var list struct {
			Total    int              `json:"total"`
			Messages []mailpitMessage `json:"messages"`
		}
		if err := getJSON(ctx, "http://"+e.mail.HTTPAddr+"/api/v1/messages?limit=1", &list); err != nil {
			return nil, err
		}
		if list.Total >= want {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after 10 minutes Mailpit holds %d messages, want %d", list.Total, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var out []mailpitMessage
	for start := 0; start < want; start += 1000 {
		var page struct {
			Messages []mailpitMessage `json:"messages"`
		}
		if err := getJSON(ctx, fmt.Sprintf("http://%s/api/v1/messages?start=%d&limit=1000", e.mail.HTTPAddr, start), &page); err != nil {
			return nil, err
		}
		out = append(out, page.Messages...)
	}
	return out, nil
}

func getJSON(ctx context.Context, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(into)
}

func setup(ctx context.Context, admin, kubeconfig string) (*env, func(), error) {
	be, err := benchenv.Open(ctx, benchenv.Config{Admin: admin, Kubeconfig: kubeconfig, Prefix: "bench-notify"})
	if err != nil {
		return nil, func() {}, err
	}
	e := &env{Env: be, log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	cleanup := be.Close
	root, err := devenv.RepoRoot()
	if err != nil {
		return nil, cleanup, err
	}
	bin, err := devenv.EnsureMailpitBinary(ctx, root, os.Stderr)
	if err != nil {
		return nil, cleanup, err
	}
	dir, err := os.MkdirTemp("", "bench-notify-mailpit-")
	if err != nil {
		return nil, cleanup, err
	}
	e.OnClose(func() { _ = os.RemoveAll(dir) })
	if e.mail, err = devenv.StartMailpit(ctx, devenv.MailpitConfig{Bin: bin, Dir: dir, LogPath: dir + "/mailpit.log"}); err != nil {
		return nil, cleanup, err
	}
	e.OnClose(func() { _ = e.mail.Stop() })
	return e, cleanup, nil
}
