package trigger

import (
	"encoding/json"
	"net/url"
	"strings"
)

// ObjectEvent is an object that landed in a bucket, as an S3 event notification's record
// names it.
type ObjectEvent struct {
	Bucket, Key string
}

// s3Notification is the part of an S3 event-notification body that is read (AWS S3 and the
// S3-compatible stores, MinIO among them, send the same shape).
type s3Notification struct {
	Records []struct {
		EventName string `json:"eventName"`
		S3        struct {
			Bucket struct {
				Name string `json:"name"`
			} `json:"bucket"`
			Object struct {
				Key string `json:"key"`
			} `json:"object"`
		} `json:"s3"`
	} `json:"Records"`
}

// ParseObjects reads the objects of an S3 event-notification body that match on's bucket
// and prefix, in the body's order. ok is false when the body is not such a notification.
// S3 sends keys URL-encoded (a space as '+'); they are decoded.
func ParseObjects(on On, body []byte) (out []ObjectEvent, ok bool) {
	var n s3Notification
	if err := json.Unmarshal(body, &n); err != nil || n.Records == nil {
		return nil, false
	}
	for _, r := range n.Records {
		key, err := url.QueryUnescape(r.S3.Object.Key)
		if err != nil {
			key = r.S3.Object.Key
		}
		if r.S3.Bucket.Name != on.Bucket || !strings.HasPrefix(key, on.Prefix) || key == "" {
			continue
		}
		if r.EventName != "" && !strings.HasPrefix(r.EventName, "ObjectCreated:") && !strings.HasPrefix(r.EventName, "s3:ObjectCreated:") {
			continue // a delete or a restore is not an object landing
		}
		out = append(out, ObjectEvent{Bucket: r.S3.Bucket.Name, Key: key})
	}
	return out, true
}
