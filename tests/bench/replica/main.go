// Command replica measures the second copy's lag (package replica:
// mirrors over a leaf node) under ingest: a primary and a second server
// (embedded, no fsync, JetStream domains "primary" and "dr", joined by a
// leaf node connection) on this machine; n records of about 2.3 KB are
// published into QUARANTINE as fast as async publishing goes, while the
// mirror's lag is sampled every 50 ms; it prints the ingest rate, the
// largest lag seen and how long the copy took to catch up once the
// publishing ended.
//
//	go run ./tests/bench/replica -n 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"log"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/replica"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

func main() {
	n := flag.Int("n", 100000, "records published")
	flag.Parse()
	if err := run(*n); err != nil {
		log.Fatal(err)
	}
}

func start(domain, dir string, edit func(*server.Options)) (*server.Server, error) {
	o := &server.Options{ServerName: domain, Host: "127.0.0.1", Port: -1, JetStream: true, JetStreamDomain: domain,
		StoreDir: dir, NoLog: true, NoSigs: true}
	edit(o)
	s, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return nil, fmt.Errorf("%s not ready", domain)
	}
	return s, nil
}

func run(n int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "bench-replica-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	p, err := start("primary", tmp+"/p", func(o *server.Options) { o.LeafNode.Host, o.LeafNode.Port = "127.0.0.1", port })
	if err != nil {
		return err
	}
	defer p.Shutdown()
	lu, _ := url.Parse(fmt.Sprintf("nats://127.0.0.1:%d", port))
	d, err := start("dr", tmp+"/d", func(o *server.Options) { o.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: []*url.URL{lu}}} })
	if err != nil {
		return err
	}
	defer d.Shutdown()
	pnc, err := nats.Connect(p.ClientURL())
	if err != nil {
		return err
	}
	dnc, err := nats.Connect(d.ClientURL())
	if err != nil {
		return err
	}
	pjs, _ := jetstream.New(pnc)
	djs, _ := jetstream.New(dnc)
	o := streams.DefaultOptions()
	if err := streams.EnsureWORM(ctx, pjs, o); err != nil {
		return err
	}
	if err := streams.EnsureCore(ctx, pjs, o); err != nil {
		return err
	}
	cfgs := replica.Configs(o)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if err = replica.EnsureMirrors(ctx, djs, "primary", cfgs); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	names := []string{subjects.QuarantineStream}
	var maxLag atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				q, err := djs.Stream(ctx, subjects.QuarantineStream)
				pq, perr := pjs.Stream(ctx, subjects.QuarantineStream)
				if err != nil || perr != nil {
					continue
				}
				// The lag the mirror reports, and the one the two states show.
				lag, _ := replica.Lag(ctx, djs, names)
				behind := pq.CachedInfo().State.LastSeq - min(pq.CachedInfo().State.LastSeq, q.CachedInfo().State.LastSeq)
				for _, v := range []uint64{lag[subjects.QuarantineStream], behind} {
					if v > maxLag.Load() {
						maxLag.Store(v)
					}
				}
			}
		}
	}()
	body := []byte(`{"dlq_id":"x","note":"` + strings.Repeat("x", 2200) + `"}`)
	start := time.Now()
	for i := range n {
		if _, err := pjs.PublishAsync(subjects.Quarantine(pharmacy.Name, fmt.Sprintf("%s_%032x", pharmacy.Name, i)), body); err != nil {
			return err
		}
		if i%2048 == 2047 {
			<-pjs.PublishAsyncComplete()
		}
	}
	<-pjs.PublishAsyncComplete()
	ingest := time.Since(start)
	ended := time.Now()
	for {
		q, err := djs.Stream(ctx, subjects.QuarantineStream)
		if err == nil && q.CachedInfo().State.LastSeq == uint64(n) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	caughtUp := time.Since(ended)
	close(stop)
	<-sampled
	fmt.Printf("ingest: %d records of %d bytes in %s (%.0f records/s)\n", n, len(body), ingest.Round(time.Millisecond), float64(n)/ingest.Seconds())
	fmt.Printf("mirror lag: largest sampled %d records; caught up %s after the last publish\n", maxLag.Load(), caughtUp.Round(time.Millisecond))
	return nil
}
