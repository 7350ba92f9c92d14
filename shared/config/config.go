// Package config reads deadletter's configuration from the environment and
// the connection options every command shares (--nats-url / NATS_URL,
// credentials, TLS), so that each service's main stays thin.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/streams"
)

// Env reads typed variables from an environment lookup, collecting errors.
type Env struct {
	lookup func(string) (string, bool)
	errs   []error
}

// NewEnv reads from lookup (os.LookupEnv when nil).
func NewEnv(lookup func(string) (string, bool)) *Env {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return &Env{lookup: lookup}
}

// String sets *dst from name when set.
func (e *Env) String(name string, dst *string) {
	if v, ok := e.lookup(name); ok {
		*dst = v
	}
}

// Int sets *dst from name when set.
func (e *Env) Int(name string, dst *int) {
	if v, ok := e.lookup(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s: not an integer", name))
			return
		}
		*dst = n
	}
}

// Bool sets *dst from name when set.
func (e *Env) Bool(name string, dst *bool) {
	if v, ok := e.lookup(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s: not a boolean", name))
			return
		}
		*dst = b
	}
}

// Duration sets *dst from name (Go duration syntax, e.g. "30s") when set.
func (e *Env) Duration(name string, dst *time.Duration) {
	if v, ok := e.lookup(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s: not a duration", name))
			return
		}
		*dst = d
	}
}

// Streams sets what a service is told about the stores from
// DEADLETTER_REPLICAS (o.Replicas) and DEADLETTER_SYNC_ALWAYS
// (o.SyncAlways: whether the servers fsync every write), when set.
func (e *Env) Streams(o *streams.Options) {
	e.Int("DEADLETTER_REPLICAS", &o.Replicas)
	e.Bool("DEADLETTER_SYNC_ALWAYS", &o.SyncAlways)
}

// Retention sets *dst from DEADLETTER_RETENTION when set: per-domain
// retentions, "domain=duration,..." (streams.ParseRetention), overriding
// the domain registry's (streams.Options.Retention).
func (e *Env) Retention(dst *map[string]time.Duration) {
	if v, ok := e.lookup("DEADLETTER_RETENTION"); ok {
		m, err := streams.ParseRetention(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("DEADLETTER_RETENTION: %w", err))
			return
		}
		*dst = m
	}
}

// Failpoint sets *dst from failpoint.Env (DEADLETTER_FAILPOINT) when set:
// the chaos suite's targeted windows (package failpoint). A binary built
// without the build tag failpoint refuses any point (failpoint.ErrNotBuilt):
// set in production, the variable stops the service at start-up.
func (e *Env) Failpoint(dst **failpoint.Armed) {
	if v, ok := e.lookup(failpoint.Env); ok {
		a, err := failpoint.Parse(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s: %w", failpoint.Env, err))
			return
		}
		*dst = a
	}
}

// Err returns every error met so far.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// Conn holds the NATS connection options of a command.
type Conn struct {
	URL      string
	Creds    string
	User     string
	Password string
	// NKey is an nkey seed file (services authenticate with nkeys).
	NKey string
	// InboxPrefix is the connection's private inbox prefix.
	InboxPrefix string
	TLSCert     string
	TLSKey      string
	TLSCA       string
}

// ConnFlags registers --nats-url, --creds, --user, --password, --nkey,
// --inbox-prefix, --tlscert, --tlskey and --tlsca on fs, defaulting from
// NATS_URL, NATS_CREDS, NATS_USER, NATS_PASSWORD, NATS_NKEY and
// NATS_INBOX_PREFIX like the nats CLI.
func ConnFlags(fs *flag.FlagSet) *Conn {
	c := &Conn{}
	fs.StringVar(&c.URL, "nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL(s), comma separated (env NATS_URL)")
	fs.StringVar(&c.Creds, "creds", os.Getenv("NATS_CREDS"), "NATS credentials file (env NATS_CREDS)")
	fs.StringVar(&c.User, "user", os.Getenv("NATS_USER"), "NATS user (env NATS_USER)")
	fs.StringVar(&c.Password, "password", os.Getenv("NATS_PASSWORD"), "NATS password (env NATS_PASSWORD)")
	fs.StringVar(&c.NKey, "nkey", os.Getenv("NATS_NKEY"), "NATS nkey seed file (env NATS_NKEY): how services authenticate")
	fs.StringVar(&c.InboxPrefix, "inbox-prefix", os.Getenv("NATS_INBOX_PREFIX"), "prefix of this connection's reply inboxes (env NATS_INBOX_PREFIX; default _INBOX.<service>): each user may subscribe only to its own")
	fs.StringVar(&c.TLSCert, "tlscert", "", "TLS client certificate file")
	fs.StringVar(&c.TLSKey, "tlskey", "", "TLS client key file")
	fs.StringVar(&c.TLSCA, "tlsca", "", "TLS CA file")
	return c
}

// Options returns the nats options of the credentials, the inbox prefix
// and the TLS files.
func (c *Conn) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("nkey %s: %w", c.NKey, err)
		}
		opts = append(opts, o)
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	if c.TLSCert != "" || c.TLSKey != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	return opts, nil
}

// Connect dials NATS with the options, retrying forever on disconnects.
func (c *Conn) Connect(name string) (*nats.Conn, error) {
	opts, err := c.Options()
	if err != nil {
		return nil, err
	}
	opts = append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true)}, opts...)
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", c.URL, err)
	}
	return nc, nil
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// Instance sets *dst to the instance identity of a service process:
// DEADLETTER_INSTANCE_ID when set, otherwise StableInstanceID(service,
// DEADLETTER_INSTANCE_INDEX) (index 0 when unset). The default is the same
// on every restart of the process on its host, so a restarted redriver
// finds its own drains and resumes them at once instead of waiting for
// their lease; two instances of one service on one host need distinct
// DEADLETTER_INSTANCE_INDEX values.
func (e *Env) Instance(service string, dst *string) {
	if v, ok := e.lookup("DEADLETTER_INSTANCE_ID"); ok && v != "" {
		*dst = v
		return
	}
	*dst = StableInstanceID(service, e.InstanceIndex())
}

// InstanceIndex returns DEADLETTER_INSTANCE_INDEX (default 0): which of
// several instances of one service on one host this process is. It picks
// the default instance id and metrics port (package runner).
func (e *Env) InstanceIndex() int {
	index := 0
	e.Int("DEADLETTER_INSTANCE_INDEX", &index)
	if index < 0 {
		e.errs = append(e.errs, errors.New("DEADLETTER_INSTANCE_INDEX: negative"))
		index = 0
	}
	return index
}

// StableInstanceID returns "<hostname>-<service>-<index>": unique per host,
// service and index, and stable across restarts. A host whose name cannot
// be read is "localhost".
func StableInstanceID(service string, index int) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s-%s-%d", host, service, index)
}

// InstanceID returns a random instance name, "<service>-<12 hex digits>",
// for an instance whose configuration names none.
func InstanceID(service string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return service + "-" + hex.EncodeToString(b)
}
