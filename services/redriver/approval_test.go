package redriver

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestReauthTLS: the signer's re-authentication verifies the server as the
// redriver's connection does, and never presents the redriver's client
// certificate (which a server mapping certificates to users would take
// for the redriver, whatever the password).
func TestReauthTLS(t *testing.T) {
	roots := func() (*x509.CertPool, error) { return x509.NewCertPool(), nil }
	for _, tc := range []struct {
		name       string
		o          nats.Options
		secure     bool
		withRootCB bool
	}{
		{"plain", nats.Options{}, false, false},
		{"tls config with a client certificate", nats.Options{TLSConfig: &tls.Config{ServerName: "nats", Certificates: []tls.Certificate{{}},
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }}}, true, false},
		{"root CAs only", nats.Options{Secure: true, RootCAsCB: roots}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := serverTLS(tc.o)
			var got nats.Options
			for _, o := range opts {
				if err := o(&got); err != nil {
					t.Fatal(err)
				}
			}
			if got.Secure != tc.secure || (got.RootCAsCB != nil) != tc.withRootCB || got.TLSCertCB != nil {
				t.Errorf("secure %v, root CAs %v, client cert callback %v", got.Secure, got.RootCAsCB != nil, got.TLSCertCB != nil)
			}
			if c := got.TLSConfig; c != nil && (len(c.Certificates) != 0 || c.GetClientCertificate != nil || c.ServerName != "nats") {
				t.Errorf("TLS config %+v: want the server name and no client certificate", c)
			}
			if tc.o.TLSConfig != nil && len(tc.o.TLSConfig.Certificates) != 1 {
				t.Errorf("the connection's own TLS config was changed")
			}
		})
	}
}
