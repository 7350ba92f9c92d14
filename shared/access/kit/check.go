package kit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Drift is one difference between a running cluster and its source.
type Drift struct {
	// What names the server, stream, bucket or consumer.
	What string
	// Detail says what differs.
	Detail string
}

func (d Drift) String() string { return d.What + ": " + d.Detail }

// Want is what the streams of a cluster must be: the definitions of
// shared/streams and the services' consumers.
type Want struct {
	// Streams are the stream configurations (streams.Events(o), ...).
	Streams []jetstream.StreamConfig
	// Buckets are the key-value buckets.
	Buckets []jetstream.KeyValueConfig
	// Consumers are the durable consumers, by stream.
	Consumers []Consumer
}

// Consumer is a durable consumer of a stream.
type Consumer struct {
	// Stream is the stream's name.
	Stream string
	// Config is the consumer's configuration.
	Config jetstream.ConsumerConfig
}

// WantStreams returns the stream and bucket definitions of shared/streams
// for o (consumers are the services' to give).
func WantStreams(o streams.Options) Want {
	return Want{
		Streams: append([]jetstream.StreamConfig{
			streams.Replays(o), streams.Events(o), streams.Ledger(o), streams.Failures(o),
			streams.Advisories(o),
		}, streams.WORMStreams(o)...),
		Buckets: []jetstream.KeyValueConfig{streams.Idempotency(o), streams.Attempts(o), streams.Drains(o), streams.Approvals(o), streams.Holds(o)},
	}
}

// varzReply is a server's answer to $SYS.REQ.SERVER.PING.VARZ (the fields
// read here).
type varzReply struct {
	Server struct {
		Name string `json:"name"`
	} `json:"server"`
	Data struct {
		ConfigDigest string `json:"config_digest"`
	} `json:"data"`
	Error *struct {
		Description string `json:"description"`
	} `json:"error,omitempty"`
}

// ServerDigests asks every server of the cluster, as the system account's
// monitoring user (nc), for its config_digest, and returns them by server
// name. It waits for want answers, or until ctx ends.
func ServerDigests(ctx context.Context, nc *nats.Conn, want int) (map[string]string, error) {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("kit: varz: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SYS.REQ.SERVER.PING.VARZ", inbox, nil); err != nil {
		return nil, fmt.Errorf("kit: varz: %w", err)
	}
	got := map[string]string{}
	for len(got) < want {
		select {
		case <-ctx.Done():
			return got, nil
		case m := <-ch:
			var r varzReply
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return nil, fmt.Errorf("kit: varz reply: %w", err)
			}
			if r.Error != nil {
				return nil, fmt.Errorf("kit: varz of %s: %s", r.Server.Name, r.Error.Description)
			}
			got[r.Server.Name] = r.Data.ConfigDigest
		}
	}
	return got, nil
}

// CheckServers compares the digests the servers report (ServerDigests)
// with the files of the kit in dir: a node that answers with another
// digest, a node that does not answer, a server that is not in the kit.
func CheckServers(dir string, m *Manifest, have map[string]string) ([]Drift, error) {
	var d []Drift
	for _, n := range m.Options.Nodes {
		want, err := Digest(filepath.Join(dir, NodesDir, n.Name, ServerConfFile))
		if err != nil {
			return nil, err
		}
		got, ok := have[n.Name]
		switch {
		case !ok:
			d = append(d, Drift{"server " + n.Name, "did not answer"})
		case got != want:
			d = append(d, Drift{"server " + n.Name, fmt.Sprintf("config_digest is %s, want %s (the generated %s)", got, want, ServerConfFile)})
		}
	}
	var extra []string
	for name := range have {
		if !slices.ContainsFunc(m.Options.Nodes, func(n Node) bool { return n.Name == name }) {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		d = append(d, Drift{"server " + name, "is not in the kit"})
	}
	return d, nil
}

// CheckStreams compares the streams, buckets and consumers of js with w.
func CheckStreams(ctx context.Context, js jetstream.JetStream, w Want) ([]Drift, error) {
	var d []Drift
	for _, want := range w.Streams {
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			d = append(d, Drift{"stream " + want.Name, "missing"})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kit: stream %s: %w", want.Name, err)
		}
		for _, diff := range streams.StreamDiff(want, s.CachedInfo().Config) {
			d = append(d, Drift{"stream " + want.Name, diff})
		}
	}
	for _, want := range w.Buckets {
		name := subjects.BucketStream(want.Bucket)
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			d = append(d, Drift{"bucket " + want.Bucket, "missing"})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kit: bucket %s: %w", want.Bucket, err)
		}
		for _, diff := range streams.BucketDiff(want, s.CachedInfo().Config) {
			d = append(d, Drift{"bucket " + want.Bucket, diff})
		}
	}
	for _, c := range w.Consumers {
		what := "consumer " + c.Stream + "/" + c.Config.Durable
		con, err := js.Consumer(ctx, c.Stream, c.Config.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			d = append(d, Drift{what, "missing"})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kit: %s: %w", what, err)
		}
		for _, diff := range ConsumerDiff(c.Config, con.CachedInfo().Config) {
			d = append(d, Drift{what, diff})
		}
	}
	return d, nil
}

