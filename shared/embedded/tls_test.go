package embedded_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/embedded"
)

// payload is what must never appear in an encrypted store's files.
const payload = "PHI:patient=4242;rx=oxycodone;SECRET-PAYLOAD"

// testCert is a self-signed server certificate for 127.0.0.1 and localhost.
type testCert struct {
	CertFile, KeyFile string
	Pool              *x509.CertPool
}

// newCert writes a self-signed ECDSA P-256 certificate and key into a
// temporary directory.
func newCert(tb testing.TB) testCert {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "deadletter test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	c := testCert{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Pool: x509.NewCertPool()}
	writeFile(tb, c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	writeFile(tb, c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600)
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	c.Pool.AddCert(leaf)
	return c
}

// writeFile writes b to path with exactly mode perm (whatever the umask).
func writeFile(tb testing.TB, path string, b []byte, perm fs.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, b, perm); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		tb.Fatal(err)
	}
}

// keyFile writes a store key file with the given mode and returns its path.
func keyFile(tb testing.TB, key string, perm fs.FileMode) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "store.key")
	writeFile(tb, path, []byte(key+"\n"), perm)
	return path
}

// newKeyFile creates a fresh key file with embedded.NewStoreKey.
func newKeyFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "store.key")
	if err := embedded.NewStoreKey(path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// serverLog records the server's notices, warnings and errors.
type serverLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *serverLog) add(level, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, level+" "+fmt.Sprintf(format, v...))
}

func (l *serverLog) Noticef(format string, v ...any) { l.add("INF", format, v...) }
func (l *serverLog) Warnf(format string, v ...any)   { l.add("WRN", format, v...) }
func (l *serverLog) Errorf(format string, v ...any)  { l.add("ERR", format, v...) }
func (l *serverLog) Fatalf(format string, v ...any)  { l.add("FTL", format, v...) }
func (l *serverLog) Debugf(string, ...any)           {}
func (l *serverLog) Tracef(string, ...any)           {}

// contains reports whether a recorded line contains s.
func (l *serverLog) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// opts returns the options of a JetStream server on 127.0.0.1, free port.
func opts(storeDir string) *server.Options {
	return &server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: storeDir,
		NoSigs: true, ServerName: "tls-test",
	}
}

// start applies sec to o, starts the server and registers its shutdown.
func start(tb testing.TB, o *server.Options, sec embedded.Security) (*server.Server, *serverLog) {
	tb.Helper()
	if err := sec.Apply(o, o.Host); err != nil {
		tb.Fatalf("Apply: %v", err)
	}
	s, err := server.NewServer(o)
	if err != nil {
		tb.Fatalf("NewServer: %v", err)
	}
	log := &serverLog{}
	s.SetLogger(log, false, false)
	go s.Start()
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("server not ready")
	}
	return s, log
}

// stop shuts s down and waits (the store files are then complete).
func stop(s *server.Server) { s.Shutdown(); s.WaitForShutdown() }

