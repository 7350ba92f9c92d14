// Package client is dlqctl's connection to deadletter, as a person (a user
// of a role account, with its private inbox prefix): request-reply calls
// to the services' micro endpoints through the account's imports (errors
// decoded from the Nats-Service-Error-Code and Nats-Service-Error headers)
// and JetStream publishes to events.> (a service import: the PubAck comes
// back). People have no JetStream API: everything else goes through the
// services' endpoints. It adds no logic of its own: everything it does,
// `nats req` and `nats pub` can do.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// Sentinel errors; the CLI maps them to codes and exit status.
var (
	// ErrConnect: the NATS server could not be reached or refused the
	// credentials.
	ErrConnect = errors.New("connect")
	// ErrNoResponders: no service listens on the subject.
	ErrNoResponders = errors.New("no service answers")
	// ErrTimeout: the service did not answer in time.
	ErrTimeout = errors.New("no reply in time")
	// ErrPermission: the server refused the user a subject.
	ErrPermission = errors.New("permission denied")
	// ErrBadReply: the reply could not be decoded.
	ErrBadReply = errors.New("unreadable reply")
)

// ServiceError is an endpoint's error reply: the *api.Error of the
// reply (code, message, field; endpoint.ErrorOf) and the subject called.
// errors.As finds the *api.Error through it.
type ServiceError struct {
	// Subject is the endpoint called.
	Subject string
	// Err is the reply's error.
	Err *api.Error
}

func (e *ServiceError) Error() string { return e.Subject + ": " + e.Err.Error() }

// Unwrap returns the *api.Error.
func (e *ServiceError) Unwrap() error { return e.Err }

// ErrNoCredentials: the server refused the connection's credentials (none,
// or wrong ones). It wraps ErrConnect.
var ErrNoCredentials = fmt.Errorf("%w: authorization violation: dlqctl needs credentials, e.g. --context data/contexts/amara.okafor.json", ErrConnect)

// Options are the connection options, like the nats CLI's.
type Options struct {
	config.Conn
	// Context names a nats CLI context: a name
	// (~/.config/nats/context/<name>.json) or the path of a context file
	// (data/contexts/amara.okafor.json, written by `make run`). Its url, creds,
	// user, password, nkey, inbox_prefix and TLS files fill the options not
	// set otherwise.
	Context string
	// Timeout bounds connecting and each request.
	Timeout time.Duration
	// Name is the connection name shown by the server.
	Name string
}