// ConsumerDiff lists, in words, every setting of a durable consumer that
// deadletter sets and in which have differs from want.
func ConsumerDiff(want, have jetstream.ConsumerConfig) []string {
	var d []string
	add := func(name string, h, w any) { d = append(d, fmt.Sprintf("%s is %v, want %v", name, h, w)) }
	if want.AckPolicy != have.AckPolicy {
		add("ack policy", have.AckPolicy, want.AckPolicy)
	}
	if want.AckWait != 0 && want.AckWait != have.AckWait {
		add("ack wait", have.AckWait, want.AckWait)
	}
	if want.MaxDeliver != 0 && want.MaxDeliver != have.MaxDeliver {
		add("max deliver", have.MaxDeliver, want.MaxDeliver)
	}
	if !slices.Equal(want.BackOff, have.BackOff) {
		add("backoff", have.BackOff, want.BackOff)
	}
	if want.FilterSubject != have.FilterSubject {
		add("filter subject", have.FilterSubject, want.FilterSubject)
	}
	if !slices.Equal(want.FilterSubjects, have.FilterSubjects) {
		add("filter subjects", have.FilterSubjects, want.FilterSubjects)
	}
	if want.MaxAckPending != 0 && want.MaxAckPending != have.MaxAckPending {
		add("max ack pending", have.MaxAckPending, want.MaxAckPending)
	}
	if want.DeliverPolicy != have.DeliverPolicy {
		add("deliver policy", have.DeliverPolicy, want.DeliverPolicy)
	}
	if want.Replicas != 0 && want.Replicas != have.Replicas {
		add("replicas", have.Replicas, want.Replicas)
	}
	return d
}

// CheckTimeout bounds how long the servers are waited for.
const CheckTimeout = 5 * time.Second

// ConnectContext connects with the natscli context file at path (one the
// kit wrote): its URL unless url is set, its user, password, inbox prefix
// and CA.
func ConnectContext(path, url string, opts ...nats.Option) (*nats.Conn, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kit: context: %w", err)
	}
	var c access.NATSContext
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("kit: context %s: %w", path, err)
	}
	if url == "" {
		url = c.URL
	}
	all := []nats.Option{nats.Name("deadletter-" + c.User), nats.UserInfo(c.User, c.Password), nats.CustomInboxPrefix(c.InboxPrefix), nats.Timeout(30 * time.Second)}
	if c.CA != "" {
		all = append(all, nats.RootCAs(c.CA))
	}
	nc, err := nats.Connect(url, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kit: connect as %s: %w", c.User, err)
	}
	return nc, nil
}

// Check compares the running cluster at url (empty: the kit's own URLs)
// with the kit in dir and with w: each server's config_digest (asked as
// the monitoring user) and the streams, buckets and consumers (read as
// the admin).
func Check(ctx context.Context, dir, url string, w Want) ([]Drift, error) {
	m, err := LoadManifest(dir)
	if err != nil {
		return nil, err
	}
	mon, err := ConnectContext(filepath.Join(dir, ContextsDir, access.Monitor+".json"), url)
	if err != nil {
		return nil, err
	}
	defer mon.Close()
	wctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	have, err := ServerDigests(wctx, mon, len(m.Options.Nodes))
	if err != nil {
		return nil, err
	}
	drift, err := CheckServers(dir, m, have)
	if err != nil {
		return nil, err
	}
	adm, err := ConnectContext(filepath.Join(dir, ContextsDir, access.Admin+".json"), url)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	js, err := jetstream.New(adm)
	if err != nil {
		return nil, fmt.Errorf("kit: jetstream: %w", err)
	}
	sd, err := CheckStreams(ctx, js, w)
	if err != nil {
		return nil, err
	}
	return append(drift, sd...), nil
}
