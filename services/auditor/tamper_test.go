package auditor

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/highwayhash"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
)

// How the offline tamper works (nats-server v2.15 file store, filestore.go):
// a stream's messages live in <store>/jetstream/$G/streams/<name>/msgs/<n>.blk
// as records
//
//	total_len(4, high bit = has headers) seq(8) ts(8) subj_len(2) subj
//	[hdr_len(4) hdr] msg checksum(8)
//
// little endian, where checksum is HighwayHash-64 keyed with
// SHA-256("<stream>-<n>") over seq+ts, subject, headers and message. The
// stream's state is cached in msgs/index.db. The test edits one record of a
// copy of the store while no server runs on it:
//
//   - delete: cut the record's bytes out of the block;
//   - alter: change bytes of the message (same length) and recompute the
//     record's checksum, so the server does not treat the block as corrupt;
//
// then removes index.db, so the server rebuilds the stream state from the
// blocks on start (a removed sequence becomes an interior gap). Either way
// the server serves the edited stream as if it had always been so: only
// the seals, the chains and the checkpoints can tell.

// blkRecord is one message record of a .blk file.
type blkRecord struct {
	start, end int // byte span in the block
	seq        uint64
}

// quarantineBlock returns the path of QUARANTINE's only message block in
// the store and its records.
func quarantineBlock(t *testing.T, store string) (string, []byte, []blkRecord) {
	t.Helper()
	blks, _ := filepath.Glob(filepath.Join(store, "jetstream", "*", "streams", "QUARANTINE", "msgs", "*.blk"))
	if len(blks) != 1 {
		t.Fatalf("want one QUARANTINE block, found %v", blks)
	}
	buf, err := os.ReadFile(blks[0])
	if err != nil {
		t.Fatal(err)
	}
	var recs []blkRecord
	le := binary.LittleEndian
	for i := 0; i+22 <= len(buf); {
		rl := int(le.Uint32(buf[i:]) &^ (1 << 31))
		recs = append(recs, blkRecord{start: i, end: i + rl, seq: le.Uint64(buf[i+4:])})
		i += rl
	}
	return blks[0], buf, recs
}

// rechecksum recomputes the checksum of the record buf[r.start:r.end] of
// the block file blk, as the server computes it.
func rechecksum(t *testing.T, blk string, buf []byte, r blkRecord) {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(filepath.Base(blk), "%d.blk", &n); err != nil {
		t.Fatal(err)
	}
	key := sha256.Sum256([]byte(fmt.Sprintf("QUARANTINE-%d", n)))
	hh, err := highwayhash.New64(key[:])
	if err != nil {
		t.Fatal(err)
	}
	rec := buf[r.start:r.end]
	le := binary.LittleEndian
	hasHeaders := le.Uint32(rec)&(1<<31) != 0
	slen := int(le.Uint16(rec[20:]))
	data := rec[22:]
	hh.Write(rec[4:20])
	hh.Write(data[:slen])
	if hasHeaders {
		hh.Write(data[slen+4 : len(data)-8])
	} else {
		hh.Write(data[slen : len(data)-8])
	}
	copy(data[len(data)-8:], hh.Sum(nil))
}

