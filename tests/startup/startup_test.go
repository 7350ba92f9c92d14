// Package startup checks that every service started before the cluster is
// ready (streams, buckets or consumers not provisioned yet, as during a
// leader election or before the administrator's provision step) waits,
// retrying with back-off and logging each attempt, instead of exiting;
// once the cluster is provisioned the service serves (issue 16).
package startup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

type service interface{ Run(context.Context) error }

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
			logs := &natstest.Buffer{}
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

// TestConsumersSurviveReprovisioning: the administrator deletes and
// provisions again the validator's and the quarantiner's durable consumers
// while both run (nats.go ends a consumption for good when its consumer is
// deleted); both bind again, so a valid event still reaches LEDGER and a
// malformed one QUARANTINE. Before the fix both stayed up, answered pings
// and consumed nothing.
func TestConsumersSurviveReprovisioning(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := streams.DefaultOptions()
	vcfg, qcfg := validator.DefaultConfig(), quarantiner.DefaultConfig()
	vcfg.Provision, vcfg.CreateConsumer = false, false
	qcfg.Provision, qcfg.CreateConsumer = false, false
	provision := func() {
		t.Helper()
		if err := errors.Join(streams.EnsureCore(ctx, js, o), streams.EnsureWORM(ctx, js, o),
			stack.ProvisionConsumers(ctx, js, vcfg, qcfg)); err != nil {
			t.Fatal(err)
		}
	}
	provision()
	logs := &natstest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	v, err := validator.New(srv.Connect(t), vcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	q, err := quarantiner.New(srv.Connect(t), qcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range []service{v, q} {
		wg.Go(func() {
			if err := s.Run(rctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	nc := srv.Connect(t)
	for _, name := range []string{"validator", "quarantiner"} {
		natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			_, err := nc.Request("$SRV.PING."+name, nil, time.Second)
			return err
		})
	}

	for _, c := range []struct{ stream, name string }{
		{subjects.EventsStream, vcfg.Consumer},
		{subjects.FailuresStream, qcfg.FailuresConsumerConfig().Durable},
		{subjects.AdvisoriesStream, qcfg.AdvisoriesConsumerConfig().Durable},
	} {
		if err := js.DeleteConsumer(ctx, c.stream, c.name); err != nil {
			t.Fatalf("delete %s on %s: %v", c.name, c.stream, err)
		}
	}
	// The server ends the pulls at once; wait until the services have
	// noticed (each consumption logs it) before provisioning again. An
	// unnoticed end is caught below: nothing would be consumed.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(5 * time.Second); strings.Count(logs.String(), "consume stopped by the server") < 3; {
		select {
		case <-deadline:
		case <-tick.C:
			continue
		}
		break
	}
	provision()

	valid, err := os.ReadFile("../../schemas/testdata/pharmacy/valid/receive-registrant-business-address-dea.json")
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range [][]byte{valid, []byte("not json")} {
		if _, err := js.Publish(ctx, subjects.Event("pharmacy", "receive"), data, jetstream.WithMsgID(fmt.Sprint("reprov-", i))); err != nil {
			t.Fatal(err)
		}
	}
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		var errs []error
		for _, name := range []string{subjects.LedgerStream, subjects.QuarantineStream} {
			st, err := js.Stream(ctx, name)
			if err != nil {
				return err
			}
			if st.CachedInfo().State.Msgs == 0 {
				errs = append(errs, fmt.Errorf("%s empty", name))
			}
		}
		return errors.Join(errs...)
	})
}
