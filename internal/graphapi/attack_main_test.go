package graphapi_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestMainByteAndTokenLimits(t *testing.T) {
	e := newEnv(t)
	q := "{ jobs { totalItems } }\n# " + strings.Repeat("x", 9<<10)
	r := e.query(q, "")
	if r.status != http.StatusBadRequest {
		t.Errorf("9 KiB query: status %d (want 400)", r.status)
	}
	r = e.query("{"+strings.Repeat(" a", 3000)+" }", "")
	if !strings.Contains(string(r.body), "token limit") {
		t.Errorf("no token limit: %s", r.body[:min(200, len(r.body))])
	}
}
