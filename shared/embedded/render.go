package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
)

// DefaultMaxPayload is the largest message a deadletter server accepts
// (8 MiB): room for a quarantine record of the largest event EVENTS
// accepts (streams.Options.MaxEventSize, 2 MiB) with its envelope.
const DefaultMaxPayload = 8 << 20

// File is the configuration of one nats-server as deadletter runs it: the
// one renderer behind both the embedded server (Start) and the generated
// files of a cluster (package shared/access/kit), so that the two cannot
// drift. Render writes it as nats-server configuration text.
type File struct {
	// ServerName names the server; unique in a cluster.
	ServerName string
	// Host and Port are the client listen address (Port -1: a free port).
	Host string
	Port int
	// StoreDir is the JetStream file-store directory.
	StoreDir string
	// SyncAlways fsyncs every JetStream write before acknowledging it
	// (sync_interval: always).
	SyncAlways bool
	// MaxPayload is the largest message accepted.
	MaxPayload int32
	// HTTP is the host:port of the monitoring endpoints (/varz, /healthz);
	// empty serves none. They have no authentication: bind it to a
	// loopback or private address.
	HTTP string
	// Cluster, when set, makes the server a node of a cluster.
	Cluster *Cluster
	// TLS, when set, is the client (and route) TLS, by file paths.
	TLS *TLSFiles
	// Accounts is nats-server configuration text holding only an
	// "accounts" block (access.ServerConfig); empty for none.
	Accounts string
	// System, when set, is the system account and its users.
	System *SystemAccount
	// Tags are the server's tags (server_tags), e.g. its failure domain
	// "zone:a"; UniqueTag, when set, is the tag prefix whose values must
	// differ between the replicas of a stream (jetstream.unique_tag): the
	// server then places every stream's replicas in distinct zones.
	Tags      []string
	UniqueTag string
}

// Cluster is a node's cluster block.
type Cluster struct {
	// Name is the cluster name, the same on every node.
	Name string
	// Listen is the host:port of the routes.
	Listen string
	// Routes are every node's route URLs (nats-route://host:port).
	Routes []string
	// User and Password authenticate routes: a node dials the others with
	// them and accepts only routes that present them.
	User, Password string
}

// TLSFiles are TLS settings by file path (PEM).
type TLSFiles struct {
	// Cert and Key are the server's certificate and private key.
	Cert, Key string
	// CA, when set, verifies peers (routes always; clients only with
	// Verify).
	CA string
	// Verify requires client certificates.
	Verify bool
}

// SystemAccount is the server's system account: it sees $SYS (server
// pings, /varz by request) and nothing of the services' accounts.
type SystemAccount struct {
	// Name is the account name.
	Name string
	// Users are its users; Password holds a bcrypt hash.
	Users []User
}

// User is a user and password (bcrypt hash) of a configuration, with
// allow-lists when Publish or Subscribe is set.
type User struct {
	// User is the user name.
	User string
	// Password is a bcrypt hash.
	Password string
	// Publish and Subscribe are the subjects allowed; nil allows all.
	Publish, Subscribe []string
}

// entry renders the user as a configuration's users entry.
func (u User) entry() map[string]any {
	m := map[string]any{"user": u.User, "password": u.Password}
	if u.Publish != nil || u.Subscribe != nil {
		m["permissions"] = map[string]any{
			"publish":   map[string]any{"allow": u.Publish},
			"subscribe": map[string]any{"allow": u.Subscribe},
		}
	}
	return m
}

// BatchTimeout is how long the server keeps an atomic batch open without
// its commit (the server's default is 10 s). EVENTS allows atomic batches
// so that producers write many events with one fsync, and any publisher
// can open batches there: up to the server's 50 per stream, which then
// refuses everyone else's batches until they time out (their producers
// fall back to one event per publish, and nothing is lost). A batch of a
// real producer is committed within milliseconds; a held one is dropped
// after BatchTimeout. Other streams are not affected: publishers can open
// batches only on EVENTS.
const BatchTimeout = 2 * time.Second

// ErrRender is returned when a File cannot be rendered.
var ErrRender = errors.New("embedded: render configuration")

// Render writes f as nats-server configuration text (JSON, which the
// configuration parser reads like its own syntax).
func (f File) Render() (string, error) {
	m := map[string]any{
		"server_name": f.ServerName,
		"host":        f.Host,
		"port":        f.Port,
		"max_payload": f.MaxPayload,
	}
	js := map[string]any{"store_dir": f.StoreDir,
		"limits": map[string]any{"batch": map[string]any{"timeout": BatchTimeout.String()}}}
	if f.SyncAlways {
		js["sync_interval"] = "always"
	}
	if f.UniqueTag != "" {
		js["unique_tag"] = f.UniqueTag
	}
	m["jetstream"] = js
	if len(f.Tags) > 0 {
		m["server_tags"] = f.Tags
	}
	if f.HTTP != "" {
		m["http"] = f.HTTP
	}
	if f.TLS != nil {
		m["tls"] = f.TLS.block(f.TLS.Verify)
	}
	if c := f.Cluster; c != nil {
		cb := map[string]any{"name": c.Name, "listen": c.Listen, "routes": c.Routes}
		if c.User != "" {
			cb["authorization"] = map[string]any{"user": c.User, "password": c.Password}
		}
		if f.TLS != nil {
			cb["tls"] = f.TLS.block(f.TLS.CA != "")
		}
		m["cluster"] = cb
	}
	accounts := map[string]any{}
	if f.Accounts != "" {
		parsed, err := conf.Parse(f.Accounts)
		if err != nil {
			return "", fmt.Errorf("%w: accounts: %w", ErrRender, err)
		}
		for k := range parsed {
			if k != "accounts" {
				return "", fmt.Errorf("%w: accounts text holds %q (only an accounts block)", ErrRender, k)
			}
		}
		a, ok := parsed["accounts"].(map[string]any)
		if !ok {
			return "", fmt.Errorf("%w: accounts is not a map", ErrRender)
		}
		maps.Copy(accounts, a)
	}
	if s := f.System; s != nil {
		if _, dup := accounts[s.Name]; dup {
			return "", fmt.Errorf("%w: system account %q is also a service account", ErrRender, s.Name)
		}
		users := make([]map[string]any, len(s.Users))
		for i, u := range s.Users {
			users[i] = u.entry()
		}
		accounts[s.Name] = map[string]any{"users": users}
		m["system_account"] = s.Name
	}
	if len(accounts) > 0 {
		m["accounts"] = accounts
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	// No HTML escaping: the parser knows no \u escapes, and subjects hold '>'.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return "", fmt.Errorf("%w: %w", ErrRender, err)
	}
	return b.String(), nil
}

func (t TLSFiles) block(verify bool) map[string]any {
	b := map[string]any{"cert_file": t.Cert, "key_file": t.Key}
	if t.CA != "" {
		b["ca_file"] = t.CA
	}
	if verify {
		b["verify"] = true
	}
	return b
}
