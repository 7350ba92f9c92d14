// Command replica measures the second copy's lag under ingest, in the
// deployment kit's layout (package kit, Replica): a primary server and a
// replica server (in this process, from the kit's generated files; fsync
// per write with -sync, as the kit configures them), the primary's backup
// account mirroring the services' streams (backup.EnsureMirrors) and the
// replica mirroring those over its leaf node (replica.EnsureFromBackup).
// n events of about 1 KB are published into EVENTS (the busiest stream of
// an ingest) as fast as async publishing goes, while every 20 ms the
// replica's EVENTS is compared with what the primary acknowledged: the
// lag in messages (acknowledged on the primary, not yet on the replica)
// and in seconds (how long ago the oldest message the replica lacks was
// acknowledged). It prints the ingest rate, p50/p99/max of both lags and
// how long the replica took to catch up after the last publish.
//
//	go run ./tests/bench/replica -n 100000 [-sync]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/replica"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

func main() {
	n := flag.Int("n", 100000, "events published")
	sync := flag.Bool("sync", false, "fsync every write (the kit's sync_interval: always)")
	flag.Parse()
	if err := run(*n, *sync); err != nil {
		log.Fatal(err)
	}
}

func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out, nil
}

func startFile(path string, syncAlways bool) (*server.Server, error) {
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, err
	}
	o.NoSigs, o.NoLog, o.SyncAlways = true, true, syncAlways
	s, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		return nil, fmt.Errorf("%s did not start", path)
	}
	return s, nil
}

// retry calls fn until it succeeds or 60 s have passed.
func retry(fn func(context.Context) error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func run(n int, syncAlways bool) error {
	dir, err := os.MkdirTemp("", "bench-replica-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	o := kit.Cluster(1)
	o.ListenHost, o.HTTPHost = "127.0.0.1", "127.0.0.1"
	o.Nodes[0].Host, o.Nodes[0].ClientPort, o.Nodes[0].ClusterPort, o.Nodes[0].HTTPPort = "127.0.0.1", ports[0], ports[1], ports[2]
	o.Nodes[0].StoreDir = filepath.Join(dir, "n1")
	o.Replica = &kit.Replica{Node: kit.Node{Name: "dr1", Host: "127.0.0.1", ClientPort: ports[3], HTTPPort: ports[4], StoreDir: filepath.Join(dir, "dr1")}, LeafPort: ports[5]}
	sec, err := kit.LoadSecrets(dir, access.WithBcryptCost(bcrypt.MinCost))
	if err != nil {
		return err
	}
	if _, err := kit.Generate(dir, sec, o); err != nil {
		return err
	}
	// One primary node: no cluster block (a 1-node kit renders "routes":
	// null, which the server does not parse).
	primaryConf := filepath.Join(dir, kit.NodesDir, "n1", kit.ServerConfFile)
	if err := dropCluster(primaryConf); err != nil {
		return err
	}
	p, err := startFile(primaryConf, syncAlways)
	if err != nil {
		return err
	}
	defer p.Shutdown()
	d, err := startFile(kit.ReplicaConfPath(dir, "dr1"), syncAlways)
	if err != nil {
		return err
	}
	defer d.Shutdown()
	conn := func(url, user string) (*nats.Conn, error) {
		return nats.Connect(url, sec.NATSOptions(user)...)
	}
	anc, err := conn(p.ClientURL(), access.Admin)
	if err != nil {
		return err
	}
	bnc, err := conn(p.ClientURL(), access.BackupAdmin)
	if err != nil {
		return err
	}
	dnc, err := conn(d.ClientURL(), access.Admin)
	if err != nil {
		return err
	}
	pjs, _ := jetstream.New(anc)
	djs, _ := jetstream.New(dnc)
	so := streams.DefaultOptions()
	if err := retry(func(ctx context.Context) error {
		if err := streams.EnsureCore(ctx, pjs, so); err != nil {
			return err
		}
		return streams.EnsureWORM(ctx, pjs, so)
	}); err != nil {
		return err
	}
	if err := retry(func(ctx context.Context) error { return backup.EnsureMirrors(ctx, bnc) }); err != nil {
		return err
	}
	if err := retry(func(ctx context.Context) error {
		_, err := replica.EnsureFromBackup(ctx, dnc, kit.DefaultPrimaryDomain, 1)
		return err
	}); err != nil {
		return err
	}

	// acked[seq-1] is when the primary acknowledged EVENTS sequence seq.
	var mu sync.Mutex
	acked := make([]time.Time, 0, n)
	var msgLag, secLag []float64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	ctx := context.Background()
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			s, err := djs.Stream(ctx, subjects.EventsStream)
			if err != nil {
				continue
			}
			have := s.CachedInfo().State.LastSeq
			now := time.Now()
			mu.Lock()
			done := uint64(len(acked))
			var age time.Duration
			if have < done {
				age = now.Sub(acked[have])
			}
			mu.Unlock()
			msgLag = append(msgLag, float64(done-min(done, have)))
			secLag = append(secLag, age.Seconds())
		}
	}()
	body := []byte(`{"transaction_id":"TX","party":"Müller & Söhne <Großhandel>","note":"` + strings.Repeat("x", 960) + `"}`)
	start := time.Now()
	const window = 1024
	futs := make([]jetstream.PubAckFuture, 0, window)
	for i := range n {
		f, err := pjs.PublishAsync(subjects.Event(pharmacy.Name, "dispense"), body)
		if err != nil {
			return err
		}
		futs = append(futs, f)
		if len(futs) == window || i == n-1 {
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				}
			}
			now := time.Now()
			mu.Lock()
			for range futs {
				acked = append(acked, now)
			}
			mu.Unlock()
			futs = futs[:0]
		}
	}
	ingest := time.Since(start)
	ended := time.Now()
	for {
		s, err := djs.Stream(ctx, subjects.EventsStream)
		if err == nil && s.CachedInfo().State.LastSeq >= uint64(n) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	caughtUp := time.Since(ended)
	close(stop)
	<-sampled
	fmt.Printf("topology: primary → backup account mirror → replica mirror over a leaf node; fsync per write: %v\n", syncAlways)
	fmt.Printf("ingest: %d events of %d bytes into EVENTS in %s (%.0f events/s)\n", n, len(body), ingest.Round(time.Millisecond), float64(n)/ingest.Seconds())
	fmt.Printf("replica lag over %d samples (every 20 ms): messages p50 %.0f p99 %.0f max %.0f; seconds p50 %.3f p99 %.3f max %.3f\n",
		len(msgLag), pct(msgLag, 0.5), pct(msgLag, 0.99), slices.Max(msgLag), pct(secLag, 0.5), pct(secLag, 0.99), slices.Max(secLag))
	fmt.Printf("caught up %s after the last publish\n", caughtUp.Round(time.Millisecond))
	return nil
}

// dropCluster removes the cluster block of a generated node file.
func dropCluster(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(b)
	i := strings.Index(text, "{")
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(text[i:]))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return err
	}
	delete(m, "cluster")
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // the parser knows no \u escapes
	if err := enc.Encode(m); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out.String()), 0o600)
}
