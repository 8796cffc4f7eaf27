package kube

import (
	"net/http"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// stoppableWatchLists wraps a client's transport so that an informer whose apiserver
// refuses connections stops when it is told to. client-go (0.37, Reflector.watchList)
// retries a refused watch-list stream (an informer's initial list, sent as a watch with
// sendInitialEvents) after a backoff of up to 30 s that does not look at the informer's
// stop channel: a term's informers started while their apiserver was down took up to 30 s
// to stop, and a shard's step-down with them. Told that such a stream failed otherwise
// than by a refusal, the reflector falls back to its plain list, which is refused too and
// retried by its backoff that does stop. Other requests are untouched.
func stoppableWatchLists(next http.RoundTripper) http.RoundTripper {
	return watchListTransport{next: next}
}

type watchListTransport struct{ next http.RoundTripper }

func (t watchListTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil && utilnet.IsConnectionRefused(err) && req.URL.Query().Get("sendInitialEvents") == "true" {
		return nil, refusedWatchList{err: err}
	}
	return resp, err
}

// refusedWatchList is a refused watch-list stream. It does not unwrap to the refusal, on
// purpose: the reflector's test for a refusal (utilnet.IsConnectionRefused) must not find it.
type refusedWatchList struct{ err error }

func (e refusedWatchList) Error() string { return "watch-list stream: " + e.err.Error() }
