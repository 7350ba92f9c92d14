package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"testing"
	"time"
)

func TestSealRoundTrip(t *testing.T) {
	r, raw := mustSeal(t, FromFailure(testFailure(), t0))
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(r.AuditHash) {
		t.Fatalf("AuditHash %q is not lowercase hex SHA-256", r.AuditHash)
	}
	if err := VerifySeal(raw); err != nil {
		t.Fatalf("VerifySeal: %v", err)
	}
	got, err := Parse(raw)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("Parse(Marshal(r)) != r\n got %+v\nwant %+v", got, r)
	}
	again := r
	again.AuditHash = "stale"
	if err := Seal(&again); err != nil || again.AuditHash != r.AuditHash {
		t.Errorf("re-Seal = %q, %v; want %q (the old audit_hash is not hashed)", again.AuditHash, err, r.AuditHash)
	}
}

// TestSealMarshal: SealMarshal gives the bytes and seal of Seal then
// Marshal, for the first record and a lifecycle record.
func TestSealMarshal(t *testing.T) {
	first, _ := mustSeal(t, FromFailure(testFailure(), t0))
	later := follow(first, KindRedriveRequested)
	first.AuditHash = ""
	for name, r := range map[string]Record{"first": first, "lifecycle": later} {
		t.Run(name, func(t *testing.T) {
			want, wantRaw := mustSeal(t, r)
			got := r
			raw, err := SealMarshal(&got)
			if err != nil {
				t.Fatal(err)
			}
			if got.AuditHash != want.AuditHash || !bytes.Equal(raw, wantRaw) {
				t.Errorf("SealMarshal = %s %s\nwant %s %s", got.AuditHash, raw, want.AuditHash, wantRaw)
			}
			if err := VerifySeal(raw); err != nil {
				t.Errorf("VerifySeal: %v", err)
			}
		})
	}
}

// TestSealInspectorRecipe recomputes the seal as the package doc tells an
// inspector to, with generic JSON only.
func TestSealInspectorRecipe(t *testing.T) {
	_, raw := mustSeal(t, FromFailure(testFailure(), t0))
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	h := doc["audit_hash"].(string)
	delete(doc, "audit_hash")
	generic, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := Canonical(generic)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	if got := hex.EncodeToString(sum[:]); got != h {
		t.Errorf("recipe hash %s, audit_hash %s", got, h)
	}
}

func TestSealErrors(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	tests := []struct {
		name string
		mod  func(*Record)
		want error
	}{
		{"quarantined_at not UTC", func(r *Record) { r.QuarantinedAt = t0.In(tokyo) }, ErrNotUTC},
		{"first_seen not UTC", func(r *Record) { r.FirstSeen = t0.In(tokyo) }, ErrNotUTC},
		{"event_time not UTC", func(r *Record) { e := t0.In(tokyo); r.EventTime = &e }, ErrNotUTC},
		{"attempt not UTC", func(r *Record) { r.Attempts[0].At = t0.In(tokyo) }, ErrNotUTC},
		{"source_seq beyond 2^53-1", func(r *Record) { r.SourceSeq = 1 << 53 }, ErrUnsafeNumber},
		{"delivery beyond 2^53-1", func(r *Record) { r.Attempts[0].Delivery = 1<<64 - 1 }, ErrUnsafeNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := FromFailure(testFailure(), t0)
			tt.mod(&r)
			if err := Seal(&r); !errors.Is(err, tt.want) {
				t.Fatalf("Seal = %v, want %v", err, tt.want)
			}
			if r.AuditHash != "" {
				t.Errorf("failed Seal changed AuditHash to %q", r.AuditHash)
			}
		})
	}
	t.Run("UTC under another name is UTC", func(t *testing.T) {
		r := FromFailure(testFailure(), t0)
		r.QuarantinedAt = t0.In(time.FixedZone("GMT", 0))
		if err := Seal(&r); err != nil {
			t.Fatalf("Seal: %v", err)
		}
	})
}

func TestMarshalErrors(t *testing.T) {
	r := FromFailure(testFailure(), t0)
	if _, err := Marshal(r); !errors.Is(err, ErrUnsealed) {
		t.Errorf("Marshal(unsealed) = %v, want ErrUnsealed", err)
	}
	r, _ = mustSeal(t, r)
	r.ErrorDetail = "changed after sealing"
	if _, err := Marshal(r); !errors.Is(err, ErrSealMismatch) {
		t.Errorf("Marshal(changed) = %v, want ErrSealMismatch", err)
	}
}

// TestVerifySealEveryByteFlip flips the low bit of every byte of a stored
// record: the seal must fail, and a flip that breaks the JSON must be
// reported as unparseable by VerifyChain. (The low bit is chosen because it
// changes the value of every hex digit, digit and letter; flipping case in
// a \u escape would be an equivalent encoding, which the canonical form
// rightly accepts.)
func TestVerifySealEveryByteFlip(t *testing.T) {
	_, raw := mustSeal(t, FromFailure(testFailure(), t0))
	var unparseable, mismatched int
	for i := range raw {
		flipped := bytes.Clone(raw)
		flipped[i] ^= 0x01
		if !json.Valid(flipped) {
			unparseable++
			ps := VerifyChain([][]byte{flipped})
			if len(ps) != 1 || ps[0].Kind != ProblemUnparseable {
				t.Errorf("byte %d (%q→%q) makes invalid JSON: problems %+v, want one unparseable", i, raw[i], flipped[i], ps)
			}
			continue
		}
		mismatched++
		if err := VerifySeal(flipped); err == nil {
			t.Errorf("byte %d (%q→%q): VerifySeal accepted the change", i, raw[i], flipped[i])
		}
		if ps := VerifyChain([][]byte{flipped}); len(ps) == 0 {
			t.Errorf("byte %d (%q→%q): VerifyChain found no problem", i, raw[i], flipped[i])
		}
	}
	t.Logf("%d bytes: %d flips break the JSON, %d break the seal", len(raw), unparseable, mismatched)
	if mismatched == 0 || unparseable == 0 {
		t.Errorf("expected both kinds of flips")
	}
}