// connect dials url and registers the close.
func connect(tb testing.TB, url string, o ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url, o...)
	if err != nil {
		tb.Fatalf("connect %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// jsOf returns a JetStream context on nc.
func jsOf(tb testing.TB, nc *nats.Conn) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return c
}

var streamCfg = jetstream.StreamConfig{Name: "RECORDS", Subjects: []string{"records.>"}, Storage: jetstream.FileStorage}

// writeRecord creates RECORDS and stores payload as its message 1.
func writeRecord(tb testing.TB, js jetstream.JetStream) {
	tb.Helper()
	if _, err := js.CreateStream(ctx(tb), streamCfg); err != nil {
		tb.Fatalf("create stream: %v", err)
	}
	ack, err := js.Publish(ctx(tb), "records.pharmacy", []byte(payload))
	if err != nil {
		tb.Fatalf("publish: %v", err)
	}
	if ack.Sequence != 1 {
		tb.Fatalf("sequence %d, want 1", ack.Sequence)
	}
}

// readRecord checks RECORDS message 1 is payload.
func readRecord(tb testing.TB, js jetstream.JetStream) {
	tb.Helper()
	st, err := js.Stream(ctx(tb), streamCfg.Name)
	if err != nil {
		tb.Fatalf("stream: %v", err)
	}
	m, err := st.GetMsg(ctx(tb), 1)
	if err != nil {
		tb.Fatalf("get: %v", err)
	}
	if string(m.Data) != payload {
		tb.Fatalf("read %q, want %q", m.Data, payload)
	}
}

// filesContaining lists the files under dir whose bytes contain s.
func filesContaining(tb testing.TB, dir, s string) []string {
	tb.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return found
}

// treeHash hashes every file's path and contents under dir.
func treeHash(tb testing.TB, dir string) string {
	tb.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %x\n", path, sha256.Sum256(b))
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"[::1]", true},
		{"localhost", true},
		{"LocalHost", true},
		{"", false},
		{"0.0.0.0", false},
		{"::", false},
		{"10.0.0.5", false},
		{"128.0.0.1", false},
		{"nats.example.com", false},
		{"localhost.example.com", false},
	} {
		t.Run(fmt.Sprintf("%q", tc.host), func(t *testing.T) {
			if got := embedded.Loopback(tc.host); got != tc.want {
				t.Fatalf("Loopback(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}

func TestApplyRefuses(t *testing.T) {
	cert := newCert(t)
	good := newKeyFile(t)
	for _, tc := range []struct {
		name string
		host string
		sec  embedded.Security
		// allowNonTLS sets Options.AllowNonTLS, as allow_non_tls in a config text would.
		allowNonTLS bool
		want        error
	}{
		{name: "every interface without TLS", host: "0.0.0.0", want: embedded.ErrTLSRequired},
		{name: "empty host (every interface) without TLS", host: "", want: embedded.ErrTLSRequired},
		{name: "IPv6 any without TLS", host: "::", want: embedded.ErrTLSRequired},
		{name: "LAN address without TLS", host: "10.1.2.3", want: embedded.ErrTLSRequired},
		{name: "host name without TLS", host: "nats.example.com", want: embedded.ErrTLSRequired},
		{name: "store key does not replace TLS", host: "0.0.0.0", sec: embedded.Security{CipherKeyFile: good}, want: embedded.ErrTLSRequired},
		{name: "TLS made optional by allow_non_tls", host: "0.0.0.0", sec: embedded.Security{TLSCert: cert.CertFile, TLSKey: cert.KeyFile}, allowNonTLS: true, want: embedded.ErrTLSRequired},
		{name: "certificate without key", host: "127.0.0.1", sec: embedded.Security{TLSCert: cert.CertFile}, want: embedded.ErrTLSIncomplete},
		{name: "key without certificate", host: "127.0.0.1", sec: embedded.Security{TLSKey: cert.KeyFile}, want: embedded.ErrTLSIncomplete},
		{name: "unreadable certificate", host: "127.0.0.1", sec: embedded.Security{TLSCert: filepath.Join(t.TempDir(), "none.pem"), TLSKey: cert.KeyFile}, want: embedded.ErrTLSConfig},
		{name: "certificate and key swapped", host: "127.0.0.1", sec: embedded.Security{TLSCert: cert.KeyFile, TLSKey: cert.CertFile}, want: embedded.ErrTLSConfig},
		{name: "key file mode 0644", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: keyFile(t, strings.Repeat("k", 64), 0o644)}, want: embedded.ErrStoreKeyPermissions},
		{name: "key file mode 0640", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: keyFile(t, strings.Repeat("k", 64), 0o640)}, want: embedded.ErrStoreKeyPermissions},
		{name: "key file mode 0604", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: keyFile(t, strings.Repeat("k", 64), 0o604)}, want: embedded.ErrStoreKeyPermissions},
		{name: "key file mode 0620", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: keyFile(t, strings.Repeat("k", 64), 0o620)}, want: embedded.ErrStoreKeyPermissions},
		{name: "missing key file", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: filepath.Join(t.TempDir(), "none.key")}, want: embedded.ErrStoreKeyInvalid},
		{name: "key file is a directory", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: t.TempDir()}, want: embedded.ErrStoreKeyInvalid},
		{name: "empty key file", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: keyFile(t, "", 0o600)}, want: embedded.ErrStoreKeyInvalid},
		{name: "short key file", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: keyFile(t, "hunter2", 0o600)}, want: embedded.ErrStoreKeyInvalid},
		{name: "short env key", host: "127.0.0.1", sec: embedded.Security{CipherKey: "hunter2"}, want: embedded.ErrStoreKeyInvalid},
		{name: "white space env key", host: "127.0.0.1", sec: embedded.Security{CipherKey: strings.Repeat(" ", 40)}, want: embedded.ErrStoreKeyInvalid},
		{name: "unknown cipher", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: good, Cipher: "rot13"}, want: embedded.ErrUnknownCipher},
		{name: "cipher without key", host: "127.0.0.1", sec: embedded.Security{Cipher: "aes"}, want: embedded.ErrCipherWithoutKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts(t.TempDir())
			o.Host = tc.host
			o.AllowNonTLS = tc.allowNonTLS
			err := tc.sec.Apply(o, tc.host)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Apply: %v, want %v", err, tc.want)
			}
			if o.JetStreamKey != "" {
				t.Fatal("a refused Apply set a store key")
			}
		})
	}
}

