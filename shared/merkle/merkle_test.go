package merkle

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"
)

// The RFC 6962 test vectors of certificate-transparency-go and Trillian:
// eight leaves and the roots of the trees of their prefixes.
var (
	vectorLeaves = []string{"", "00", "10", "2021", "3031", "40414243",
		"5051525354555657", "606162636465666768696a6b6c6d6e6f"}
	vectorRoots = []string{
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
		"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
		"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
		"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
		"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
		"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
	}
)

func vectorLeafHashes(tb testing.TB) []Hash {
	tb.Helper()
	out := make([]Hash, len(vectorLeaves))
	for i, s := range vectorLeaves {
		b, err := hex.DecodeString(s)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = LeafHash(b)
	}
	return out
}

// naiveRoot is RFC 6962's MTH written as the RFC states it, over the raw
// leaves, hashing with crypto/sha256 directly (no code shared with the
// package but the split, which it recomputes by a loop).
func naiveRoot(leaves [][]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0}, leaves[0]...))
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := naiveRoot(leaves[:k]), naiveRoot(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// testLeaves returns n distinct raw leaves and their leaf hashes.
func testLeaves(n int) ([][]byte, []Hash) {
	raw := make([][]byte, n)
	hs := make([]Hash, n)
	for i := range raw {
		raw[i] = binary.BigEndian.AppendUint64(nil, uint64(i)*2654435761)
		hs[i] = LeafHash(raw[i])
	}
	return raw, hs
}

func TestVectors(t *testing.T) {
	leaves := vectorLeafHashes(t)
	for n, want := range vectorRoots {
		var b Builder
		for _, l := range leaves[:n] {
			b.Add(l)
		}
		for name, got := range map[string]Hash{"Root": Root(leaves[:n]), "Builder": b.Root()} {
			if got.String() != want {
				t.Errorf("%s of %d leaves = %s, want %s", name, n, got, want)
			}
		}
	}
}

func TestDifferential(t *testing.T) {
	raw, hs := testLeaves(300)
	for n := 0; n <= len(raw); n++ {
		want := Hash(naiveRoot(raw[:n]))
		if got := Root(hs[:n]); got != want {
			t.Fatalf("Root(%d) = %s, naive %s", n, got, want)
		}
		var b Builder
		for _, h := range hs[:n] {
			b.Add(h)
		}
		if got := b.Root(); got != want || b.Size() != uint64(n) {
			t.Fatalf("Builder(%d) = %s (size %d), naive %s", n, got, b.Size(), want)
		}
		for height := range 6 {
			got, err := RootFromBlocks(Blocks(hs[:n], height), height, uint64(n))
			if err != nil || got != want {
				t.Fatalf("RootFromBlocks(%d leaves, height %d) = %s, %v; naive %s", n, height, got, err, want)
			}
		}
	}
}

func TestBlockBuilder(t *testing.T) {
	_, hs := testLeaves(700)
	for _, tc := range []struct {
		name      string
		maxBlocks int
	}{
		{"two", 2}, {"odd", 5}, {"even", 8}, {"large", 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBlockBuilder(tc.maxBlocks)
			for n := 1; n <= len(hs); n++ {
				b.Add(hs[n-1])
				want := Blocks(hs[:n], b.Height())
				got := b.Blocks()
				if len(got) != len(want) {
					t.Fatalf("%d leaves: %d blocks of height %d, want %d", n, len(got), b.Height(), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%d leaves: block %d differs", n, i)
					}
				}
				if full := uint64(n) >> b.Height(); full > uint64(max(tc.maxBlocks, 2)) {
					t.Fatalf("%d leaves: %d complete blocks kept, max %d", n, full, tc.maxBlocks)
				}
				if b.Root() != Root(hs[:n]) {
					t.Fatalf("%d leaves: root differs", n)
				}
			}
		})
	}
}

func TestRootFromBlocksRefusesAMismatch(t *testing.T) {
	_, hs := testLeaves(10)
	for _, tc := range []struct {
		name   string
		blocks []Hash
		height int
		n      uint64
	}{
		{"too few", Blocks(hs, 1)[:4], 1, 10},
		{"too many", Blocks(hs, 1), 1, 8},
		{"negative height", Blocks(hs, 1), -1, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RootFromBlocks(tc.blocks, tc.height, tc.n); !errors.Is(err, ErrBlocks) {
				t.Fatalf("err = %v, want ErrBlocks", err)
			}
		})
	}
}

func TestParseHash(t *testing.T) {
	h := LeafHash([]byte("x"))
	if got, err := ParseHash(h.String()); err != nil || got != h {
		t.Fatalf("ParseHash round trip: %v", err)
	}
	for _, s := range []string{"", "zz", h.String()[:62] + "zz"} {
		if _, err := ParseHash(s); !errors.Is(err, ErrHash) {
			t.Errorf("ParseHash(%q) = %v", s, err)
		}
	}
}
