package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A placement that leaves a team's key (a profile's node selector or tolerations changed,
// a grant revoked, a profile deleted) stays in it for a grace period (docs/profiles.md "A
// placement change"): the Jobs made before the change keep the old placement in their pod
// template, a CronJob not re-rendered yet makes one more such Job, and the policy would
// refuse every pod of them, so runs a user asked for would never start. The line stays
// admitted until every such Job has ended, and its retirement time is kept in the
// ConfigMap itself, so that a new leader (or a `sync --once`) continues the same clock.
//
// Only lines datajobs wrote are kept so: AnnotationPlacementsDigest holds the digest of the
// data as datajobs last wrote it, and a line found in data that does not match it (an edit
// by hand) is retired only if it already carried a retirement time. A hand-added line is
// thus still reverted at once, and a hand-removed retired line (to end its grace early)
// is not put back.
const (
	// AnnotationRetiredPlacements holds, as JSON, the retirement time (RFC 3339, UTC) of
	// each line still admitted after it left its key, by "<key>:<line digest>"
	// (placementID). The policy does not read it.
	AnnotationRetiredPlacements = "datajobs.io/retired-placements"
	// AnnotationPlacementsDigest is the digest of the data datajobs wrote (placementsDigest).
	AnnotationPlacementsDigest = "datajobs.io/placements-digest"
)

// placementAnnotations are the annotations of the placements' ConfigMap that datajobs
// owns: an update sets or removes them, and leaves the others alone.
var placementAnnotations = []string{AnnotationRetiredPlacements, AnnotationPlacementsDigest}

// placementID names line under key in AnnotationRetiredPlacements: a line may be
// hundreds of bytes, and annotations share 256 KiB.
func placementID(key, line string) string {
	sum := sha256.Sum256([]byte(line))
	return key + ":" + hex.EncodeToString(sum[:8])
}

// placementsDigest is the digest of data, independent of the map's order.
func placementsDigest(data map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		h.Write([]byte(k + "\x00" + data[k] + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// RetainPlacements returns want (the projection of the profiles, ProfilesConfigMap) with
// the lines of live that left it less than grace before now kept under their keys, each
// with its retirement time: the time recorded in live, or now for a line that leaves with
// this call. A line granted again loses its time; one retired grace ago or more is
// dropped. It also returns when the first kept line expires (zero: none kept), when the
// ConfigMap must be planned again. live nil (no ConfigMap yet) or grace <= 0 keeps
// nothing. It is pure.
func RetainPlacements(want, live *corev1.ConfigMap, now time.Time, grace time.Duration) (*corev1.ConfigMap, time.Time) {
	out := want.DeepCopy()
	var next time.Time
	if live != nil && grace > 0 {
		retired := retainedLines(want.Data, live, now, grace)
		marks := make(map[string]string, len(retired))
		for id, r := range retired {
			lines := []string{r.line}
			if out.Data[r.key] != "" {
				lines = append(strings.Split(out.Data[r.key], "\n"), r.line)
			}
			slices.Sort(lines)
			if out.Data == nil {
				out.Data = map[string]string{}
			}
			out.Data[r.key] = strings.Join(lines, "\n")
			marks[id] = r.at.UTC().Format(time.RFC3339)
			if expires := r.at.Add(grace); next.IsZero() || expires.Before(next) {
				next = expires
			}
		}
		if len(marks) > 0 {
			setAnnotation(out, AnnotationRetiredPlacements, string(mustMarshal(marks)))
		}
	}
	setAnnotation(out, AnnotationPlacementsDigest, placementsDigest(out.Data))
	return out, next
}

// retiredLine is a line kept after it left key, retired at at.
type retiredLine struct {
	key, line string
	at        time.Time
}

// retainedLines are the lines of live not in granted that are still within their grace,
// by placementID (see RetainPlacements).
func retainedLines(granted map[string]string, live *corev1.ConfigMap, now time.Time, grace time.Duration) map[string]retiredLine {
	var marks map[string]string
	if err := json.Unmarshal([]byte(live.Annotations[AnnotationRetiredPlacements]), &marks); err != nil {
		marks = nil // none, or edited beyond reading: no line keeps a time it cannot prove
	}
	ours := live.Annotations[AnnotationPlacementsDigest] == placementsDigest(live.Data)
	out := map[string]retiredLine{}
	for key, value := range live.Data {
		grantedLines := strings.Split(granted[key], "\n")
		for line := range strings.SplitSeq(value, "\n") {
			if line == "" || slices.Contains(grantedLines, line) {
				continue
			}
			id := placementID(key, line)
			at, err := time.Parse(time.RFC3339, marks[id])
			switch {
			case err == nil && at.After(now):
				at = now // a time from the future would hold the line for longer than grace
			case err != nil && ours:
				at = now // it leaves now
			case err != nil:
				continue // added by hand: reverted
			}
			if now.Sub(at) < grace {
				out[id] = retiredLine{key: key, line: line, at: at}
			}
		}
	}
	return out
}

// setAnnotation sets annotation k of cm to v.
func setAnnotation(cm *corev1.ConfigMap, k, v string) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[k] = v
}

// mustMarshal is v as JSON; v is plain data, which always marshals.
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("kube: marshal: " + err.Error())
	}
	return b
}