func TestApplyAccepts(t *testing.T) {
	cert := newCert(t)
	file := newKeyFile(t)
	fileKey, err := embedded.ReadStoreKey(file)
	if err != nil {
		t.Fatal(err)
	}
	envKey := strings.Repeat("e", 40)
	tlsSec := embedded.Security{TLSCert: cert.CertFile, TLSKey: cert.KeyFile}
	for _, tc := range []struct {
		name       string
		host       string
		sec        embedded.Security
		wantTLS    bool
		wantKey    string
		wantCipher server.StoreCipher
	}{
		{name: "loopback, nothing set", host: "127.0.0.1"},
		{name: "localhost, nothing set", host: "localhost"},
		{name: "IPv6 loopback, nothing set", host: "::1"},
		{name: "every interface with TLS", host: "0.0.0.0", sec: tlsSec, wantTLS: true},
		{name: "host name with TLS", host: "nats.example.com", sec: tlsSec, wantTLS: true},
		{name: "key file, default cipher chacha", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: file}, wantKey: fileKey, wantCipher: server.ChaCha},
		{name: "key file, aes", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: file, Cipher: "AES"}, wantKey: fileKey, wantCipher: server.AES},
		{name: "read-only key file 0400", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: keyFile(t, fileKey, 0o400)}, wantKey: fileKey, wantCipher: server.ChaCha},
		{name: "env key", host: "127.0.0.1", sec: embedded.Security{CipherKey: envKey + "\n"}, wantKey: envKey, wantCipher: server.ChaCha},
		{name: "key file takes precedence over env key", host: "127.0.0.1", sec: embedded.Security{CipherKeyFile: file, CipherKey: envKey}, wantKey: fileKey, wantCipher: server.ChaCha},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts(t.TempDir())
			if err := tc.sec.Apply(o, tc.host); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := o.TLSConfig != nil; got != tc.wantTLS {
				t.Fatalf("TLS configured %v, want %v", got, tc.wantTLS)
			}
			if tc.wantTLS {
				if !o.TLS || o.TLSConfig.MinVersion < tls.VersionTLS12 || len(o.TLSConfig.Certificates) != 1 || o.TLSTimeout <= 0 {
					t.Fatalf("TLS options: TLS=%v min=%x certs=%d timeout=%v", o.TLS, o.TLSConfig.MinVersion, len(o.TLSConfig.Certificates), o.TLSTimeout)
				}
			}
			if o.JetStreamKey != tc.wantKey {
				t.Fatalf("store key %q, want %q", o.JetStreamKey, tc.wantKey)
			}
			if tc.wantKey != "" && o.JetStreamCipher != tc.wantCipher {
				t.Fatalf("cipher %v, want %v", o.JetStreamCipher, tc.wantCipher)
			}
		})
	}
}

func TestLoadEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want embedded.Security
	}{
		{name: "nothing set", env: map[string]string{}},
		{
			name: "everything set",
			env: map[string]string{
				"DEADLETTER_TLS_CERT": "/etc/dl/cert.pem", "DEADLETTER_TLS_KEY": "/etc/dl/key.pem",
				"DEADLETTER_STORE_KEY_FILE": "/etc/dl/store.key", "DEADLETTER_STORE_KEY": "k", "DEADLETTER_STORE_CIPHER": "aes",
			},
			want: embedded.Security{TLSCert: "/etc/dl/cert.pem", TLSKey: "/etc/dl/key.pem", CipherKeyFile: "/etc/dl/store.key", CipherKey: "k", Cipher: "aes"},
		},
		{name: "key only", env: map[string]string{"DEADLETTER_STORE_KEY": "k"}, want: embedded.Security{CipherKey: "k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got embedded.Security
			env := config.NewEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			got.LoadEnv(env)
			if err := env.Err(); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	cert := newCert(t)
	s, _ := start(t, opts(t.TempDir()), embedded.Security{TLSCert: cert.CertFile, TLSKey: cert.KeyFile})
	url := s.ClientURL()

	t.Run("JetStream over TLS", func(t *testing.T) {
		nc := connect(t, url, nats.Secure(&tls.Config{RootCAs: cert.Pool, MinVersion: tls.VersionTLS12}))
		if !nc.TLSRequired() {
			t.Fatal("server does not require TLS")
		}
		cs, err := nc.TLSConnectionState()
		if err != nil || !cs.HandshakeComplete {
			t.Fatalf("no TLS session: %v", err)
		}
		js := jsOf(t, nc)
		writeRecord(t, js)
		readRecord(t, js)
	})

	t.Run("in-process connection needs no TLS", func(t *testing.T) {
		nc := connect(t, "", nats.InProcessServer(s))
		readRecord(t, jsOf(t, nc))
	})

	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{name: "client not trusting the certificate", opts: nil},
		{name: "TLS 1.1 client", opts: []nats.Option{nats.Secure(&tls.Config{RootCAs: cert.Pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})}},
		{name: "wrong server name", opts: []nats.Option{nats.Secure(&tls.Config{RootCAs: cert.Pool, ServerName: "nats.example.com"})}},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			nc, err := nats.Connect(url, append(tc.opts, nats.NoReconnect())...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
		})
	}

	t.Run("plain-text protocol is refused", func(t *testing.T) {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		info, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, `"tls_required":true`) {
			t.Fatalf("INFO does not require TLS: %s", info)
		}
		if _, err := fmt.Fprint(c, "CONNECT {\"verbose\":false}\r\nPUB records.plain 5\r\nhello\r\nPING\r\n"); err != nil {
			t.Fatal(err)
		}
		// The server expects a TLS ClientHello and closes the connection.
		var got strings.Builder
		for {
			line, err := r.ReadString('\n')
			got.WriteString(line)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("connection still open after plain-text CONNECT (read %q)", got.String())
				}
				break
			}
		}
		if strings.Contains(got.String(), "PONG") {
			t.Fatalf("server answered plain text: %q", got.String())
		}
		nc := connect(t, "", nats.InProcessServer(s))
		st, err := jsOf(t, nc).Stream(ctx(t), streamCfg.Name)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 1 {
			t.Fatalf("%d messages stored, want 1 (the plain-text publish was stored)", n)
		}
	})
}

