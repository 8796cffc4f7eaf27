package webhook_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// received is what the Python receiver recorded of one request.
type received = testenv.WebhookRequest

// pythonReceiver starts the receiver that verifies signatures with the Standard Webhooks
// library from PyPI (testenv.StartWebhookReceiver, testdata/receiver.py).
func pythonReceiver(t *testing.T, secret string, statuses string) (string, func() []received) {
	t.Helper()
	return testenv.StartWebhookReceiver(t, secret, statuses)
}
