package approved

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
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
			opts := ServerTLS(tc.o)
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

// TestCheckSigned: an approval executes only on a chain holding its
// signature at the index it was requested at.
func TestCheckSigned(t *testing.T) {
	a := &api.Approval{ID: "appr-1", ChainRecords: 1, Requester: "Pharmacie Saint-Étienne"}
	signed := record.Record{Kind: record.KindApproved, Signature: &record.Signature{ApprovalID: "appr-1"}}
	other := record.Record{Kind: record.KindApproved, Signature: &record.Signature{ApprovalID: "appr-2"}}
	first := record.Record{Kind: record.KindQuarantined}
	for _, tc := range []struct {
		name    string
		a       *api.Approval
		records []record.Record
		ok      bool
	}{
		{"no approval", nil, []record.Record{first}, true},
		{"signed at its index", a, []record.Record{first, signed}, true},
		{"another approval's signature", a, []record.Record{first, other}, false},
		{"signed at another index", a, []record.Record{signed, first}, false},
		{"no record at its index", a, []record.Record{first}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSigned(chain.Chain{Records: tc.records}, tc.a)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrChainMoved)) {
				t.Errorf("CheckSigned = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestStepAt: a step is done when the record at its index is its kind by
// the requester.
func TestStepAt(t *testing.T) {
	a := &api.Approval{ID: "appr-1", Requester: "Müller & Söhne <Großhandel>"}
	ch := chain.Chain{Records: []record.Record{{Kind: record.KindQuarantined}, {Kind: record.KindCorrected, Actor: a.Requester},
		{Kind: record.KindCorrected, Actor: "someone else"}}}
	for _, tc := range []struct {
		name string
		a    *api.Approval
		i    int
		want bool
	}{
		{"the requester's correction", a, 1, true},
		{"another person's", a, 2, false},
		{"another kind", a, 0, false},
		{"past the chain", a, 3, false},
		{"no approval", nil, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StepAt(ch, tc.i, record.KindCorrected, tc.a); got != tc.want {
				t.Errorf("StepAt = %v, want %v", got, tc.want)
			}
		})
	}
	if got := DrainID("appr-42"); got != "drain-42" {
		t.Errorf("DrainID = %q", got)
	}
}