func TestVerifySealReformatted(t *testing.T) {
	_, raw := mustSeal(t, FromFailure(testFailure(), t0))
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	reordered, err := json.Marshal(generic) // members sorted, HTML escaped
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, raw, "\t", "    "); err != nil {
		t.Fatal(err)
	}
	var reorderedIndented bytes.Buffer
	if err := json.Indent(&reorderedIndented, reordered, "", " "); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		raw  []byte
	}{
		{"as stored", raw},
		{"indented", indented.Bytes()},
		{"members reordered and HTML escaped", reordered},
		{"reordered and indented", reorderedIndented.Bytes()},
		{"surrounding whitespace", append(append([]byte("\n  "), raw...), " \r\n"...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := VerifySeal(tt.raw); err != nil {
				t.Errorf("VerifySeal: %v", err)
			}
		})
	}
}

func TestVerifySealRejects(t *testing.T) {
	_, raw := mustSeal(t, FromFailure(testFailure(), t0))
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	with := func(mod func(map[string]any)) []byte {
		m := map[string]any{}
		for k, v := range generic {
			m[k] = v
		}
		mod(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		raw  []byte
		want error
	}{
		{"unknown member added", with(func(m map[string]any) { m["x_note"] = "later" }), ErrSealMismatch},
		{"member removed", with(func(m map[string]any) { delete(m, "drain_id"); delete(m, "trace_id") }), ErrSealMismatch},
		{"null instead of empty string", with(func(m map[string]any) { m["prev_hash"] = nil }), ErrSealMismatch},
		{"audit_hash upper-case", with(func(m map[string]any) {
			m["audit_hash"] = string(bytes.ToUpper([]byte(m["audit_hash"].(string))))
		}), ErrSealMismatch},
		{"no audit_hash", with(func(m map[string]any) { delete(m, "audit_hash") }), ErrNoAuditHash},
		{"audit_hash not a string", with(func(m map[string]any) { m["audit_hash"] = 1 }), ErrInvalidJSON},
		{"duplicate top-level member", append(bytes.TrimSuffix(raw, []byte("}")), `,"index":0}`...), ErrInvalidJSON},
		{"trailing data", append(bytes.Clone(raw), "{}"...), ErrInvalidJSON},
		{"not an object", []byte(`[1,2]`), ErrNotObject},
		{"empty", nil, ErrInvalidJSON},
		{"invalid utf-8", append([]byte{0xff}, raw...), ErrInvalidJSON},
		{"unsafe number", with(func(m map[string]any) { m["source_seq"] = 1 << 60 }), ErrUnsafeNumber},
		{"fraction", with(func(m map[string]any) { m["index"] = 0.5 }), ErrUnsafeNumber},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := VerifySeal(tt.raw); !errors.Is(err, tt.want) {
				t.Errorf("VerifySeal = %v, want %v", err, tt.want)
			}
			if _, err := Parse(tt.raw); err == nil {
				t.Errorf("Parse accepted it")
			}
		})
	}
}

// genericHash is the inspector recipe with generic JSON: decode, delete the
// top-level audit_hash, canonicalize, SHA-256.
func genericHash(t *testing.T, raw []byte) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "audit_hash")
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := Canonical(b)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// TestSealMemberRemoval checks that only the top-level audit_hash member
// is left out of the hash, wherever it sorts and whatever surrounds it.
func TestSealMemberRemoval(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"only member", `{"audit_hash":"h"}`},
		{"first member", `{"audit_hash":"h","b":1}`},
		{"last member", `{"a":1,"audit_hash":"h"}`},
		{"middle member", `{"a":[1,{"x":"}"}],"audit_hash":"h","b":null}`},
		{"nested audit_hash is kept", `{"a":{"audit_hash":"n"},"audit_hash":"h","z":[{"audit_hash":"m"}]}`},
		{"look-alike inside a string is kept", `{"a":"\",\"audit_hash\":\"x","audit_hash":"h"}`},
		{"escaped member name", `{"audit\u005fhash":"h","b":true}`},
		{"values of every type", `{"s":"\\\"","n":-12,"t":true,"f":false,"z":null,"o":{},"l":[],"audit_hash":"h"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := readSealed([]byte(tt.doc))
			if err != nil {
				t.Fatalf("readSealed: %v", err)
			}
			if !s.hasStored || s.stored != "h" {
				t.Errorf("stored audit_hash = %q, %v", s.stored, s.hasStored)
			}
			if want := genericHash(t, []byte(tt.doc)); s.hash != want {
				t.Errorf("hash %s, generic recipe %s", s.hash, want)
			}
		})
	}
}