func TestStoreEncryption(t *testing.T) {
	for _, tc := range []struct {
		name string
		// sec is the security of the first run; keyless means no store key.
		sec       func(tb testing.TB) embedded.Security
		encrypted bool
	}{
		{name: "no key (control: payload readable on disk)", sec: func(testing.TB) embedded.Security { return embedded.Security{} }},
		{name: "key file, chacha", sec: func(tb testing.TB) embedded.Security {
			return embedded.Security{CipherKeyFile: newKeyFile(tb)}
		}, encrypted: true},
		{name: "key file, aes", sec: func(tb testing.TB) embedded.Security {
			return embedded.Security{CipherKeyFile: newKeyFile(tb), Cipher: embedded.CipherAES}
		}, encrypted: true},
		{name: "env key", sec: func(tb testing.TB) embedded.Security {
			var sec embedded.Security
			key := "env-" + strings.Repeat("0123456789", 4)
			sec.LoadEnv(config.NewEnv(func(k string) (string, bool) { return key, k == embedded.EnvStoreKey }))
			return sec
		}, encrypted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sec := tc.sec(t)
			s, _ := start(t, opts(dir), sec)
			writeRecord(t, jsOf(t, connect(t, s.ClientURL())))
			stop(s)

			found := filesContaining(t, dir, payload)
			if tc.encrypted && len(found) > 0 {
				t.Fatalf("plaintext payload in %v", found)
			}
			if !tc.encrypted && len(found) == 0 {
				t.Fatal("control: payload not found in an unencrypted store; the grep proves nothing")
			}

			s, _ = start(t, opts(dir), sec)
			readRecord(t, jsOf(t, connect(t, s.ClientURL())))
			stop(s)
		})
	}
}

// TestWrongStoreKey records what nats-server 2.15 does with an encrypted
// store and the wrong key or no key: it starts, warns, and leaves the
// stream out (not found), without touching its files; creating the stream
// again fails; the right key still recovers it.
func TestWrongStoreKey(t *testing.T) {
	dir := t.TempDir()
	right := embedded.Security{CipherKeyFile: newKeyFile(t)}
	s, _ := start(t, opts(dir), right)
	writeRecord(t, jsOf(t, connect(t, s.ClientURL())))
	stop(s)
	before := treeHash(t, dir)

	for _, tc := range []struct {
		name    string
		sec     embedded.Security
		warning string
	}{
		{name: "wrong key", sec: embedded.Security{CipherKeyFile: newKeyFile(t)}, warning: "unable to recover keys"},
		{name: "wrong key, other cipher", sec: embedded.Security{CipherKeyFile: newKeyFile(t), Cipher: embedded.CipherAES}, warning: "unable to recover keys"},
		{name: "no key", sec: embedded.Security{}, warning: "encryption not enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, log := start(t, opts(dir), tc.sec)
			js := jsOf(t, connect(t, s.ClientURL()))
			if _, err := js.Stream(ctx(t), streamCfg.Name); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Fatalf("stream lookup: %v, want stream not found", err)
			}
			if !log.contains("Error decrypting our stream metafile: " + tc.warning) {
				t.Fatalf("no warning %q in server log: %q", tc.warning, log.lines)
			}
			// A provisioner that recreates missing streams is refused: the
			// old files stay and nothing is overwritten.
			_, err := js.CreateStream(ctx(t), streamCfg)
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.ErrorCode(10049) {
				t.Fatalf("recreate: %v, want error 10049 (error creating store for stream)", err)
			}
			stop(s)
			if after := treeHash(t, dir); after != before {
				t.Fatal("store files changed")
			}
		})
	}

	s, _ = start(t, opts(dir), right)
	readRecord(t, jsOf(t, connect(t, s.ClientURL())))
	stop(s)

	// The right key with the other cipher still recovers the stream (the
	// server tries both ciphers with the key).
	otherCipher := right
	otherCipher.Cipher = embedded.CipherAES
	s, _ = start(t, opts(dir), otherCipher)
	readRecord(t, jsOf(t, connect(t, s.ClientURL())))
}

