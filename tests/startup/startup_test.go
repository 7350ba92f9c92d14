// Package startup checks that every service started before the cluster is
// ready (streams, buckets or consumers not provisioned yet, as during a
// leader election or before the administrator's provision step) waits,
// retrying with back-off and logging each attempt, instead of exiting;
// once the cluster is provisioned the service serves (issue 16).
package startup

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

type service interface{ Run(context.Context) error }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServicesWaitForTheCluster: each service's Run, started on a server
// where nothing is provisioned yet, keeps retrying (each attempt logged)
// rather than returning; after provisioning it answers $SRV.PING. Before
// the fix each Run returned at once ("stream not found").
func TestServicesWaitForTheCluster(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(t *testing.T, nc *nats.Conn, log *slog.Logger) (service, error)
	}{
		{"validator", func(t *testing.T, nc *nats.Conn, log *slog.Logger) (service, error) {
			cfg := validator.DefaultConfig()
			cfg.Provision, cfg.CreateConsumer = false, false
			return validator.New(nc, cfg, log)
		}},
		{"quarantiner", func(t *testing.T, nc *nats.Conn, log *slog.Logger) (service, error) {
			cfg := quarantiner.DefaultConfig()
			cfg.Provision, cfg.CreateConsumer = false, false
			return quarantiner.New(nc, cfg, log)
		}},
		{"redriver", func(t *testing.T, nc *nats.Conn, log *slog.Logger) (service, error) {
			cfg := redriver.DefaultConfig()
			cfg.Provision = false
			return redriver.New(nc, cfg, log)
		}},
		{"auditor", func(t *testing.T, nc *nats.Conn, log *slog.Logger) (service, error) {
			cfg := auditor.DefaultConfig()
			cfg.SigningKeyFile = filepath.Join(t.TempDir(), "signing.nk")
			cfg.ExportFile = filepath.Join(t.TempDir(), "checkpoints.jsonl")
			if _, err := auditor.NewSigningKey(cfg.SigningKeyFile); err != nil {
				t.Fatal(err)
			}
			return auditor.New(nc, cfg, log)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			nc := srv.Connect(t)
			logs := &lockedBuffer{}
			svc, err := tc.build(t, nc, slog.New(slog.NewJSONHandler(logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- svc.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Error("Run did not return after cancel")
				}
			})

			// Two failed attempts logged, and Run still running.
			natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				select {
				case err := <-done:
					done <- err // for the cleanup
					t.Fatalf("Run returned before the cluster was provisioned: %v", err)
				default:
				}
				if n := strings.Count(logs.String(), "start-up step failed, retrying"); n < 2 {
					return errors.New("fewer than 2 retries logged")
				}
				return nil
			})

			js := srv.JetStream(t)
			pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer pcancel()
			o := streams.DefaultOptions()
			if err := errors.Join(streams.EnsureCore(pctx, js, o), streams.EnsureWORM(pctx, js, o),
				stack.ProvisionConsumers(pctx, js, validator.DefaultConfig(), quarantiner.DefaultConfig())); err != nil {
				t.Fatal(err)
			}
			natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
				select {
				case err := <-done:
					done <- err // for the cleanup
					t.Fatalf("Run returned: %v", err)
				default:
				}
				_, err := nc.Request("$SRV.PING."+tc.name, nil, time.Second)
				return err
			})
			if strings.Contains(logs.String(), `"payload"`) {
				t.Error("a log line carries a payload")
			}
		})
	}
}

