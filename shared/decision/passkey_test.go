package decision

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"

	"github.com/deadletter/deadletter/shared/api"
)

// authenticator is a software WebAuthn authenticator, as a security key
// or a platform authenticator computes its answers: a credential id, a
// private key (ES256 or EdDSA), its COSE public key, and the relying
// party it was made for.
type authenticator struct {
	t      *testing.T
	id     []byte
	ec     *ecdsa.PrivateKey
	ed     ed25519.PrivateKey
	cose   []byte
	rpID   string
	origin string
	count  uint32
}

const (
	testRPID   = "console.pharma.example"
	testOrigin = "https://console.pharma.example:8443"
)

func newAuthenticator(t *testing.T, alg webauthncose.COSEAlgorithmIdentifier) *authenticator {
	t.Helper()
	a := &authenticator{t: t, id: make([]byte, 32), rpID: testRPID, origin: testOrigin}
	_, _ = rand.Read(a.id)
	var (
		cose []byte
		err  error
	)
	switch alg {
	case webauthncose.AlgES256:
		a.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pub, perr := a.ec.PublicKey.Bytes() // 0x04 || X || Y
		if perr != nil {
			t.Fatal(perr)
		}
		cose, err = webauthncbor.Marshal(webauthncose.EC2PublicKeyData{
			PublicKeyData: webauthncose.PublicKeyData{KeyType: int64(webauthncose.EllipticKey), Algorithm: int64(alg)},
			Curve:         1, XCoord: pub[1:33], YCoord: pub[33:],
		})
	case webauthncose.AlgEdDSA:
		var pub ed25519.PublicKey
		pub, a.ed, err = ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		cose, err = webauthncbor.Marshal(webauthncose.OKPPublicKeyData{
			PublicKeyData: webauthncose.PublicKeyData{KeyType: int64(webauthncose.OctetKey), Algorithm: int64(alg)},
			Curve:         6, XCoord: pub,
		})
	default:
		t.Fatalf("no software authenticator for %d", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	a.cose = cose
	return a
}

// keyID is the credential id, base64url.
func (a *authenticator) keyID() string { return base64.RawURLEncoding.EncodeToString(a.id) }

// key is the registered key (what VerifyPasskeyCreation returns).
func (a *authenticator) key() api.DecisionKey {
	return api.DecisionKey{Scheme: api.SchemePasskey, ID: a.keyID(), Public: a.cose, RPID: a.rpID, Origin: a.origin,
		Label: "Laptop von Jürgen Groß", AddedAt: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
}

// sign signs data as the credential (ECDSA ASN.1 over SHA-256, or
// ed25519 over the message).
func (a *authenticator) sign(data []byte) []byte {
	if a.ed != nil {
		return ed25519.Sign(a.ed, data)
	}
	h := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, a.ec, h[:])
	if err != nil {
		a.t.Fatal(err)
	}
	return sig
}

// Authenticator data flags.
const (
	flagUP = 0x01
	flagUV = 0x04
	flagAT = 0x40
)

// authData is rpIdHash || flags || signCount, with the attested
// credential (AAGUID, id, COSE key) when flags has AT.
func (a *authenticator) authData(rpID string, flags byte) []byte {
	h := sha256.Sum256([]byte(rpID))
	a.count++
	b := append(h[:], flags)
	b = binary.BigEndian.AppendUint32(b, a.count)
	if flags&flagAT != 0 {
		b = append(b, make([]byte, 16)...) // AAGUID: none
		b = binary.BigEndian.AppendUint16(b, uint16(len(a.id)))
		b = append(b, a.id...)
		b = append(b, a.cose...)
	}
	return b
}

// clientData is the browser's client data JSON.
func clientData(typ, challenge, origin string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": origin, "crossOrigin": false})
	return b
}

// assertion is what an authenticator answers navigator.credentials.get.
type assertion struct {
	typ, challenge, origin, rpID string
	flags                        byte
}

// signDecision signs d as navigator.credentials.get with d's challenge
// would, changed by change.
func (a *authenticator) signDecision(d api.Decision, change func(*assertion)) api.SignedDecision {
	as := assertion{typ: "webauthn.get", challenge: Challenge(d), origin: a.origin, rpID: a.rpID, flags: flagUP | flagUV}
	if change != nil {
		change(&as)
	}
	ad := a.authData(as.rpID, as.flags)
	cd := clientData(as.typ, as.challenge, as.origin)
	h := sha256.Sum256(cd)
	return api.SignedDecision{Decision: d, Signature: api.DecisionSignature{
		Scheme: api.SchemePasskey, KeyID: a.keyID(), Signature: a.sign(append(append([]byte{}, ad...), h[:]...)),
		AuthenticatorData: ad, ClientDataJSON: cd,
	}}
}

// testDecision is an approval of a correction of a DSCSA record.
func testDecision() api.Decision {
	return api.Decision{
		Action:  api.DecisionApprove,
		Target:  "APR-01JF3Q8Z7W2M4N6P8R0T2V4X6Y",
		Request: strings.Repeat("ab", 32),
		Chain:   strings.Repeat("c0", 32),
		Meaning: `Reviewed against Lieferschein 4711 of Müller & Söhne <Großhandel> "Nord"; 陈伟 confirmed the lot`,
		Person:  "chen.wei",
		Role:    "approver",
		At:      time.Date(2026, 12, 7, 19, 45, 12, 0, time.UTC),
	}
}

func TestVerifyPasskey(t *testing.T) {
	es := newAuthenticator(t, webauthncose.AlgES256)
	ed := newAuthenticator(t, webauthncose.AlgEdDSA)
	other := newAuthenticator(t, webauthncose.AlgES256)
	d := testDecision()
	tests := []struct {
		name string
		key  api.DecisionKey
		sd   func() api.SignedDecision
		want error
	}{
		{"good ES256", es.key(), func() api.SignedDecision { return es.signDecision(d, nil) }, nil},
		{"good EdDSA", ed.key(), func() api.SignedDecision { return ed.signDecision(d, nil) }, nil},
		{"other challenge (another decision's)", es.key(), func() api.SignedDecision {
			o := d
			o.Target = "APR-01JF3Q8Z7W2M4N6P8R0T2V4X6Z"
			return es.signDecision(d, func(a *assertion) { a.challenge = Challenge(o) })
		}, ErrBadSignature},
		{"the decision changed after signing (meaning)", es.key(), func() api.SignedDecision {
			sd := es.signDecision(d, nil)
			sd.Decision.Meaning = "approved without review"
			return sd
		}, ErrBadSignature},
		{"the decision changed after signing (at)", es.key(), func() api.SignedDecision {
			sd := es.signDecision(d, nil)
			sd.Decision.At = sd.Decision.At.Add(time.Hour)
			return sd
		}, ErrBadSignature},
		{"other origin", es.key(), func() api.SignedDecision {
			return es.signDecision(d, func(a *assertion) { a.origin = "https://console.pharma.example.attacker.test" })
		}, ErrBadSignature},
		{"other rpId", es.key(), func() api.SignedDecision {
			return es.signDecision(d, func(a *assertion) { a.rpID = "pharma.example" })
		}, ErrBadSignature},
		{"flipped signature byte", es.key(), func() api.SignedDecision {
			sd := es.signDecision(d, nil)
			sd.Signature.Signature[len(sd.Signature.Signature)/2] ^= 0x01
			return sd
		}, ErrBadSignature},
		{"flipped authenticator data byte (sign count)", es.key(), func() api.SignedDecision {
			sd := es.signDecision(d, nil)
			sd.Signature.AuthenticatorData[36] ^= 0x01
			return sd
		}, ErrBadSignature},
		{"no user presence", es.key(), func() api.SignedDecision {
			return es.signDecision(d, func(a *assertion) { a.flags = flagUV })
		}, ErrBadSignature},
		{"no user verification", es.key(), func() api.SignedDecision {
			return es.signDecision(d, func(a *assertion) { a.flags = flagUP })
		}, ErrBadSignature},
		{"a creation's client data (webauthn.create)", es.key(), func() api.SignedDecision {
			return es.signDecision(d, func(a *assertion) { a.typ = "webauthn.create" })
		}, ErrBadSignature},
		{"another authenticator's signature under this key id", es.key(), func() api.SignedDecision {
			sd := other.signDecision(d, nil)
			sd.Signature.KeyID = es.keyID()
			return sd
		}, ErrBadSignature},
		{"another credential's key id", es.key(), func() api.SignedDecision { return other.signDecision(d, nil) }, ErrUnknownKey},
		{"no client data", es.key(), func() api.SignedDecision {
			sd := es.signDecision(d, nil)
			sd.Signature.ClientDataJSON = nil
			return sd
		}, ErrBadSignature},
		{"client data not JSON", es.key(), func() api.SignedDecision {
			sd := es.signDecision(d, nil)
			sd.Signature.ClientDataJSON = []byte(`{"type":"webauthn.get","challenge":`)
			return sd
		}, ErrBadSignature},
		{"authenticator data cut short", es.key(), func() api.SignedDecision {
			sd := es.signDecision(d, nil)
			sd.Signature.AuthenticatorData = sd.Signature.AuthenticatorData[:20]
			return sd
		}, ErrBadSignature},
		{"unsigned", es.key(), func() api.SignedDecision { return api.SignedDecision{Decision: d} }, ErrUnsigned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.key, tt.sd())
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), "Müller") || strings.Contains(err.Error(), "Lieferschein") {
				t.Errorf("the error repeats the decision's meaning: %v", err)
			}
		})
	}
}

