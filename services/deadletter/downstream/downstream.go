// Package downstream is a stand-in for the downstream system of record:
// the HTTP API the validator posts committed events to, served on loopback,
// which a person (or the demo) takes down and brings back to play an
// outage. `deadletter downstream --port 8080` serves it for `make run`.
//
// Like a real system of record it de-duplicates on the Idempotency-Key
// header and counts the keys it accepted more than once. It keeps no
// payloads and logs none.
package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/deadletter/deadletter/shared/envelope"
)

// Control paths: POST DownPath takes the stand-in down (every event is
// answered 503, DOWNSTREAM_UNAVAILABLE), POST UpPath brings it back, GET
// StatusPath answers a Status. Any other path is the downstream API.
const (
	DownPath   = "/down"
	UpPath     = "/up"
	StatusPath = "/status"
)

// Status is the stand-in's state, as GET /status answers it.
type Status struct {
	// Up is false while the stand-in answers 503.
	Up bool `json:"up"`
	// Accepted is the number of distinct idempotency keys accepted.
	Accepted int `json:"accepted"`
	// Doubles is the number of keys received again after acceptance
	// (a de-duplicating system of record absorbs them; the validator's
	// claims should make them rare).
	Doubles int `json:"doubles"`
	// Refused is the number of posts answered 503 while down.
	Refused int `json:"refused"`
}

// Standin is the stand-in downstream, an http.Handler.
type Standin struct {
	up       atomic.Bool
	refused  atomic.Int64
	mu       sync.Mutex
	accepted map[string]int
	// OnChange, when set, is called after /down or /up changed the state.
	OnChange func(up bool)
}

// New returns a stand-in, up or down.
func New(up bool) *Standin {
	s := &Standin{accepted: map[string]int{}}
	s.up.Store(up)
	return s
}

// SetUp brings the stand-in up (true) or takes it down (false).
func (s *Standin) SetUp(up bool) {
	if s.up.Swap(up) != up && s.OnChange != nil {
		s.OnChange(up)
	}
}

// Status returns the stand-in's state and counts.
func (s *Standin) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Up: s.up.Load(), Accepted: len(s.accepted), Refused: int(s.refused.Load())}
	for _, n := range s.accepted {
		if n > 1 {
			st.Doubles++
		}
	}
	return st
}

// ServeHTTP serves the control paths and the downstream API.
func (s *Standin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case DownPath, UpPath:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		s.SetUp(r.URL.Path == UpPath)
		s.writeStatus(w)
		return
	case StatusPath:
		s.writeStatus(w)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "the downstream API takes POST", http.StatusMethodNotAllowed)
		return
	}
	if !s.up.Load() {
		s.refused.Add(1)
		http.Error(w, "down (POST "+UpPath+" brings it back)", http.StatusServiceUnavailable)
		return
	}
	key := r.Header.Get(envelope.DownstreamIdempotencyKey)
	if key == "" {
		http.Error(w, "no "+envelope.DownstreamIdempotencyKey+" header", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.accepted[key]++
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *Standin) writeStatus(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Status())
}

// Serve serves s on l until ctx ends, telling out where it listens and
// each change of state (no payloads, no keys).
func Serve(ctx context.Context, l net.Listener, s *Standin, out io.Writer) error {
	base := "http://" + l.Addr().String()
	prev := s.OnChange
	s.OnChange = func(up bool) {
		if up {
			fmt.Fprintln(out, "downstream UP: accepting events")
		} else {
			fmt.Fprintln(out, "downstream DOWN: answering 503 (DOWNSTREAM_UNAVAILABLE)")
		}
		if prev != nil {
			prev(up)
		}
	}
	state := "UP"
	if !s.Status().Up {
		state = "DOWN"
	}
	fmt.Fprintf(out, "stand-in downstream %s on %s\n", state, base)
	fmt.Fprintf(out, "  make run ARGS=\"--downstream-url %s/capture\"\n", base)
	fmt.Fprintf(out, "  take it down:  curl -X POST %s%s\n", base, DownPath)
	fmt.Fprintf(out, "  bring it back: curl -X POST %s%s\n", base, UpPath)
	fmt.Fprintf(out, "  counts:        curl %s%s\n", base, StatusPath)
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	st := s.Status()
	fmt.Fprintf(out, "stand-in downstream stopped: %d keys accepted, %d received again, %d posts refused while down\n",
		st.Accepted, st.Doubles, st.Refused)
	return err
}

// ErrAddrInUse is returned by Listen when another process holds the
// address.
var ErrAddrInUse = errors.New("already in use (another stand-in downstream?)")

// Listen listens on addr (host:port), naming the address when it is taken.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s is %w; use --port", addr, ErrAddrInUse)
	}
	return l, err
}
