package auditor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/merkle"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// signedConfig is a test config whose auditor signs with a new key in
// dir and exports to dir/checkpoints.jsonl. It returns the public key.
func signedConfig(tb testing.TB, dir string) (Config, string) {
	tb.Helper()
	cfg := testConfig()
	cfg.SigningKeyFile = filepath.Join(dir, "audit.nk")
	cfg.ExportFile = filepath.Join(dir, "checkpoints.jsonl")
	pub, err := NewSigningKey(cfg.SigningKeyFile)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, pub
}

// lastLine returns the last line of the export file at path.
func lastLine(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// anchorFixture returns the records of four chains (one resolved, one
// with a redrive request) in the order they are stored.
func anchorFixture(tb testing.TB) []record.Record {
	tb.Helper()
	var rs []record.Record
	for i := range 4 {
		f := fixture{id: id(100 + i), domain: "pharmacy", class: record.ClassValidation, code: codes.MalformedJSON,
			firstSeen: t0, quarantined: t0.Add(time.Duration(i) * time.Second)}
		rs = append(rs, first(tb, f))
	}
	rs = append(rs, next(tb, rs[1], record.KindResolved, t0.Add(time.Minute)))
	rs = append(rs, next(tb, rs[2], record.KindRedriveRequested, t0.Add(2*time.Minute)))
	return rs
}

// rewrite returns rs with record k's detail changed, resealed, and every
// later record of its chain rechained and resealed, as an insider who can
// compute seals would.
func rewrite(tb testing.TB, rs []record.Record, k int) []record.Record {
	tb.Helper()
	out := append([]record.Record(nil), rs...)
	out[k].ErrorDetail, out[k].AuditHash = "rewritten by an insider", ""
	if err := record.Seal(&out[k]); err != nil {
		tb.Fatal(err)
	}
	prev := out[k]
	for i := k + 1; i < len(out); i++ {
		if out[i].DLQID != prev.DLQID {
			continue
		}
		out[i].PrevHash, out[i].AuditHash = prev.AuditHash, ""
		if err := record.Seal(&out[i]); err != nil {
			tb.Fatal(err)
		}
		prev = out[i]
	}
	return out
}

// recreate deletes QUARANTINE and AUDIT (as an insider with the store, or
// the break-glass admin, can) and provisions them again, empty.
func (e *env) recreate(tb testing.TB, provision bool) {
	tb.Helper()
	ctx := context.Background()
	for _, name := range []string{subjects.QuarantineStream, subjects.AuditStream} {
		if err := e.js.DeleteStream(ctx, name); err != nil {
			tb.Fatalf("delete %s: %v", name, err)
		}
	}
	if !provision {
		return
	}
	for _, cfg := range []jetstream.StreamConfig{streams.Quarantine(streams.DefaultOptions()), streams.Audit(streams.DefaultOptions())} {
		if _, err := e.js.CreateStream(ctx, cfg); err != nil {
			tb.Fatalf("create %s: %v", cfg.Name, err)
		}
	}
}

// republishRewritten republishes rs into the emptied store with record i
// rewritten, resealed and rechained, and checkpoints it with a new key, as
// the insider of H12 would; it returns the new store's auditor.
func (e *env) republishRewritten(t *testing.T, rs []record.Record, i int) *running {
	t.Helper()
	for _, r := range rewrite(t, rs, i) {
		e.publish(t, r)
	}
	cfg, _ := signedConfig(t, t.TempDir())
	a := e.startAuditor(t, cfg, nil)
	if _, err := a.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a
}

// problemKinds returns the kinds of ps.
func problemKinds(ps []api.VerifyProblem) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		out[p.Kind]++
	}
	return out
}