// creation is what navigator.credentials.create returns, changed by
// change before the attestation is signed.
type creation struct {
	typ, challenge, origin, rpID string
	flags                        byte
	format                       string // "none" or "packed" (self attestation)
}

func (a *authenticator) create(challenge string, change func(*creation)) PasskeyCreation {
	c := creation{typ: "webauthn.create", challenge: challenge, origin: a.origin, rpID: a.rpID, flags: flagUP | flagUV | flagAT, format: "none"}
	if change != nil {
		change(&c)
	}
	ad := a.authData(c.rpID, c.flags)
	cd := clientData(c.typ, c.challenge, c.origin)
	stmt := map[string]any{}
	if c.format == "packed" {
		h := sha256.Sum256(cd)
		alg := int64(webauthncose.AlgES256)
		if a.ed != nil {
			alg = int64(webauthncose.AlgEdDSA)
		}
		stmt = map[string]any{"alg": alg, "sig": a.sign(append(append([]byte{}, ad...), h[:]...))}
	}
	obj, err := webauthncbor.Marshal(map[string]any{"fmt": c.format, "attStmt": stmt, "authData": ad})
	if err != nil {
		a.t.Fatal(err)
	}
	return PasskeyCreation{ID: a.keyID(), AttestationObject: obj, ClientDataJSON: cd}
}

