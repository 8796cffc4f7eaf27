package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// secretPrefix marks a Standard Webhooks secret: "whsec_" and the key in base64.
const secretPrefix = "whsec_"

// GenerateSecret returns a new random signing key of 32 bytes (the specification asks for
// 24 to 64).
func GenerateSecret() ([]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate webhook secret: %w", err)
	}
	return b, nil
}

// EncodeSecret returns key as a person and a Standard Webhooks library take it:
// "whsec_<base64>".
func EncodeSecret(key []byte) string {
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Sign returns the webhook-signature header of body sent as message id at ts (Unix
// seconds): "v1," and the base64 HMAC-SHA256 of "id.ts.body".
func Sign(key []byte, id string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// standardBody is the Standard Webhooks payload shape.
type standardBody struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// slackBody is a Slack incoming-webhook payload: text for notifications and clients
// without blocks, and one section block with the same text.
type slackBody struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type string    `json:"type"`
	Text slackText `json:"text"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Slack's limits: a section's text holds at most 3,000 characters; the message text is
// kept to the same so that both say the same.
const slackTextLimit = 3000

// encode renders m in e's format.
func encode(e Endpoint, m Message) ([]byte, error) {
	if m.ID == "" {
		return nil, errors.New("the message has no id")
	}
	switch e.Format {
	case FormatStandard, "":
		if len(e.Secret) == 0 {
			return nil, errors.New("a standard webhook needs a signing secret")
		}
		data := m.Payload
		if len(data) == 0 {
			data = json.RawMessage("{}")
		}
		return json.Marshal(standardBody{
			Type:      m.Type,
			Timestamp: m.Timestamp.UTC().Format(time.RFC3339Nano),
			Data:      data,
		})
	case FormatSlack:
		text := truncate(slackEscape(m.Text), slackTextLimit)
		return json.Marshal(slackBody{
			Text:   text,
			Blocks: []slackBlock{{Type: "section", Text: slackText{Type: "mrkdwn", Text: text}}},
		})
	default:
		return nil, fmt.Errorf("unknown webhook format %q", e.Format)
	}
}

// slackEscape escapes the three characters Slack reads as control sequences, so that text
// from a job (a message, a log line) cannot write "<!channel>" and page a whole channel.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// truncate cuts s to at most n characters, with "…" as the last when it cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
