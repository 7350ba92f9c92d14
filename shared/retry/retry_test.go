package retry

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/natstest"
)

func testLogger(tb testing.TB) (*slog.Logger, *natstest.Buffer) {
	tb.Helper()
	buf := &natstest.Buffer{}
	return slog.New(slog.NewJSONHandler(buf, nil)), buf
}

// TestValue: a look-up that fails at first (the stream not provisioned yet,
// the server not up yet) is retried, each failure logged, until it
// succeeds; when the context ends first, the error names the step and
// wraps both ErrGaveUp and the look-up's own error.
func TestValue(t *testing.T) {
	fast := Policy{Attempt: time.Second, Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	for _, tc := range []struct {
		name string
		// arrange makes the look-up fail now and returns what makes it
		// succeed later (nil: it never does).
		arrange func(t *testing.T, srv *natstest.Server, js jetstream.JetStream) func()
		timeout time.Duration
		wantErr []error
	}{
		{
			name: "stream provisioned late",
			arrange: func(t *testing.T, _ *natstest.Server, js jetstream.JetStream) func() {
				return func() {
					if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}}); err != nil {
						t.Error(err)
					}
				}
			},
			timeout: 20 * time.Second,
		},
		{
			name: "server not up yet",
			arrange: func(t *testing.T, srv *natstest.Server, js jetstream.JetStream) func() {
				if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}}); err != nil {
					t.Fatal(err)
				}
				srv.Stop()
				return srv.Restart
			},
			timeout: 20 * time.Second,
		},
		{
			name:    "never provisioned",
			arrange: func(*testing.T, *natstest.Server, jetstream.JetStream) func() { return nil },
			timeout: 700 * time.Millisecond,
			wantErr: []error{ErrGaveUp, jetstream.ErrStreamNotFound},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			nc := srv.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			later := tc.arrange(t, srv, js)
			log, buf := testLogger(t)
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			done := make(chan struct{})
			go func() {
				// The fix comes once the look-up has failed at least twice.
				defer close(done)
				natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
					if n := strings.Count(buf.String(), "retrying"); n < 2 {
						return errors.New("fewer than 2 retries logged")
					}
					return nil
				})
				if later != nil {
					later()
				}
			}()
			s, err := ValueWith(ctx, fast, log, "look up LATE", func(ctx context.Context) (jetstream.Stream, error) {
				return js.Stream(ctx, "LATE")
			})
			<-done
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("err %v, want it to wrap %v", err, want)
				}
			}
			if tc.wantErr != nil {
				if !strings.Contains(err.Error(), "look up LATE") {
					t.Errorf("err %q does not name the step", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ValueWith: %v", err)
			}
			if s.CachedInfo().Config.Name != "LATE" {
				t.Errorf("stream %q", s.CachedInfo().Config.Name)
			}
			if !strings.Contains(buf.String(), `"step":"look up LATE"`) || !strings.Contains(buf.String(), `"attempt":1`) {
				t.Errorf("retries not logged with step and attempt:\n%s", buf)
			}
		})
	}
}

// TestBackoffCapped: the delays grow from Initial and stay within Max
// (plus jitter), so a long outage is retried every few seconds, not ever
// more rarely.
func TestBackoffCapped(t *testing.T) {
	log, buf := testLogger(t)
	p := Policy{Attempt: 50 * time.Millisecond, Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := p.Do(ctx, log, "always failing", func(context.Context) error { return errors.New("no") })
	if !errors.Is(err, ErrGaveUp) {
		t.Fatalf("err %v", err)
	}
	// At most 40 ms ·1.5 between attempts: about a second holds ≥ 16.
	if n := strings.Count(buf.String(), "retrying"); n < 16 {
		t.Errorf("%d retries in %s: back-off not capped at Max", n, time.Since(start))
	}
}

// TestStoppedOnCancel: a service stopped (its context cancelled) during a
// start-up step gets ErrStopped, which its Run turns into a clean stop; a
// deadline is giving up, not stopping.
func TestStoppedOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	attempts := 0
	err := Do(ctx, slog.New(slog.DiscardHandler), "never", func(context.Context) error {
		if attempts++; attempts == 2 {
			cancel()
		}
		return errors.New("not yet")
	})
	if !errors.Is(err, ErrStopped) || errors.Is(err, ErrGaveUp) {
		t.Fatalf("err = %v, want ErrStopped", err)
	}
}