// natsContext is the part of a nats CLI context file dlqctl reads.
type natsContext struct {
	URL         string `json:"url"`
	Creds       string `json:"creds"`
	User        string `json:"user"`
	Password    string `json:"password"`
	NKey        string `json:"nkey"`
	InboxPrefix string `json:"inbox_prefix"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CA          string `json:"ca"`
}

// contextPath returns the file of a context: name itself when it is a
// path (it holds a path separator or ends in .json), else the nats CLI's
// context directory's <name>.json.
func contextPath(name string) (string, error) {
	if strings.ContainsAny(name, `/\`) || strings.HasSuffix(name, ".json") {
		return name, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "nats", "context", name+".json"), nil
}

// applyContext fills the unset options from the named nats CLI context.
func (o *Options) applyContext() error {
	if o.Context == "" {
		return nil
	}
	path, err := contextPath(o.Context)
	if err != nil {
		return fmt.Errorf("%w: context %s: %v", ErrConnect, o.Context, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: context %s: %v", ErrConnect, o.Context, err)
	}
	var c natsContext
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%w: context %s: %v", ErrConnect, o.Context, err)
	}
	fill := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	fill(&o.URL, c.URL)
	fill(&o.Creds, c.Creds)
	fill(&o.User, c.User)
	fill(&o.Password, c.Password)
	fill(&o.NKey, c.NKey)
	fill(&o.InboxPrefix, c.InboxPrefix)
	fill(&o.TLSCert, c.Cert)
	fill(&o.TLSKey, c.Key)
	fill(&o.TLSCA, c.CA)
	return nil
}

// Resolved returns o with its context applied (Context's url, user,
// password... filling what o does not set): the user it will connect as.
func (o Options) Resolved() (Options, error) {
	err := o.applyContext()
	return o, err
}

// ContextDir is the directory of the context file o names, when it names
// a file (make run's data/contexts/<person>.json); "" otherwise.
func (o Options) ContextDir() string {
	if o.Context == "" || !strings.ContainsAny(o.Context, `/\`) && !strings.HasSuffix(o.Context, ".json") {
		return ""
	}
	return filepath.Dir(o.Context)
}

// inboxPrefix is the connection's inbox prefix: the one given, else the
// user's private prefix (access.InboxPrefix: a person may subscribe to no
// other inbox), else nats.go's default.
func (o *Options) inboxPrefix() string {
	if o.InboxPrefix == "" && o.User != "" {
		return access.InboxPrefix(o.User)
	}
	return o.InboxPrefix
}

// credentialOptions are the nats options of the credentials, inbox prefix
// and TLS files (config.Conn.Options, with the user's private inbox prefix
// by default).
func (o *Options) credentialOptions() ([]nats.Option, error) {
	c := o.Conn
	c.InboxPrefix = o.inboxPrefix()
	opts, err := c.Options()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConnect, err)
	}
	return opts, nil
}

// Client is a connection to deadletter.
type Client struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	timeout time.Duration
	// denied receives the server's permission violations, which nats.go
	// reports asynchronously (a denied request would otherwise wait for its
	// timeout).
	denied chan error
}

// Connect dials NATS once (a CLI fails fast instead of retrying forever,
// unlike the services' config.Conn.Connect). A connection the server
// refuses for its credentials fails with ErrNoCredentials.
func Connect(o Options) (*Client, error) {
	if err := o.applyContext(); err != nil {
		return nil, err
	}
	if o.URL == "" {
		o.URL = os.Getenv("NATS_URL")
	}
	if o.URL == "" {
		o.URL = nats.DefaultURL
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	denied := make(chan error, 16)
	opts := []nats.Option{
		nats.Name(o.Name), nats.Timeout(min(o.Timeout, 10*time.Second)), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				select {
				case denied <- err:
				default:
				}
			}
		}),
	}
	creds, err := o.credentialOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.URL, append(opts, creds...)...)
	switch {
	case errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked):
		return nil, fmt.Errorf("%w (%s as %s)", ErrNoCredentials, o.URL, who(o))
	case err != nil:
		return nil, fmt.Errorf("%w %s: %v", ErrConnect, o.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %v", ErrConnect, err)
	}
	return &Client{nc: nc, js: js, timeout: o.Timeout, denied: denied}, nil
}

// who names the identity a connection tried, without its secret.
func who(o Options) string {
	switch {
	case o.User != "":
		return "user " + o.User
	case o.Creds != "":
		return "creds " + o.Creds
	case o.NKey != "":
		return "nkey " + o.NKey
	}
	return "nobody (no credentials given)"
}

// Close flushes and closes the connection.
func (c *Client) Close() {
	_ = c.nc.Flush()
	c.nc.Close()
}

// Timeout is the per-request timeout.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Request sends req (JSON-encoded; a json.RawMessage or []byte is sent as
// is) to subject and decodes the reply into out. A service error reply is
// returned as a *ServiceError.
func (c *Client) Request(ctx context.Context, subject string, req, out any) error {
	var body []byte
	switch v := req.(type) {
	case nil:
	case []byte:
		body = v
	case json.RawMessage:
		body = v
	default:
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("encode %s request: %w", subject, err)
		}
		body = b
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var perm error
	stop := c.watchDenied(func(err error) { perm = err; cancel() })
	msg, err := c.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: body})
	stop()
	switch {
	case err != nil && perm != nil && c.personDisabled():
		return access.ErrDisabled
	case err != nil && perm != nil:
		return fmt.Errorf("%w: %s: %v", ErrPermission, subject, perm)
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w on %s (is the service running?)", ErrNoResponders, subject)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%w: %s after %s", ErrTimeout, subject, c.timeout)
	case err != nil:
		return fmt.Errorf("%s: %w", subject, err)
	}
	if e := endpoint.ErrorOf(msg); e != nil {
		return &ServiceError{Subject: subject, Err: e}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("%w from %s: %v", ErrBadReply, subject, err)
	}
	return nil
}

// personDisabled asks the server whether the connection's person is
// disabled (access.Disabled: then the person is told so, not "permission
// denied"), bounded by the timeout and by a permission violation.
func (c *Client) personDisabled() bool {
	ctx, cancel := context.WithTimeout(context.Background(), min(c.timeout, 5*time.Second))
	defer cancel()
	stop := c.watchDenied(func(error) { cancel() })
	defer stop()
	disabled, err := access.Disabled(ctx, c.nc)
	return err == nil && disabled
}

// watchDenied calls fn with the first permission violation reported until
// the returned stop is called (stop waits for the watcher to end).
func (c *Client) watchDenied(fn func(error)) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case err := <-c.denied:
			fn(err)
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