// TestAnchoredVerify is the H12 attack and its variants: the store is
// rewritten (deleted, recreated, republished with a rewritten record
// resealed and rechained, checkpoints recomputed with another key),
// shortened, or deleted wholesale; verify with the original anchor and
// public key must report it and name the rewritten record.
func TestAnchoredVerify(t *testing.T) {
	const rewritten = 2 // index in anchorFixture: the first record of id(102), whose chain continues
	for _, tc := range []struct {
		name string
		// attack changes the store after the anchor was exported; it may
		// start a new auditor (returned) that verifies.
		attack func(t *testing.T, e *env, rs []record.Record) *running
		kinds  []string // problem kinds expected (at least)
		named  int      // index in rs of the record the problem must name; -1: none
		// plainOK: verify without an anchor says INTACT. It checks the
		// store against the auditor's own export file: only an attacker
		// who also runs a new auditor with a new export file fools it.
		plainOK bool
		matched bool
	}{
		{
			name:    "untouched",
			attack:  func(*testing.T, *env, []record.Record) *running { return nil },
			named:   -1,
			plainOK: true,
			matched: true,
		},
		{
			name: "rewritten and resealed, checkpoints recomputed with another key",
			attack: func(t *testing.T, e *env, rs []record.Record) *running {
				e.recreate(t, true)
				return e.republishRewritten(t, rs, rewritten)
			},
			kinds:   []string{api.ProblemAnchorMismatch, api.ProblemAnchorNotInAudit, api.ProblemCheckpointSignature},
			named:   rewritten,
			plainOK: true,
		},
		{
			name: "rewritten offline: stream files removed from the stopped server's store, republished, resealed",
			attack: func(t *testing.T, e *env, rs []record.Record) *running {
				e.srv.Stop()
				for _, name := range []string{subjects.QuarantineStream, subjects.AuditStream} {
					dir := filepath.Join(e.srv.StoreDir, "jetstream", "$G", "streams", name)
					if _, err := os.Stat(dir); err != nil {
						t.Fatalf("the store has no %s: %v", dir, err)
					}
					if err := os.RemoveAll(dir); err != nil {
						t.Fatal(err)
					}
				}
				e.srv.Restart()
				ctx := context.Background()
				for _, cfg := range []jetstream.StreamConfig{streams.Quarantine(streams.DefaultOptions()), streams.Audit(streams.DefaultOptions())} {
					natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
						_, err := e.js.CreateStream(ctx, cfg)
						return err
					})
				}
				return e.republishRewritten(t, rs, rewritten)
			},
			kinds:   []string{api.ProblemAnchorMismatch, api.ProblemAnchorNotInAudit, api.ProblemCheckpointSignature},
			named:   rewritten,
			plainOK: true,
		},
		{
			name: "the last records dropped",
			attack: func(t *testing.T, e *env, rs []record.Record) *running {
				e.recreate(t, true)
				for _, r := range rs[:len(rs)-2] {
					e.publish(t, r)
				}
				return nil
			},
			kinds: []string{api.ProblemAnchorShort, api.ProblemStoreMissing},
			named: -1,
		},
		{
			name:   "deleted wholesale and recreated empty",
			attack: func(t *testing.T, e *env, _ []record.Record) *running { e.recreate(t, true); return nil },
			kinds:  []string{api.ProblemStoreMissing},
			named:  -1,
		},
		{
			name:   "deleted wholesale",
			attack: func(t *testing.T, e *env, _ []record.Record) *running { e.recreate(t, false); return nil },
			kinds:  []string{api.ProblemStoreMissing},
			named:  -1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			rs := anchorFixture(t)
			seqs := make([]uint64, len(rs))
			for i, r := range rs {
				seqs[i] = e.publish(t, r)
			}
			cfg, pub := signedConfig(t, t.TempDir())
			a := e.startAuditor(t, cfg, nil)
			if _, err := a.Checkpoint(t.Context()); err != nil {
				t.Fatal(err)
			}
			line := lastLine(t, cfg.ExportFile)
			if b := tc.attack(t, e, rs); b != nil {
				a = b // the auditor of the rewritten store (the first keeps running)
			}
			rep, err := a.Verify(t.Context(), api.VerifyRequest{Anchor: line, PubKey: pub})
			if err != nil {
				t.Fatalf("verify with the anchor: %v", err)
			}
			kinds := problemKinds(rep.Problems)
			if len(tc.kinds) == 0 && !rep.OK {
				t.Fatalf("verify with the anchor: problems %+v", rep.Problems)
			}
			for _, k := range tc.kinds {
				if kinds[k] == 0 {
					t.Errorf("no %s problem in %+v", k, rep.Problems)
				}
			}
			if len(tc.kinds) > 0 && rep.OK {
				t.Errorf("verify with the anchor is OK after the attack")
			}
			if rep.Anchor == nil || rep.Anchor.Matched != tc.matched || rep.Anchor.TreeSize != uint64(len(rs)) {
				t.Errorf("anchor %+v, want matched %v, tree_size %d", rep.Anchor, tc.matched, len(rs))
			}
			if tc.named >= 0 {
				var named *api.VerifyProblem
				for i, p := range rep.Problems {
					if p.Kind == api.ProblemAnchorMismatch {
						named = &rep.Problems[i]
						break
					}
				}
				if named == nil || named.Seq != seqs[tc.named] || named.DLQID != rs[tc.named].DLQID {
					t.Errorf("the mismatch names %+v, want seq %d dlq_id %s", named, seqs[tc.named], rs[tc.named].DLQID)
				}
			}
			plain, err := a.Verify(t.Context(), api.VerifyRequest{})
			switch {
			case err != nil:
				t.Errorf("verify without an anchor: %v", err)
			case plain.OK != tc.plainOK:
				t.Errorf("verify without an anchor: OK %v, want %v (%+v)", plain.OK, tc.plainOK, plain.Problems)
			case plain.Anchor == nil || !plain.Anchor.Own:
				t.Errorf("verify without an anchor checked no own anchor: %+v", plain.Anchor)
			}
			if want := map[bool]float64{true: 0, false: 1}[plain.OK]; testutil.ToFloat64(a.metrics.behindAnchor) != want {
				t.Errorf("deadletter_audit_behind_anchor %v, want %v", testutil.ToFloat64(a.metrics.behindAnchor), want)
			}
		})
	}
}

