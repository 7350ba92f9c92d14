// Package failover tries the second copy's failover end to end: a primary
// 3-node cluster and a replica server, each node a process of its own run
// from the deployment kit's generated files (package kit: the replica
// joined by a leaf node bound to the primary's backup account), the
// pipeline running on the primary, the primary's nodes killed, the
// replica promoted, the services pointed at it, audit.verify against the
// newest anchor, and the pipeline continuing with every event committed or
// quarantined exactly once.
package failover

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/replica"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// serveEnv makes the test binary a nats-server process running the
// configuration file it names, until its standard input closes.
const serveEnv = "DEADLETTER_FAILOVER_SERVE"

func TestMain(m *testing.M) {
	if conf := os.Getenv(serveEnv); conf != "" {
		if err := serve(conf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

func serve(conf string) error {
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		return err
	}
	o.NoSigs, o.NoLog = true, true
	s, err := server.NewServer(o)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return fmt.Errorf("%s did not start", conf)
	}
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// proc is a server process.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// start runs the server of conf in a process of its own.
func start(t *testing.T, conf string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+conf)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: in}
	t.Cleanup(p.kill)
	return p
}

// kill ends the process with SIGKILL (a lost node), once.
func (p *proc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

// services runs a validator, a quarantiner and an auditor on url until
// the returned stop is called.
type services struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (s *services) stop() { s.cancel(); s.wg.Wait() }

func runServices(t *testing.T, dir, url string, vcfg validator.Config, qcfg quarantiner.Config, anchors, downstream string) *services {
	t.Helper()
	connect := func(user string) *nats.Conn {
		o, err := nats.NkeyOptionFromSeed(filepath.Join(dir, kit.ServicesDir, user+".nk"))
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(url, o, nats.CustomInboxPrefix(access.InboxPrefix(user)), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	acfg := auditor.DefaultConfig()
	vcfg.Provision, vcfg.CreateConsumer, qcfg.Provision, qcfg.CreateConsumer = false, false, false, false
	vcfg.DownstreamURL = downstream
	acfg.SigningKeyFile = filepath.Join(anchors, stack.SigningKeyFile)
	acfg.ExportFile = filepath.Join(anchors, stack.ExportFile)
	acfg.CheckpointInterval = 500 * time.Millisecond
	log := slog.New(slog.DiscardHandler)
	v, err := validator.New(connect(access.Validator), vcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	q, err := quarantiner.New(connect(access.Quarantiner), qcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auditor.New(connect(access.Auditor), acfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &services{cancel: cancel}
	for _, run := range []func(context.Context) error{v.Run, q.Run, a.Run} {
		s.wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("service: %v", err)
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

// event is a dispense event of the pharmacy domain: valid, or missing
// its required fields.
func event(i int, valid bool) []byte {
	if !valid {
		b, _ := json.Marshal(map[string]any{"not": "valid", "n": i, "party": "Müller & Söhne <Großhandel>", "note": `"quoted" & <tagged>`})
		return b
	}
	b, _ := json.Marshal(map[string]any{
		"transaction_id": fmt.Sprintf("TX-FAILOVER-%06d", i), "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
		"lot": fmt.Sprintf("LOT%06d", i), "expiry": "2026-09-30", "quantity_delta": "-30", "unit": "EA",
		"event_type": "dispense", "dea_schedule": "II", "occurred_at": "2025-03-14T15:42:10Z", "actor_id": "RPH-0412",
	})
	return b
}

// publish publishes events from..to-1 (every fifth invalid) as the
// publisher, and returns how many were valid.
func publish(t *testing.T, js jetstream.JetStream, from, to int) (valid int) {
	t.Helper()
	for i := from; i < to; i++ {
		ok := i%5 != 4
		if ok {
			valid++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := js.Publish(ctx, "events.pharmacy.dispense", event(i, ok))
		cancel()
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	return valid
}

// state is a stream's message count and last sequence.
func state(ctx context.Context, js jetstream.JetStream, name string) (jetstream.StreamState, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return jetstream.StreamState{}, err
	}
	return s.CachedInfo().State, nil
}

func TestFailover(t *testing.T) {
	natstest.Long(t, "a cluster of server processes")
	dir := t.TempDir()
	o := kit.Cluster(3)
	o.ListenHost, o.HTTPHost = "127.0.0.1", "127.0.0.1"
	ports := freePorts(t, 14)
	for i := range o.Nodes {
		n := &o.Nodes[i]
		n.Host = "127.0.0.1"
		n.ClientPort, n.ClusterPort, n.HTTPPort = ports[3*i], ports[3*i+1], ports[3*i+2]
		n.LeafPort = ports[11+i] // one host: a leaf port each
		n.StoreDir = filepath.Join(dir, "store", n.Name)
	}
	o.Replica = &kit.Replica{Node: kit.Node{Name: "dr1", Host: "127.0.0.1", ClientPort: ports[9], HTTPPort: ports[10],
		StoreDir: filepath.Join(dir, "store", "dr1")}, LeafPort: ports[11]}
	sec, err := kit.LoadSecrets(dir, access.WithBcryptCost(bcrypt.MinCost))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kit.Generate(dir, sec, o); err != nil {
		t.Fatal(err)
	}
	var primary []*proc
	for _, n := range o.Nodes {
		primary = append(primary, start(t, filepath.Join(dir, kit.NodesDir, n.Name, kit.ServerConfFile)))
	}
	start(t, kit.ReplicaConfPath(dir, "dr1"))
	drURL := fmt.Sprintf("nats://127.0.0.1:%d", o.Replica.ClientPort)
	ctxPath := func(user string) string { return filepath.Join(dir, kit.ContextsDir, user+".json") }
	dial := func(user, url string) *nats.Conn {
		var nc *nats.Conn
		natstest.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
			var err error
			nc, err = kit.ConnectContext(ctxPath(user), url, nats.MaxReconnects(-1))
			return err
		})
		t.Cleanup(nc.Close)
		return nc
	}
	jsOf := func(nc *nats.Conn) jetstream.JetStream {
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	retry := func(what string, fn func(ctx context.Context) error) {
		t.Helper()
		natstest.CheckFor(t, 90*time.Second, 500*time.Millisecond, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := fn(ctx); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		})
	}

	// The primary: R3 streams, the services' consumers, the backup
	// account's mirrors; the replica mirrors those.
	so := streams.DefaultOptions()
	so.Replicas = 3
	vcfg, qcfg := validator.DefaultConfig(), quarantiner.DefaultConfig()
	vcfg.Streams, qcfg.Streams = so, so
	// Transient failures exhaust quickly (5 deliveries, 50–200 ms apart).
	vcfg.BackoffBase, vcfg.BackoffMax = 50*time.Millisecond, 200*time.Millisecond
	admin := jsOf(dial(access.Admin, ""))
	retry("provision", func(ctx context.Context) error {
		if err := streams.EnsureCore(ctx, admin, so); err != nil {
			return err
		}
		if err := streams.EnsureWORM(ctx, admin, so); err != nil {
			return err
		}
		return stack.ProvisionConsumers(ctx, admin, vcfg, qcfg)
	})
	bakAdmin := dial(access.BackupAdmin, "")
	retry("backup mirrors", func(ctx context.Context) error { return backup.EnsureMirrors(ctx, bakAdmin) })
	drAdmin := dial(access.Admin, drURL)
	var names []string
	retry("replica mirrors", func(ctx context.Context) error {
		var err error
		names, err = replica.EnsureFromBackup(ctx, drAdmin, kit.DefaultPrimaryDomain, 1)
		return err
	})
	t.Logf("the replica mirrors %v", names)

	// The replica reaches nothing of the primary's services' account: its
	// admin's requests through the leaf into the backup account's imports
	// are refused by the leaf's permissions.
	// Nor may it change the backup account's streams (a stream it could
	// create there could mirror through those imports).
	bakJS := jsOf(bakAdmin)
	bakBefore := fmt.Sprint(streamNames(t, bakJS))
	pd := "$JS." + kit.DefaultPrimaryDomain + ".API"
	evil, _ := json.Marshal(map[string]any{"name": "EVIL", "mirror": map[string]any{"name": subjects.QuarantineStream,
		"external": map[string]any{"api": access.BackupAPIPrefix, "deliver": "ledger.pharmacy"}}})
	for _, a := range []struct{ subj, body string }{
		{access.BackupAPIPrefix + ".CONSUMER.CREATE." + subjects.QuarantineStream,
			`{"stream_name":"QUARANTINE","config":{"name":"evil","deliver_subject":"ledger.pharmacy.forged","ack_policy":"none"}}`},
		{access.BackupAPIPrefix + ".STREAM.INFO." + subjects.LedgerStream, ""},
		{access.BackupConsumerInfo(subjects.EventsStream, subjects.ValidatorConsumer), ""},
		{pd + ".STREAM.CREATE.EVIL", string(evil)},
		{pd + ".STREAM.DELETE." + subjects.QuarantineStream, ""},
		{pd + ".STREAM.PURGE." + subjects.LedgerStream, ""},
		{pd + ".STREAM.SNAPSHOT." + subjects.QuarantineStream, `{"deliver_subject":"_INBOX.admin.snap"}`},
		{pd + ".DIRECT.GET." + subjects.QuarantineStream, `{"seq":1}`},
	} {
		if m, err := drAdmin.Request(a.subj, []byte(a.body), 2*time.Second); err == nil {
			t.Errorf("the replica's admin reached %s through the leaf: %.200s", a.subj, m.Data)
		}
	}
	if after := fmt.Sprint(streamNames(t, bakJS)); after != bakBefore {
		t.Errorf("the backup account's streams changed: %s, were %s", after, bakBefore)
	}

	// The downstream refuses the first ten events while the primary runs:
	// the valid ones among them are quarantined as exhausted. After the
	// failover it takes everything: a validator that started over would
	// commit them.
	var refuse atomic.Bool
	refuse.Store(true)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if refuse.Load() && strings.Contains(string(b), "TX-FAILOVER-00000") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(down.Close)
	anchors := filepath.Join(dir, "anchors")
	if err := os.MkdirAll(anchors, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := auditor.NewSigningKey(filepath.Join(anchors, stack.SigningKeyFile)); err != nil {
		t.Fatal(err)
	}
	onPrimary := runServices(t, dir, o.ClientURLs(), vcfg, qcfg, anchors, down.URL)

	// Events flow on the primary.
	const first = 100
	pub := jsOf(dial(string(access.RolePublisher), ""))
	validBefore := publish(t, pub, 0, first)
	const exhausted = 8 // the valid among events 0..9
	validBefore -= exhausted
	retry("the primary's pipeline", func(ctx context.Context) error {
		l, err := state(ctx, admin, subjects.LedgerStream)
		if err != nil {
			return err
		}
		q, err := state(ctx, admin, subjects.QuarantineStream)
		if err != nil {
			return err
		}
		if l.Msgs != uint64(validBefore) || q.Msgs != uint64(first-validBefore) {
			return fmt.Errorf("LEDGER %d of %d, QUARANTINE %d of %d", l.Msgs, validBefore, q.Msgs, first-validBefore)
		}
		return nil
	})
	// The newest anchor covers every record, and the replica holds it all.
	anchorFile := filepath.Join(anchors, stack.ExportFile)
	retry("an anchor over every record", func(ctx context.Context) error {
		b, err := os.ReadFile(anchorFile)
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var cp api.ExportedCheckpoint
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &cp); err != nil {
			return err
		}
		if cp.LastSeq != uint64(first-validBefore) {
			return fmt.Errorf("the newest anchor covers up to %d", cp.LastSeq)
		}
		return nil
	})
	dr := jsOf(drAdmin)
	retry("the replica caught up", func(ctx context.Context) error {
		for _, name := range []string{subjects.QuarantineStream, subjects.AuditStream, subjects.LedgerStream, subjects.EventsStream, subjects.BucketStream(subjects.IdempotencyBucket)} {
			p, err := state(ctx, admin, name)
			if err != nil {
				return err
			}
			r, err := state(ctx, dr, name)
			if err != nil {
				return err
			}
			if r.LastSeq != p.LastSeq {
				return fmt.Errorf("%s: the replica holds up to %d of %d", name, r.LastSeq, p.LastSeq)
			}
		}
		return nil
	})

	pq, err := admin.Stream(context.Background(), subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	for c := range pq.ListConsumers(context.Background()).Info() {
		if c.Config.DeliverSubject != "" && !strings.HasPrefix(c.Config.DeliverSubject, access.BackupDeliverPrefix(subjects.QuarantineStream)+".") {
			t.Errorf("QUARANTINE on the primary has a consumer %s delivering to %s", c.Name, c.Config.DeliverSubject)
		}
	}

	// The lag, as the registered collector exports it, read on the
	// replica by a reader (the auditor's nkey, as dlqctl replica metrics
	// runs).
	{
		o, err := nats.NkeyOptionFromSeed(filepath.Join(dir, kit.ServicesDir, access.Auditor+".nk"))
		if err != nil {
			t.Fatal(err)
		}
		anc, err := nats.Connect(drURL, o, nats.CustomInboxPrefix(access.InboxPrefix(access.Auditor)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(anc.Close)
		col := replica.NewCollector(jsOf(anc), []string{subjects.QuarantineStream, subjects.AuditStream, subjects.LedgerStream, subjects.EventsStream})
		if err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP deadletter_replica_lag_messages Messages a mirror of the second copy (package replica) is behind its stream on the primary, by stream, as the second server reports it.
# TYPE deadletter_replica_lag_messages gauge
deadletter_replica_lag_messages{stream="AUDIT"} 0
deadletter_replica_lag_messages{stream="EVENTS"} 0
deadletter_replica_lag_messages{stream="LEDGER"} 0
deadletter_replica_lag_messages{stream="QUARANTINE"} 0
`)); err != nil {
			t.Error(err)
		}
	}

	// The primary is lost: every node killed while events still flow.
	const second = 40
	validDuring := publish(t, pub, first, first+second)
	for _, p := range primary {
		p.kill()
	}
	killed := time.Now()
	onPrimary.stop()
	// The newest anchor the primary's auditor exported (kept outside the
	// store, as the deployment guide says).
	b, err := os.ReadFile(anchorFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	newest := lines[len(lines)-1]
	var newestCP api.ExportedCheckpoint
	if err := json.Unmarshal([]byte(newest), &newestCP); err != nil {
		t.Fatal(err)
	}
	pubKey, err := auditor.SigningPublicKey(filepath.Join(anchors, stack.SigningKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	phase := func(what string) { t.Logf("%s: %s after the kill", what, time.Since(killed).Round(time.Millisecond)) }
	phase("the primary's services stopped (their drain against lost servers)")
	begun := time.Now()

	// Failover: the replica's mirrors become the streams, the services'
	// consumers are provisioned on it, the services point at it.
	promoted, err := replica.PromoteAll(context.Background(), drAdmin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted %v", promoted)
	phase("promoted")
	dso := so
	dso.Replicas = 1
	dv, dq := vcfg, qcfg
	dv.Streams, dq.Streams = dso, dso
	// The work queues (FAILURES, ADVISORIES) are not mirrored: the
	// administrator's provisioning creates them (and checks the promoted
	// streams' configurations), then the services' consumers.
	retry("provision the replica", func(ctx context.Context) error {
		if err := streams.EnsureCore(ctx, dr, dso); err != nil {
			return err
		}
		if err := streams.EnsureWORM(ctx, dr, dso); err != nil {
			return err
		}
		return stack.ProvisionConsumers(ctx, dr, dv, dq)
	})
	// The validator resumes at the first event without an outcome.
	var resumeAt uint64
	retry("resume the validator", func(ctx context.Context) error {
		var err error
		resumeAt, err = replica.Resume(ctx, dr)
		return err
	})
	phase(fmt.Sprintf("the validator resumes at EVENTS %d", resumeAt))
	if resumeAt <= first {
		t.Errorf("the validator resumes at %d, before the events published after the anchor (%d)", resumeAt, first+1)
	}
	refuse.Store(false)
	phase("provisioned")
	runServices(t, dir, drURL, dv, dq, anchors, down.URL)
	phase("services started")
	viewer := dial(access.DefaultPerson(access.RoleViewer), drURL)
	verify := func(anchor string) api.VerifyReply {
		var rep api.VerifyReply
		req, _ := json.Marshal(api.VerifyRequest{Anchor: anchor, PubKey: pubKey})
		retry("audit.verify on the replica", func(ctx context.Context) error {
			m, err := viewer.RequestWithContext(ctx, api.AuditVerify, req)
			if err != nil {
				return err
			}
			rep = api.VerifyReply{}
			if err := json.Unmarshal(m.Data, &rep); err != nil {
				return fmt.Errorf("%w: %.300s", err, m.Data)
			}
			return nil
		})
		return rep
	}
	rep := verify(newest)
	rto := time.Since(killed)
	if slices.ContainsFunc(rep.Problems, func(p api.VerifyProblem) bool { return p.Kind == api.ProblemAnchorNotInAudit }) {
		// The newest checkpoint was written and exported just before
		// the kill and its AUDIT record never reached the replica: the
		// copy lost it (within the RPO), and verify says so. Then the
		// copy is checked against the newest anchor whose checkpoint it
		// holds.
		rs, err := state(context.Background(), dr, subjects.AuditStream)
		if err != nil {
			t.Fatal(err)
		}
		if rs.LastSeq >= newestCP.AuditSeq {
			t.Fatalf("verify says AUDIT lacks the anchor's checkpoint (AUDIT %d), but the replica holds AUDIT up to %d: %+v", newestCP.AuditSeq, rs.LastSeq, rep.Problems)
		}
		lost, held := newestCP.AuditSeq, ""
		for i := len(lines) - 1; i >= 0 && held == ""; i-- {
			var cp api.ExportedCheckpoint
			if err := json.Unmarshal([]byte(lines[i]), &cp); err == nil && cp.AuditSeq <= rs.LastSeq {
				held, newestCP = lines[i], cp
			}
		}
		if held == "" {
			t.Fatalf("the replica holds no anchored checkpoint (AUDIT up to %d)", rs.LastSeq)
		}
		t.Logf("the newest anchor's checkpoint (AUDIT %d) did not reach the replica (AUDIT up to %d): verify reports it (%s); checked against the newest anchor it holds (AUDIT %d)",
			lost, rs.LastSeq, api.ProblemAnchorNotInAudit, newestCP.AuditSeq)
		rep = verify(held)
	}
	// Whole against the anchor, or exactly what the copy lacks of it
	// (records the mirror had not received yet).
	if rep.Anchor == nil || rep.Anchor.TreeSize != newestCP.TreeSize {
		t.Fatalf("audit.verify did not check the primary's anchor (%d records): %+v", newestCP.TreeSize, rep)
	}
	if !rep.OK || !rep.Anchor.Matched {
		for _, p := range rep.Problems {
			if p.Kind != api.ProblemAnchorShort || p.ToSeq != newestCP.LastSeq {
				t.Errorf("problem %+v: want only %s up to the anchor's %d", p, api.ProblemAnchorShort, newestCP.LastSeq)
			}
		}
		t.Logf("the copy lacks what the anchor names: %+v", rep.Problems)
	} else {
		t.Logf("the copy is whole against the primary's anchor (%d records, up to QUARANTINE %d)", rep.Anchor.Records, newestCP.LastSeq)
	}
	t.Logf("failover time (RTO): killed → promoted → provisioned → services on the replica → audit.verify answered in %s (%s from the start of the procedure)",
		rto.Round(time.Millisecond), time.Since(begun).Round(time.Millisecond))

	// The pipeline continues; every event the replica holds is committed
	// or quarantined once.
	const third = 50
	pub2 := jsOf(dial(string(access.RolePublisher), drURL))
	publish(t, pub2, first+second, first+second+third)
	natstest.CheckFor(t, 90*time.Second, 500*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ev, err := dr.Stream(ctx, subjects.EventsStream)
		if err != nil {
			return fmt.Errorf("EVENTS: %w", err)
		}
		var valid, invalid uint64
		st := ev.CachedInfo().State
		for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
			m, err := ev.GetMsg(ctx, seq)
			if err != nil {
				return fmt.Errorf("EVENTS %d: %w", seq, err)
			}
			if strings.Contains(string(m.Data), `"transaction_id"`) {
				valid++
			} else {
				invalid++
			}
		}
		ls, err := dr.Stream(ctx, subjects.LedgerStream)
		if err != nil {
			return fmt.Errorf("LEDGER: %w", err)
		}
		li, err := ls.Info(ctx, jetstream.WithSubjectFilter(subjects.LedgerAll))
		if err != nil {
			return fmt.Errorf("LEDGER info: %w", err)
		}
		q, err := state(ctx, dr, subjects.QuarantineStream)
		if err != nil {
			return fmt.Errorf("QUARANTINE: %w", err)
		}
		total := st.Msgs
		// The exhausted events stay quarantined (not committed behind the
		// quarantine's back).
		valid -= exhausted
		invalid += exhausted
		if li.State.Msgs != valid || li.State.NumSubjects != valid || q.Msgs != invalid {
			return fmt.Errorf("the replica's EVENTS holds %d valid and %d invalid; LEDGER %d commits on %d subjects, QUARANTINE %d records",
				valid, invalid, li.State.Msgs, li.State.NumSubjects, q.Msgs)
		}
		t.Logf("exactly once after the failover: %d events (%d of the %d published while the primary was killed reached the replica), %d commits, %d quarantined",
			total, total-uint64(first)-uint64(third), second, li.State.Msgs, q.Msgs)
		return nil
	})
	_ = validDuring
}

// streamNames lists the streams of an account with their message counts.
func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	for info := range js.ListStreams(ctx).Info() {
		out = append(out, fmt.Sprintf("%s:%d", info.Config.Name, info.State.Msgs))
	}
	return out
}
