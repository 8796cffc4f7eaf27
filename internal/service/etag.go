package service

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// JobETag is the entity tag of a job's configuration, as GET .../jobs/{job} sends it in
// ETag and PUT takes it in If-Match: the job's generation, then a hash of everything the
// PUT replaces (the description too, which does not bump the generation) and of the job's
// UID, so that a job deleted and created again under its name has another tag.
func JobETag(j job.Job) string {
	j.CreatedAt, j.UpdatedAt = time.Time{}, time.Time{}
	b, err := json.Marshal(j) // plain strings, numbers and lists: never fails
	if err != nil {
		panic(fmt.Sprintf("encode job %s for its etag: %v", j.Name, err))
	}
	return fmt.Sprintf(`"%d.%s"`, j.Generation, digest(b))
}

// PropertiesETag is the entity tag of a job's properties (the JSON object as stored).
func PropertiesETag(props []byte) string {
	return `"` + digest(props) + `"`
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// IfMatch is the value of a request's If-Match header: empty (no precondition: what VDK's
// clients send), "*" (the resource exists), or a list of entity tags. Entity tags compare
// strongly: a weak tag (W/"...") never matches, as RFC 9110 says for If-Match.
type IfMatch string

// check returns nil when the precondition holds for the current tag of what, else a
// PreconditionFailed error.
func (m IfMatch) check(what, current string) error {
	v := strings.TrimSpace(string(m))
	if v == "" || v == "*" {
		return nil
	}
	for tag := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(tag) == current {
			return nil
		}
	}
	return job.PreconditionFailed(what, current)
}