// copyDir copies the directory tree src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOfflineTamper(t *testing.T) {
	// The original store: four chains, seq 1..5, a checkpoint over 1..4 and
	// one record (seq 5) after it.
	e := newEnv(t)
	f := func(n int) fixture {
		return fixture{id: id(n), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC,
			party: "AB1234563", firstSeen: t0, quarantined: t0.Add(time.Duration(n) * time.Minute)}
	}
	e.chainOf(t, f(1))                              // seq 1
	e.chainOf(t, f(2))                              // seq 2: a chain of one record
	e.chainOf(t, f(3), record.KindRedriveRequested) // seq 3, 4
	a := e.startAuditor(t, testConfig(), nil)
	var cp api.CheckpointReply
	request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &cp)
	if cp.Checkpoint.LastSeq != 4 {
		t.Fatalf("checkpoint covers %d, want 4", cp.Checkpoint.LastSeq)
	}
	e.chainOf(t, f(5)) // seq 5
	a.stop()
	e.srv.Stop()

	tests := []struct {
		name   string
		tamper func(t *testing.T, blk string, buf []byte, recs []blkRecord) []byte
		kinds  []string // problem kinds, in order
		seqs   string   // record sequences reported
	}{
		{
			name: "untouched copy",
			tamper: func(_ *testing.T, _ string, buf []byte, _ []blkRecord) []byte {
				return buf
			},
		},
		{
			name: "record deleted",
			tamper: func(_ *testing.T, _ string, buf []byte, recs []blkRecord) []byte {
				r := recs[1] // seq 2
				return append(append([]byte(nil), buf[:r.start]...), buf[r.end:]...)
			},
			kinds: []string{api.ProblemMissing, api.ProblemCheckpointMismatch}, seqs: "2",
		},
		{
			name: "record altered, checksum recomputed",
			tamper: func(t *testing.T, blk string, buf []byte, recs []blkRecord) []byte {
				r := recs[1]
				i := bytes.Index(buf[r.start:r.end], []byte("rule failed"))
				if i < 0 {
					t.Fatal("record 2 has no error detail to alter")
				}
				copy(buf[r.start+i:], "rule passed")
				rechecksum(t, blk, buf, r)
				return buf
			},
			kinds: []string{record.ProblemSealMismatch}, seqs: "2",
		},
		{
			name: "record corrupted, checksum left wrong",
			tamper: func(_ *testing.T, _ string, buf []byte, recs []blkRecord) []byte {
				r := recs[1]
				i := bytes.Index(buf[r.start:r.end], []byte("rule failed"))
				copy(buf[r.start+i:], "rule passed")
				return buf
			},
			// The server finds the bad checksum and truncates the block there:
			// seq 2 and every record after it are gone. Verify names each
			// sequence the checkpoint covers; seq 5, written after the last
			// checkpoint, leaves no trace (see the package README).
			kinds: []string{api.ProblemMissing, api.ProblemMissing, api.ProblemMissing, api.ProblemCheckpointMismatch},
			seqs:  "2,3,4",
		},
		{
			name: "record altered and resealed by someone who knows the recipe",
			tamper: func(t *testing.T, blk string, buf []byte, recs []blkRecord) []byte {
				r := recs[1]
				rec := buf[r.start:r.end]
				i := bytes.Index(rec, []byte("rule failed"))
				copy(rec[i:], "rule passed")
				// The message is the JSON object at the end, before the
				// checksum. (Not the first '{': the binary record header, its
				// timestamp, may hold that byte.)
				start := bytes.Index(rec, []byte(`{"schema_version"`))
				if start < 0 {
					t.Fatal("record 2 holds no record JSON")
				}
				msg := rec[start : len(rec)-8]
				var reseal record.Record
				if err := json.Unmarshal(msg, &reseal); err != nil {
					t.Fatal(err)
				}
				old := reseal.AuditHash
				if err := record.Seal(&reseal); err != nil {
					t.Fatal(err)
				}
				j := bytes.Index(msg, []byte(old))
				copy(msg[j:], reseal.AuditHash)
				rechecksum(t, blk, buf, r)
				return buf
			},
			// Seal and chain are intact (it is a chain's only record): only the
			// checkpoint over 1..4 tells, naming the range.
			kinds: []string{api.ProblemCheckpointMismatch}, seqs: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := t.TempDir()
			copyDir(t, e.srv.StoreDir, store)
			blk, buf, recs := quarantineBlock(t, store)
			if len(recs) != 5 {
				t.Fatalf("block holds %d records, want 5", len(recs))
			}
			if err := os.WriteFile(blk, tt.tamper(t, blk, buf, recs), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(filepath.Dir(blk), "index.db")); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			srv := natstest.StartConfig(t, embedded.Config{StoreDir: store})
			nc := srv.Connect(t)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			te := &env{srv: srv, js: js, nc: nc}
			te.startAuditor(t, testConfig(), nil)
			var rep api.VerifyReply
			request(t, nc, api.AuditVerify, api.VerifyRequest{}, &rep)
			var kinds []string
			for _, p := range rep.Problems {
				kinds = append(kinds, p.Kind)
				if p.Kind == api.ProblemCheckpointMismatch && (p.CheckpointSeq != cp.Seq || p.ToSeq != 4) {
					t.Errorf("checkpoint problem %+v, want checkpoint %d over 1..4", p, cp.Seq)
				}
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tt.kinds) || seqs(rep.Problems) != tt.seqs || rep.OK != (len(tt.kinds) == 0) {
				t.Fatalf("verify: ok=%v problems %+v\nwant kinds %v at seqs %q", rep.OK, rep.Problems, tt.kinds, tt.seqs)
			}
			if rep.Checkpoints != 1 {
				t.Errorf("checkpoints checked: %d", rep.Checkpoints)
			}
		})
	}
}