func TestVerifyPasskeyCreation(t *testing.T) {
	es := newAuthenticator(t, webauthncose.AlgES256)
	ed := newAuthenticator(t, webauthncose.AlgEdDSA)
	challenge := base64.RawURLEncoding.EncodeToString([]byte("a random 32-byte challenge......"))
	at := time.Date(2026, 12, 7, 19, 30, 5, 123, time.UTC)
	tests := []struct {
		name   string
		a      *authenticator
		change func(*creation)
		want   error
	}{
		{"none attestation, ES256", es, nil, nil},
		{"packed self attestation, ES256", es, func(c *creation) { c.format = "packed" }, nil},
		{"packed self attestation, EdDSA", ed, func(c *creation) { c.format = "packed" }, nil},
		{"other challenge", es, func(c *creation) { c.challenge = "b3RoZXI" }, ErrRegistration},
		{"other origin", es, func(c *creation) { c.origin = "https://evil.example" }, ErrRegistration},
		{"other rpId", es, func(c *creation) { c.rpID = "evil.example" }, ErrRegistration},
		{"no user presence", es, func(c *creation) { c.flags = flagUV | flagAT }, ErrRegistration},
		{"no user verification", es, func(c *creation) { c.flags = flagUP | flagAT }, ErrRegistration},
		{"an assertion's client data", es, func(c *creation) { c.typ = "webauthn.get" }, ErrRegistration},
		{"unknown attestation format", es, func(c *creation) { c.format = "acme-proprietary" }, ErrRegistration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := VerifyPasskeyCreation(tt.a.create(challenge, tt.change), challenge, testRPID, testOrigin, "YubiKey 5C · 陈伟", at)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("VerifyPasskeyCreation = %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("VerifyPasskeyCreation: %v", err)
			}
			want := tt.a.key()
			want.Label, want.AddedAt = "YubiKey 5C · 陈伟", at.Truncate(time.Second)
			if got, _ := json.Marshal(k); string(got) != string(mustJSON(t, want)) {
				t.Fatalf("key = %s, want %s", got, mustJSON(t, want))
			}
			// The key registered verifies the authenticator's decisions.
			if err := Verify(k, tt.a.signDecision(testDecision(), nil)); err != nil {
				t.Fatalf("Verify with the registered key: %v", err)
			}
		})
	}
	t.Run("a creation whose id is not the attested one", func(t *testing.T) {
		c := es.create(challenge, nil)
		c.ID = ed.keyID()
		if _, err := VerifyPasskeyCreation(c, challenge, testRPID, testOrigin, "", at); !errors.Is(err, ErrRegistration) {
			t.Fatalf("VerifyPasskeyCreation = %v, want ErrRegistration", err)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPasskeyRegistrationText(t *testing.T) {
	es := newAuthenticator(t, webauthncose.AlgES256)
	ed := newAuthenticator(t, webauthncose.AlgEdDSA)
	for _, a := range []*authenticator{es, ed} {
		k := a.key()
		text := PasskeyRegistration(k)
		if !strings.HasPrefix(text, "passkey:") || strings.ContainsAny(text, " \n\t") {
			t.Fatalf("registration text %q: want one line starting passkey:", text)
		}
		got, err := ParsePasskeyRegistration("  " + text + "\n")
		if err != nil {
			t.Fatalf("ParsePasskeyRegistration(PasskeyRegistration(k)): %v", err)
		}
		if string(mustJSON(t, got)) != string(mustJSON(t, k)) {
			t.Fatalf("round trip = %s, want %s", mustJSON(t, got), mustJSON(t, k))
		}
	}
	enc := func(v any) string { return "passkey:" + base64.RawURLEncoding.EncodeToString(mustJSON(t, v)) }
	with := func(change func(*api.DecisionKey)) string {
		k := es.key()
		change(&k)
		return enc(k)
	}
	rsaLike, _ := webauthncbor.Marshal(webauthncose.EC2PublicKeyData{
		PublicKeyData: webauthncose.PublicKeyData{KeyType: int64(webauthncose.EllipticKey), Algorithm: int64(webauthncose.AlgES256)},
		Curve:         1, XCoord: make([]byte, 32), YCoord: make([]byte, 32),
	})
	now := time.Now()
	bad := []struct{ name, text string }{
		{"empty", ""},
		{"an ed25519 key's text", "ed25519:" + es.keyID()},
		{"not base64url", "passkey:<script>alert(1)</script>"},
		{"not JSON", "passkey:" + base64.RawURLEncoding.EncodeToString([]byte(`{"scheme":"webauthn",`))},
		{"unknown member", enc(map[string]any{"scheme": "webauthn", "id": es.keyID(), "admin": true})},
		{"scheme ed25519", with(func(k *api.DecisionKey) { k.Scheme = api.SchemeEd25519 })},
		{"no credential id", with(func(k *api.DecisionKey) { k.ID = "" })},
		{"credential id not base64url", with(func(k *api.DecisionKey) { k.ID = "Müller & Söhne" })},
		{"no rp id", with(func(k *api.DecisionKey) { k.RPID = "" })},
		{"no origin", with(func(k *api.DecisionKey) { k.Origin = "" })},
		{"origin with a path", with(func(k *api.DecisionKey) { k.Origin = testOrigin + "/passkeys" })},
		{"revoked", with(func(k *api.DecisionKey) { k.RevokedAt = &now })},
		{"public key not COSE", with(func(k *api.DecisionKey) { k.Public = []byte("-----BEGIN PUBLIC KEY-----") })},
		{"public key not on the curve", with(func(k *api.DecisionKey) { k.Public = rsaLike })},
		{"a label with a terminal escape", with(func(k *api.DecisionKey) { k.Label = "laptop\x1b[2J" })},
		{"a label too long", with(func(k *api.DecisionKey) { k.Label = strings.Repeat("陈", MaxLabel+1) })},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParsePasskeyRegistration(tt.text); !errors.Is(err, ErrRegistration) {
				t.Fatalf("ParsePasskeyRegistration = %v, want ErrRegistration", err)
			}
		})
	}
}
