package trigger

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// The headers of an invocation.
const (
	TimestampHeader   = "X-Datajobs-Timestamp"
	SignatureHeader   = "X-Datajobs-Signature"
	IdempotencyHeader = "Idempotency-Key"
	// SkewAllowed is how far an invocation's timestamp may be from the server's clock.
	SkewAllowed = 5 * time.Minute
	// MaxIdempotencyKey bounds an Idempotency-Key, in bytes.
	MaxIdempotencyKey = 255
	// secretBytes is the length of a signing secret before its hex encoding.
	secretBytes = 32
)

// NewSecret returns a new signing secret: 32 random bytes, hex-encoded (the bytes of the
// hex string are the HMAC key, so that a shell's openssl can sign with it as printed).
func NewSecret() []byte {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return []byte(hex.EncodeToString(b))
}

// Sign returns the X-Datajobs-Signature of body sent at ts (unix seconds) with secret:
// "sha256=" and the lower-case hex HMAC-SHA256 of ts + "." + body.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks an invocation's timestamp and signature headers against secret and now.
// Every failure is 401 (job.KindUnauthenticated), saying which check failed but nothing
// of the expected signature.
func Verify(secret []byte, ts, sig string, body []byte, now time.Time) error {
	if ts == "" || sig == "" {
		return unsigned("The request lacks the " + TimestampHeader + " or " + SignatureHeader + " header.")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return unsigned(TimestampHeader + " is not a number of seconds since 1970.")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > SkewAllowed || d < -SkewAllowed {
		return unsigned(fmt.Sprintf("%s is more than %s away from the server's clock.", TimestampHeader, SkewAllowed))
	}
	want := Sign(secret, ts, body)
	if !hmac.Equal([]byte(want), []byte(strings.ToLower(sig))) {
		return unsigned(SignatureHeader + " is not the HMAC-SHA256 of the timestamp, a dot and the body, keyed by the trigger's signing secret.")
	}
	return nil
}

func unsigned(why string) *job.Error {
	e := job.Unauthenticated(why)
	e.What = "The trigger invocation is not signed right."
	e.Consequences = "No event was recorded and nothing was started."
	e.Countermeasures = "Sign timestamp + \".\" + body with HMAC-SHA256 keyed by the signing secret shown when the trigger was created, " +
		"send it as " + SignatureHeader + ": sha256=<hex> with " + TimestampHeader + ": <unix seconds>."
	return e
}
