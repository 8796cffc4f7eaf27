package kube

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/datajobs/datajobs/internal/job"
)

// AnnotationRevision is the database revision of the job the CronJob was rendered from
// (job.Job.Revision). It is hashed like every rendered field: a CronJob re-rendered from
// another revision is written again, and so carries the revision of its row. The
// synchronizer's restore guard reads it: a live CronJob newer than the database means the
// database was restored from an older backup.
const AnnotationRevision = "datajobs.io/revision"

// stampRevision writes j's revision on a rendered CronJob (none for a job read without one).
func stampRevision(cj *batchv1.CronJob, j job.Job) {
	if j.Revision > 0 {
		cj.Annotations[AnnotationRevision] = strconv.FormatInt(j.Revision, 10)
	}
}

// Revision is the revision a live CronJob carries, and whether it carries a valid one
// (CronJobs rendered before migration 0015, or imported, carry none).
func Revision(cj *batchv1.CronJob) (int64, bool) {
	v, ok := cj.Annotations[AnnotationRevision]
	if !ok {
		return 0, false
	}
	rev, err := strconv.ParseInt(v, 10, 64)
	return rev, err == nil && rev > 0
}
