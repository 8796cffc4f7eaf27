package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// pace holds a sources transfer to a minimum rate: before each read of the body or write
// of the answer, the connection's deadline is set to the moment the transfer would fall
// below minRate bytes per second (counted after a grace period for the start), capped by
// the transfer timeout. A client that stalls, or trickles a byte now and then, loses its
// connection and its slot within seconds, rather than holding the slot for the whole
// --transfer-timeout: a few slow clients cannot keep everyone else out.
type pace struct {
	rc    *http.ResponseController
	start time.Time
	end   time.Time // the transfer timeout
	grace time.Duration
	rate  int64 // bytes per second
	done  int64 // bytes moved so far
	slow  bool  // the last deadline set was the pace's, not the transfer timeout
}

// paceChunk is the most a single read or write may count on: a large buffer does not buy
// a long deadline.
const paceChunk = 64 << 10

func (a *api) newPace(w http.ResponseWriter) *pace {
	now := time.Now()
	return &pace{
		rc: http.NewResponseController(w), start: now, end: now.Add(a.cfg.TransferTimeout),
		grace: a.cfg.MinTransferGrace, rate: a.cfg.MinTransferRate,
	}
}

// due is when the next n bytes must have moved.
func (p *pace) due(n int) time.Time {
	if p.rate <= 0 {
		return p.end
	}
	at := p.start.Add(p.grace + time.Duration(float64(p.done+int64(min(n, paceChunk)))/float64(p.rate)*float64(time.Second)))
	p.slow = at.Before(p.end)
	if !p.slow {
		return p.end
	}
	return at
}

// tooSlow turns a deadline the pace set, or the transfer timeout, into the error the
// client is told: a 408 (the client was too slow), not a 400 (its bytes were fine).
func (p *pace) tooSlow(err error, what string) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	why := fmt.Sprintf("It fell below %d bytes per second (--min-transfer-rate) after its first %s.", p.rate, p.grace)
	if !p.slow {
		why = fmt.Sprintf("It took longer than %s (--transfer-timeout).", p.end.Sub(p.start))
	}
	return &job.Error{
		Kind: job.KindRequestTimeout, What: fmt.Sprintf("The %s was too slow.", what), Why: why,
		Consequences:    "The request was not processed and nothing was changed.",
		Countermeasures: "Retry over a faster connection.",
		Err:             err,
	}
}

// reader paces the request body.
func (p *pace) reader(body io.ReadCloser) io.ReadCloser { return &pacedBody{body, p} }

type pacedBody struct {
	io.ReadCloser
	p *pace
}

func (b *pacedBody) Read(buf []byte) (int, error) {
	_ = b.p.rc.SetReadDeadline(b.p.due(len(buf)))
	n, err := b.ReadCloser.Read(buf)
	b.p.done += int64(n)
	return n, b.p.tooSlow(err, "upload")
}

// writer paces the answer, in chunks of at most paceChunk.
func (p *pace) writer(w io.Writer) io.Writer { return &pacedWriter{w, p} }

type pacedWriter struct {
	w io.Writer
	p *pace
}

func (pw *pacedWriter) Write(buf []byte) (int, error) {
	written := 0
	for len(buf) > 0 {
		chunk := buf[:min(len(buf), paceChunk)]
		_ = pw.p.rc.SetWriteDeadline(pw.p.due(len(chunk)))
		n, err := pw.w.Write(chunk)
		written += n
		pw.p.done += int64(n)
		if err != nil {
			return written, pw.p.tooSlow(err, "download")
		}
		buf = buf[n:]
	}
	return written, nil
}