// TestPlaintextStoreGetsEncrypted records that a store written without a
// key is encrypted in place when the server starts with one: the stream
// is recovered, and afterwards needs that key.
func TestPlaintextStoreGetsEncrypted(t *testing.T) {
	dir := t.TempDir()
	s, _ := start(t, opts(dir), embedded.Security{})
	writeRecord(t, jsOf(t, connect(t, s.ClientURL())))
	stop(s)

	key := embedded.Security{CipherKeyFile: newKeyFile(t)}
	s, _ = start(t, opts(dir), key)
	readRecord(t, jsOf(t, connect(t, s.ClientURL())))
	stop(s)
	if found := filesContaining(t, dir, payload); len(found) > 0 {
		t.Fatalf("plaintext payload left in %v", found)
	}

	s, _ = start(t, opts(dir), embedded.Security{})
	if _, err := jsOf(t, connect(t, s.ClientURL())).Stream(ctx(t), streamCfg.Name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("without the key: %v, want stream not found", err)
	}
}

func TestNewStoreKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.key")
	if err := embedded.NewStoreKey(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %#o, want 0600", fi.Mode().Perm())
	}
	key, err := embedded.ReadStoreKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := hex.DecodeString(key); err != nil || len(b) != 32 {
		t.Fatalf("key %q is not 256 bits of hex", key)
	}
	if err := embedded.NewStoreKey(path); !errors.Is(err, embedded.ErrStoreKeyExists) {
		t.Fatalf("second NewStoreKey: %v, want ErrStoreKeyExists", err)
	}
	if again, _ := embedded.ReadStoreKey(path); again != key {
		t.Fatal("existing key file was replaced")
	}
	other := filepath.Join(t.TempDir(), "store.key")
	if err := embedded.NewStoreKey(other); err != nil {
		t.Fatal(err)
	}
	if k2, _ := embedded.ReadStoreKey(other); k2 == key {
		t.Fatal("two keys are equal")
	}
	if err := embedded.NewStoreKey(filepath.Join(t.TempDir(), "missing", "store.key")); err == nil {
		t.Fatal("NewStoreKey in a missing directory succeeded")
	}
}

// TestApplyAfterConfigText checks Apply composes with a configuration text
// loaded by ProcessConfigString, as embedded.Start loads the trust
// boundary's: the accounts and users stay, TLS and the store key are added.
func TestApplyAfterConfigText(t *testing.T) {
	cert := newCert(t)
	dir := t.TempDir()
	o := &server.Options{}
	text := `
accounts {
  SVC { jetstream: enabled, users: [{user: svc, password: s3cret}] }
}
`
	if err := o.ProcessConfigString(text); err != nil {
		t.Fatal(err)
	}
	o.Host, o.Port, o.JetStream, o.StoreDir, o.NoSigs = "127.0.0.1", -1, true, dir, true
	sec := embedded.Security{TLSCert: cert.CertFile, TLSKey: cert.KeyFile, CipherKeyFile: newKeyFile(t)}
	s, _ := start(t, o, sec)
	tlsOpt := nats.Secure(&tls.Config{RootCAs: cert.Pool, MinVersion: tls.VersionTLS12})

	if nc, err := nats.Connect(s.ClientURL(), tlsOpt, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("connected without credentials: the config text's users were lost")
	}
	writeRecord(t, jsOf(t, connect(t, s.ClientURL(), tlsOpt, nats.UserInfo("svc", "s3cret"))))
	stop(s)
	if found := filesContaining(t, dir, payload); len(found) > 0 {
		t.Fatalf("plaintext payload in %v", found)
	}
}
