package embedded_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/deadletter/deadletter/shared/embedded"
)

// TestRender checks a rendered File loads into the options it describes.
func TestRender(t *testing.T) {
	accounts := `{"accounts": {"SVC": {"jetstream": "enabled", "users": [{"user": "svc", "password": "x"}]}}}`
	tests := []struct {
		name  string
		file  embedded.File
		check func(t *testing.T, o *server.Options)
	}{
		{
			name: "single server",
			file: embedded.File{ServerName: "s", Host: "127.0.0.1", Port: -1, StoreDir: "/store", SyncAlways: true, MaxPayload: embedded.DefaultMaxPayload, Accounts: accounts},
			check: func(t *testing.T, o *server.Options) {
				if o.ServerName != "s" || o.Port != -1 || !o.JetStream || o.StoreDir != "/store" || !o.SyncAlways || o.MaxPayload != embedded.DefaultMaxPayload {
					t.Errorf("options %+v", o)
				}
				if len(o.Users) != 1 || o.Users[0].Username != "svc" || o.Users[0].Account.Name != "SVC" {
					t.Errorf("users %+v", o.Users)
				}
			},
		},
		{
			name: "cluster node",
			file: embedded.File{
				ServerName: "n2", Host: "0.0.0.0", Port: 4222, StoreDir: "/s", SyncAlways: true, MaxPayload: 1 << 20,
				HTTP:     "127.0.0.1:8222",
				Cluster:  &embedded.Cluster{Name: "c", Listen: "0.0.0.0:6222", Routes: []string{"nats-route://r:p@n1:6222", "nats-route://r:p@n3:6222"}, User: "r", Password: "p"},
				System:   &embedded.SystemAccount{Name: "SYS", Users: []embedded.User{{User: "monitor", Password: "y"}}},
				Accounts: accounts,
			},
			check: func(t *testing.T, o *server.Options) {
				if o.Cluster.Name != "c" || o.Cluster.Port != 6222 || len(o.Routes) != 2 || o.Cluster.Username != "r" {
					t.Errorf("cluster %+v routes %v", o.Cluster, o.Routes)
				}
				if o.HTTPPort != 8222 || o.HTTPHost != "127.0.0.1" || o.SystemAccount != "SYS" || o.NoAuthUser != "" {
					t.Errorf("http %s:%d system %q no_auth_user %q", o.HTTPHost, o.HTTPPort, o.SystemAccount, o.NoAuthUser)
				}
				if o.SyncInterval == 0 || !o.SyncAlways {
					t.Error("sync_interval is not always")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, err := tc.file.Render()
			if err != nil {
				t.Fatal(err)
			}
			o := &server.Options{}
			if err := o.ProcessConfigString(text); err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			tc.check(t, o)
		})
	}
}

// TestRenderRefuses checks accounts text holding more than an accounts
// block, or a system account that collides, is refused.
func TestRenderRefuses(t *testing.T) {
	for name, f := range map[string]embedded.File{
		"other keys":       {Accounts: `{"accounts": {}, "no_auth_user": "x"}`},
		"system collision": {Accounts: `{"accounts": {"SYS": {}}}`, System: &embedded.SystemAccount{Name: "SYS"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := f.Render(); !errors.Is(err, embedded.ErrRender) {
				t.Fatalf("err %v, want ErrRender", err)
			}
		})
	}
}
