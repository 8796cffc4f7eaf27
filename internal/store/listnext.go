package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// The sorts by a next run without sorting every job: the console's by the deployment's
// (job.FieldDeploymentNextRun) and GraphQL's by the job configuration's (job.FieldNextRun).
// The next run changes with time, so no column can hold it, but it is the same for every
// job of one schedule key (data_job_list.next_run_key, the deployment's schedule in its
// time zone while enabled, migration 0030; data_job.schedule). The list is therefore the groups of jobs
// per key in the order of their next runs (keys whose next runs are equal form one group;
// keys that never run, and '' for the jobs without a next run, the last group), each group
// by name, as ORDER BY next_run NULLS LAST, name has it. Knowing the jobs per key (kept in
// data_job_list_count for the deployment's key of an unfiltered list, else counted), the page is found among the
// groups without reading a row, and read from the groups it overlaps only, each along an
// index on (key, name). The next runs are computed once per distinct key.

// pagesByNextRunGroups reports whether r is listed by listByNextRun: sorted by a next run
// alone, with no condition on the configuration's next run.
func pagesByNextRunGroups(r job.ListRequest) bool {
	return len(r.Sort) == 1 && nextRunKeys[r.Sort[0].Field] != "" && r.Filter.NextRun == nil
}

// nextRunKeys are the columns of the schedules the next runs of a field are computed from:
// the deployment's (the console's) and the job configuration's (GraphQL's
// config.schedule.nextRunEpochSeconds, in UTC as VDK computes it).
var nextRunKeys = map[job.ListField]string{job.FieldDeploymentNextRun: "k.next_run_key", job.FieldNextRun: "j.schedule"}

// nextRunNeeds are the tables of r's filter and of its next-run key.
func nextRunNeeds(r job.ListRequest) listNeeds {
	n := needsOf(job.ListRequest{Filter: r.Filter}, listCount)
	n.job = n.job || r.Sort[0].Field == job.FieldNextRun
	n.key = n.key || r.Sort[0].Field == job.FieldDeploymentNextRun
	return n
}

// nextRunGroup is the jobs of the keys whose next run is next (or, the last group, that
// have none).
type nextRunGroup struct {
	keys []string
	next int64
	jobs int
}

// listByNextRun reads the groups and then the page, in one snapshot, so that
// the page is the rows the groups counted.
func (s *Store) listByNextRun(ctx context.Context, r job.ListRequest, nextRun NextRunFunc) (job.ListPage, error) {
	var page job.ListPage
	err := pgx.BeginTxFunc(ctx, s.reads(ctx), pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		sql, args := keyCountsSQL(r)
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		counts := map[string]int{}
		var (
			key  string
			jobs int
		)
		if _, err := pgx.ForEachRow(rows, []any{&key, &jobs}, func() error { counts[key] = jobs; return nil }); err != nil {
			return err
		}
		groups := groupByNextRun(counts, nextRun, r.Sort[0].Desc)
		page.Total = 0
		for _, g := range groups {
			page.Total += g.jobs
		}
		if !r.Count {
			page.Total = -1
		}
		sql, args, ok := nextRunPageSQL(r, groups)
		if !ok {
			return nil // past the last job
		}
		rows, err = tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		page.Jobs, err = scanPage(rows, r)
		return err
	})
	if err != nil {
		return job.ListPage{}, translate(fmt.Errorf("list jobs by next run: %w", err))
	}
	return page, nil
}

// keyCountsSQL counts the jobs r's filter lets through per next-run key: from
// data_job_list_count when the key is the deployment's and the filter selects whole teams
// (countedPerTeam), else by reading them.
func keyCountsSQL(r job.ListRequest) (string, []any) {
	n := nextRunNeeds(r)
	b := &sqlBuilder{base: n.base()}
	if r.Sort[0].Field == job.FieldDeploymentNextRun && countedPerTeam(r.Filter) {
		return "SELECT next_run_key, sum(jobs)::bigint FROM data_job_list_count c" + teamsWhere(b, r.Filter, "c.team") +
			"\nGROUP BY next_run_key HAVING sum(jobs) > 0", b.args
	}
	key := nextRunKeys[r.Sort[0].Field]
	sql := "SELECT " + key + ", count(*)" + listFrom(b, nil, n)
	if where := listWhere(b, r, listCount); len(where) > 0 {
		sql += "\nWHERE " + strings.Join(where, "\n  AND ")
	}
	return sql + "\nGROUP BY " + key, b.args
}

// groupByNextRun orders the keys by their next runs (latest first when desc), those that
// have none last, joining the keys of one next run into one group.
func groupByNextRun(counts map[string]int, nextRun NextRunFunc, desc bool) []nextRunGroup {
	byNext := map[int64]*nextRunGroup{}
	none := &nextRunGroup{}
	for key, jobs := range counts {
		g := none
		if next, ok := nextRun(key); ok && key != "" {
			if g = byNext[next]; g == nil {
				g = &nextRunGroup{next: next}
				byNext[next] = g
			}
		}
		g.keys, g.jobs = append(g.keys, key), g.jobs+jobs
	}
	groups := make([]nextRunGroup, 0, len(byNext)+1)
	for _, g := range byNext {
		groups = append(groups, *g)
	}
	slices.SortFunc(groups, func(a, b nextRunGroup) int {
		if desc {
			return cmp.Compare(b.next, a.next)
		}
		return cmp.Compare(a.next, b.next)
	})
	if none.jobs > 0 {
		groups = append(groups, *none)
	}
	for i := range groups {
		slices.Sort(groups[i].keys) // a stable statement for the same groups
	}
	return groups
}

// nextRunPageSQL is the page statement of r over groups: for each group the page overlaps,
// its part by name (one key: along the index; several: their jobs sorted), in the
// groups' order. False when the page starts past the last job.
func nextRunPageSQL(r job.ListRequest, groups []nextRunGroup) (string, []any, bool) {
	n := nextRunNeeds(r)
	b := &sqlBuilder{base: n.base()}
	from, key := listFrom(b, nil, n), nextRunKeys[r.Sort[0].Field]
	where := listWhere(b, r, listCount)
	var parts []string
	start, end := r.Offset, r.Offset+r.Limit
	pos := 0
	for i, g := range groups {
		gStart, gEnd := pos, pos+g.jobs
		pos = gEnd
		if gEnd <= start || gStart >= end {
			continue
		}
		offset, limit := max(start-gStart, 0), min(end, gEnd)-max(start, gStart)
		// One argument a group: an argument allocated and not used is a parameter
		// PostgreSQL cannot type (42P18, TestJobsListFollowsAJobWhoseDeploymentChanges
		// failed from 05:00 to 06:00 UTC, when its daily 06:00 and hourly jobs share a
		// next run and so a group).
		var cond string
		if len(g.keys) > 1 {
			cond = key + " = ANY(" + b.arg(g.keys) + "::text[])"
		} else {
			cond = key + " = " + b.arg(g.keys[0])
		}
		parts = append(parts, "(SELECT "+strconv.Itoa(i)+" AS g, "+b.col("name")+" AS name"+from+
			"\nWHERE "+strings.Join(append(slices.Clone(where), cond), "\n  AND ")+
			"\nORDER BY "+b.col("name")+" LIMIT "+b.arg(limit)+" OFFSET "+b.arg(offset)+")")
	}
	if len(parts) == 0 {
		return "", nil, false
	}
	names := "SELECT p.name FROM (" + strings.Join(parts, "\nUNION ALL\n") + ") p ORDER BY p.g, p.name"
	return pageSQL(r, names), b.args, true
}
