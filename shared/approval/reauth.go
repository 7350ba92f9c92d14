package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

// Reauthenticator checks, at signing, that the person signing is who the
// request says (21 CFR 11.200(a)(1): the signer re-enters a secret). It
// returns nil, an error wrapping ErrReauthFailed when the password does not
// authenticate user, or ErrUnavailable when it could not be checked.
type Reauthenticator interface {
	Reauthenticate(ctx context.Context, user string, password api.Password) error
}

// NATSReauth re-authenticates a person against the NATS server itself:
// it opens a short connection as user with password, which the server
// checks against the bcrypt hash of its configuration (there is no second
// password store), and closes it. User comes from the request's
// Nats-Request-Info (access.CallerOf), which the server writes: user names
// are unique across the server's accounts, so a connection that
// authenticates as user proves the password is the caller's own. The
// password is never logged, stored or echoed.
type NATSReauth struct {
	// URLs are the servers' client URLs (comma-separated, as nats.Connect
	// takes them).
	URLs string
	// Options are connect options besides the credentials: TLS (nats.Secure,
	// nats.RootCAs, ...). Reconnects are off whatever they say.
	Options []nats.Option
	// Timeout bounds the connection (default 5 s).
	Timeout time.Duration
}

// Reauthenticate opens and closes a connection as user with password.
func (r NATSReauth) Reauthenticate(ctx context.Context, user string, password api.Password) error {
	if user == "" || password == "" {
		return fmt.Errorf("%w: no user or password", ErrReauthFailed)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = max(time.Until(d), time.Millisecond)
	}
	opts := append([]nats.Option{}, r.Options...)
	opts = append(opts,
		nats.UserInfo(user, string(password)),
		nats.CustomInboxPrefix(access.InboxPrefix(user)),
		nats.Name("deadletter-reauth"),
		nats.Timeout(timeout),
		nats.NoReconnect(),
		nats.MaxReconnects(0),
		nats.RetryOnFailedConnect(false),
		nats.NoCallbacksAfterClientClose(),
		// nats.go would print a refused connection's error; nothing here
		// may reach a log but the outcome.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	)
	nc, err := nats.Connect(r.URLs, opts...)
	if err != nil {
		if isAuthError(err) {
			return fmt.Errorf("%w: the password does not authenticate %s", ErrReauthFailed, user)
		}
		return fmt.Errorf("%w: re-authentication: %w", ErrUnavailable, err)
	}
	defer nc.Close()
	// The connect succeeded only if the server accepted user's password;
	// a flush confirms the server kept the connection.
	if err := nc.FlushTimeout(timeout); err != nil {
		if isAuthError(err) || isAuthError(nc.LastError()) {
			return fmt.Errorf("%w: the password does not authenticate %s", ErrReauthFailed, user)
		}
		return fmt.Errorf("%w: re-authentication: %w", ErrUnavailable, err)
	}
	return nil
}

// isAuthError reports a connection refused for its credentials.
func isAuthError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "authorization violation") || strings.Contains(s, "authentication")
}