// TestAnchorRefused: an anchor that is not a checkpoint signed with the
// caller's key is refused with a clear error, never verified.
func TestAnchorRefused(t *testing.T) {
	e := newEnv(t)
	for _, r := range anchorFixture(t) {
		e.publish(t, r)
	}
	cfg, pub := signedConfig(t, t.TempDir())
	a := e.startAuditor(t, cfg, nil)
	if _, err := a.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	line := lastLine(t, cfg.ExportFile)
	other, err := NewSigningKey(filepath.Join(t.TempDir(), "other.nk"))
	if err != nil {
		t.Fatal(err)
	}
	var exp api.ExportedCheckpoint
	if err := json.Unmarshal([]byte(line), &exp); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*api.ExportedCheckpoint)) string {
		c := exp
		c.Blocks = append([]string(nil), exp.Blocks...)
		f(&c)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, anchor, pubkey, want string
	}{
		{"wrong public key", line, other, "signed by key"},
		{"not a public key", line, "SUAHOPEFULLYNOT", "not an nkeys account or user public key"},
		{"bad signature", edit(func(c *api.ExportedCheckpoint) { c.Signature = c.Signature[:10] + "AAAA" + c.Signature[14:] }), pub, "does not verify"},
		{"root changed", edit(func(c *api.ExportedCheckpoint) { c.MerkleRoot = merkle.EmptyRoot().String() }), pub, "does not verify"},
		{"size changed", edit(func(c *api.ExportedCheckpoint) { c.TreeSize, c.Count = c.TreeSize-1, c.Count-1 }), pub, "does not verify"},
		{"blocks changed", edit(func(c *api.ExportedCheckpoint) { c.Blocks[0] = merkle.EmptyRoot().String() }), pub, "do not recombine"},
		{"key swapped", edit(func(c *api.ExportedCheckpoint) { c.Key = other }), other, "does not verify"},
		{"unsigned", edit(func(c *api.ExportedCheckpoint) { c.Signature = "" }), pub, "not signed"},
		{"not JSON", "checkpoint", pub, "not an exported checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Verify(t.Context(), api.VerifyRequest{Anchor: tc.anchor, PubKey: tc.pubkey})
			if !errors.Is(err, ErrAnchor) || api.CodeOf(err) != api.ErrBadRequest || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a bad request wrapping ErrAnchor containing %q", err, tc.want)
			}
		})
	}
	t.Run("over NATS", func(t *testing.T) {
		b, _ := json.Marshal(api.VerifyRequest{Anchor: line, PubKey: other})
		m, err := e.nc.Request(api.AuditVerify, b, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := m.Header.Get(serviceErrorCode); code != api.ErrBadRequest {
			t.Fatalf("code %q (%s), want %s", code, m.Header.Get("Nats-Service-Error"), api.ErrBadRequest)
		}
	})
	t.Run("pubkey without anchor", func(t *testing.T) {
		if _, err := a.Verify(t.Context(), api.VerifyRequest{PubKey: pub}); err == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("whole export file", func(t *testing.T) {
		b, err := os.ReadFile(cfg.ExportFile)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := a.Verify(t.Context(), api.VerifyRequest{Anchor: string(b), PubKey: pub})
		if err != nil || !rep.OK || !rep.Anchor.Matched {
			t.Fatalf("verify with the whole file: %+v, %v", rep, err)
		}
	})
}

// serviceErrorCode is the header of a micro service error code.
const serviceErrorCode = "Nats-Service-Error-Code"

// TestAnchorLocalizesInLargeTrees: past AnchorBlocks records the anchor
// names the block of records holding the rewritten one.
func TestAnchorLocalizesInLargeTrees(t *testing.T) {
	e := newEnv(t)
	var rs []record.Record
	for i := range 40 {
		rs = append(rs, first(t, fixture{id: id(1000 + i), domain: "pharmacy", class: record.ClassValidation,
			code: codes.MalformedJSON, firstSeen: t0, quarantined: t0}))
	}
	seqs := make([]uint64, len(rs))
	for i, r := range rs {
		seqs[i] = e.publish(t, r)
	}
	cfg, pub := signedConfig(t, t.TempDir())
	cfg.AnchorBlocks = 8 // 40 records: blocks of 8
	a := e.startAuditor(t, cfg, nil)
	if _, err := a.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	line := lastLine(t, cfg.ExportFile)
	a.stop()
	e.recreate(t, true)
	for _, r := range rewrite(t, rs, 21) {
		e.publish(t, r)
	}
	b := e.startAuditor(t, testConfig(), nil)
	rep, err := b.Verify(t.Context(), api.VerifyRequest{Anchor: line, PubKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if p.Kind == api.ProblemAnchorMismatch {
			if p.FromSeq > seqs[21] || p.ToSeq < seqs[21] || p.ToSeq-p.FromSeq+1 != 8 {
				t.Fatalf("mismatch %+v does not localize seq %d to a block of 8", p, seqs[21])
			}
			return
		}
	}
	t.Fatalf("no anchor mismatch: %+v", rep.Problems)
}

// TestSigningKeyFile: the key file must be a seed readable by its owner
// only; NewSigningKey never overwrites one.
func TestSigningKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.nk")
	pub, err := NewSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := SigningPublicKey(path); err != nil || got != pub {
		t.Fatalf("SigningPublicKey = %q, %v; want %q", got, err, pub)
	}
	if _, err := NewSigningKey(path); !errors.Is(err, ErrSigningKey) || !errors.Is(err, os.ErrExist) {
		t.Fatalf("NewSigningKey over an existing file: %v", err)
	}
	loose := filepath.Join(dir, "loose.nk")
	notSeed := filepath.Join(dir, "junk.nk")
	b, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name, path string
		data       []byte
		mode       os.FileMode
	}{
		{"readable by others", loose, b, 0o644},
		{"readable by the group", loose, b, 0o640},
		{"not a seed", notSeed, []byte("hello"), 0o600},
		{"missing", filepath.Join(dir, "none.nk"), nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.data != nil {
				if err := os.WriteFile(tc.path, tc.data, tc.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(tc.path, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			cfg := testConfig()
			cfg.SigningKeyFile = tc.path
			if _, err := New(&nats.Conn{}, cfg, nil); !errors.Is(err, ErrSigningKey) {
				t.Fatalf("New: %v, want ErrSigningKey", err)
			}
		})
	}
}

// TestExportFile: each new checkpoint is one more line; an unchanged one
// adds none; the lines are the checkpoints AUDIT holds.
func TestExportFile(t *testing.T) {
	e := newEnv(t)
	rs := anchorFixture(t)
	for _, r := range rs[:3] {
		e.publish(t, r)
	}
	cfg, pub := signedConfig(t, t.TempDir())
	a := e.startAuditor(t, cfg, nil)
	c1, err := a.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs[3:] {
		e.publish(t, r)
	}
	e.waitApplied(t, a)
	c2, err := a.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(cfg.ExportFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []api.ExportedCheckpoint
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l api.ExportedCheckpoint
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 2 || lines[0].AuditSeq != c1.Seq || lines[1].AuditSeq != c2.Seq ||
		lines[1].Checkpoint != c2.Checkpoint || lines[1].TreeSize != uint64(len(rs)) {
		t.Fatalf("export lines %+v; want the checkpoints %+v and %+v", lines, c1, c2)
	}
	for _, l := range lines {
		if err := export.VerifyCheckpoint(l.Checkpoint, pub); err != nil {
			t.Fatalf("exported checkpoint: %v", err)
		}
	}
	if info, err := os.Stat(cfg.ExportFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("export file mode: %v, %v", info.Mode(), err)
	}
}
