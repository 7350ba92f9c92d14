package replica_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/replica"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// start starts an embedded JetStream server in domain with o's extras.
func start(t *testing.T, domain string, edit func(*server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{ServerName: domain, Host: "127.0.0.1", Port: -1, JetStream: true, JetStreamDomain: domain,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	edit(o)
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func jsOf(t *testing.T, s *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestMirrorOverLeafNode: the WORM streams and LEDGER of a primary are
// mirrored on a second server over a leaf node connection while records
// are written; the lag is exported; the primary is killed and the second
// copy holds every record at its sequence, WORM.
func TestMirrorOverLeafNode(t *testing.T) {
	port := freePort(t)
	primary := start(t, "primary", func(o *server.Options) { o.LeafNode.Host, o.LeafNode.Port = "127.0.0.1", port })
	lu, err := url.Parse(fmt.Sprintf("nats://127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	second := start(t, "dr", func(o *server.Options) {
		o.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: []*url.URL{lu}}}
	})
	pjs := jsOf(t, primary)
	ctx := context.Background()
	o := streams.DefaultOptions()
	if err := streams.EnsureCore(ctx, pjs, o); err != nil {
		t.Fatal(err)
	}
	if err := streams.EnsureWORM(ctx, pjs, o); err != nil {
		t.Fatal(err)
	}
	cfgs := replica.Configs(o)
	names := replica.Names(cfgs)
	sjs := jsOf(t, second)
	natstest.CheckFor(t, 20*time.Second, 100*time.Millisecond, func() error {
		return replica.EnsureMirrors(ctx, sjs, "primary", cfgs)
	})
	const n = 500
	for i := range n {
		body := fmt.Sprintf(`{"dlq_id":"pharmacy_%06d","party":"Müller & Söhne <Großhandel>"}`, i)
		if _, err := pjs.PublishAsync(subjects.Quarantine("pharmacy", fmt.Sprintf("pharmacy_%06d", i)), []byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := pjs.PublishAsync(subjects.Ledger("pharmacy", fmt.Sprintf("TX-%06d", i)), []byte(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pjs.Publish(ctx, subjects.AuditCheckpoints, []byte(`{"last_seq":500}`)); err != nil {
		t.Fatal(err)
	}
	<-pjs.PublishAsyncComplete()
	col := replica.NewCollector(sjs, names)
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		for _, name := range names {
			s, err := sjs.Stream(ctx, name)
			if err != nil {
				return err
			}
			p, err := pjs.Stream(ctx, name)
			if err != nil {
				return err
			}
			if got, want := s.CachedInfo().State.LastSeq, p.CachedInfo().State.LastSeq; got != want {
				return fmt.Errorf("%s mirrored up to %d of %d", name, got, want)
			}
		}
		return nil
	})
	if err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP deadletter_replica_lag_messages Messages a mirror of the second copy (package replica) is behind its stream on the primary, by stream, as the second server reports it.
# TYPE deadletter_replica_lag_messages gauge
deadletter_replica_lag_messages{stream="AUDIT"} 0
deadletter_replica_lag_messages{stream="LEDGER"} 0
deadletter_replica_lag_messages{stream="QUARANTINE"} 0
`)); err != nil {
		t.Error(err)
	}

	primary.Shutdown() // the primary's node is lost
	primary.WaitForShutdown()
	q, err := sjs.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	info := q.CachedInfo()
	if info.State.Msgs != n || !info.Config.DenyDelete || !info.Config.DenyPurge {
		t.Fatalf("the second copy holds %d records (want %d), config %+v", info.State.Msgs, n, info.Config)
	}
	m, err := q.GetMsg(ctx, n)
	if err != nil || !strings.Contains(string(m.Data), fmt.Sprintf("pharmacy_%06d", n-1)) || m.Subject != subjects.Quarantine("pharmacy", fmt.Sprintf("pharmacy_%06d", n-1)) {
		t.Errorf("record %d of the copy: %v %s %s", n, err, m.Subject, m.Data)
	}
	if err := q.DeleteMsg(ctx, 1); err == nil {
		t.Error("a record of the WORM copy was deleted")
	}

	// Failover: the copy is promoted and takes the writes; it keeps the
	// sequences (the anchors still prove it) and the WORM settings.
	for _, cfg := range cfgs {
		if err := replica.Promote(ctx, sjs, cfg); err != nil {
			t.Fatal(err)
		}
	}
	ack, err := sjs.Publish(ctx, subjects.Quarantine("pharmacy", "pharmacy_new"), []byte(`{"dlq_id":"pharmacy_new"}`))
	if err != nil || ack.Sequence != n+1 {
		t.Fatalf("a record on the promoted copy: %+v %v, want sequence %d", ack, err, n+1)
	}
	if ack, err := sjs.Publish(ctx, subjects.Ledger("pharmacy", "TX-NEW"), []byte(`{"ok":true}`)); err != nil || ack.Sequence != n+1 {
		t.Errorf("a new commit on the promoted LEDGER: %+v %v, want sequence %d", ack, err, n+1)
	}
	l, err := sjs.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		t.Fatal(err)
	}
	if c := l.CachedInfo().Config; c.Mirror != nil || !c.DenyDelete || !c.DenyPurge || len(c.Subjects) != 1 {
		t.Errorf("promoted LEDGER config %+v", c)
	}
}

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
