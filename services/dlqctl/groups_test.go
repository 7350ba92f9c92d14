package main_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestGroupsAnswerTheirOwnWords: every command with subcommands (issue 40
// O5) refuses a word that is none of them, with a usage error (exit 2)
// naming them, never its help with exit 0; its real subcommands run (with
// no server they get as far as connecting: exit 1, CONNECT), and alone it
// prints its help (a drain alone starts a drain).
func TestGroupsAnswerTheirOwnWords(t *testing.T) {
	const nowhere = "nats://127.0.0.1:1"
	cases := []struct {
		name string
		// group is the command line of the group; words its subcommands
		// as the refusal names them; real a subcommand line that runs.
		group []string
		words string
		real  []string
	}{
		{"dlqctl", nil, "access, approval, backup, checkpoint, completion, dismiss, drain, export, find, groups, hold, key, ls (list), policy, publish", []string{"groups"}},
		{"policy", []string{"policy"}, "set, show (get)", []string{"policy", "get"}},
		{"policy show", []string{"policy"}, "set, show (get)", []string{"policy", "show"}},
		{"approval", []string{"approval"}, "approve, list (ls), reject, show", []string{"approval", "ls"}},
		{"hold", []string{"hold"}, "lift, list (ls), place", []string{"hold", "ls"}},
		{"drain", []string{"drain"}, "cancel, ls (list), resume, status", []string{"drain", "ls"}},
		{"replica", []string{"replica"}, "lag, metrics, mirrors, promote, resume", []string{"replica", "lag"}},
	}
	unknown := []string{"get", "bogus", "Müller&Söhne", "陈伟", "<list>"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, word := range unknown {
				if len(c.group) > 0 && c.group[0] == "policy" && word == "get" {
					continue // a word of policy's
				}
				args := append(append([]string{"-s", nowhere}, c.group...), word)
				r := dlqctl(t, "", "", args...)
				path := strings.TrimSpace("dlqctl " + strings.Join(c.group, " "))
				want := `unknown command "` + word + `" for "` + path + `"`
				if r.code != 2 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, c.words) || r.stdout != "" {
					t.Errorf("%v: want exit 2, %q and the words %q on stderr, nothing on stdout; got %s", args, want, c.words, r)
				}
			}
			r := dlqctl(t, "", "", append([]string{"-s", nowhere}, c.real...)...)
			if r.code != 1 || !strings.Contains(r.stderr, "connect "+nowhere) {
				t.Errorf("%v: want exit 1, connect refused; got %s", c.real, r)
			}
			if c.name == "drain" || c.name == "policy show" {
				return
			}
			r = dlqctl(t, "", "", c.group...)
			if r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
				t.Errorf("%v alone: want its help, exit 0; got %s", c.group, r)
			}
		})
	}
	t.Run("help of an unknown word", func(t *testing.T) {
		for _, args := range [][]string{{"help", "bogus"}, {"help", "policy", "get", "now"}, {"completion", "tcsh"}} {
			if r := dlqctl(t, "", "", args...); r.code != 2 || !strings.Contains(r.stderr, "unknown command") || r.stdout != "" {
				t.Errorf("%v: want exit 2 and unknown command; got %s", args, r)
			}
		}
		if r := dlqctl(t, "", "", "help", "policy", "get"); r.code != 0 || !strings.Contains(r.stdout, "dlqctl policy show") {
			t.Errorf("help policy get: %s", r)
		}
	})
	t.Run("a close word is suggested", func(t *testing.T) {
		if r := dlqctl(t, "", "", "polcy"); r.code != 2 || !strings.Contains(r.stderr, "did you mean policy?") {
			t.Errorf("polcy: %s", r)
		}
	})
}

// TestPolicyGetInWords: `dlqctl policy get` (O5) shows the policy in
// force, every setting with its value and what it means, the same as
// `policy show`; a change shows who made it.
func TestPolicyGetInWords(t *testing.T) {
	e := startStack(t, stackOptions{})
	get := e.okAs(t, viewerUser, "policy", "get").stdout
	if show := e.okAs(t, viewerUser, "policy", "show").stdout; show != get {
		t.Errorf("policy get and policy show differ:\n%s\n%s", get, show)
	}
	for _, want := range []string{
		`(?m)^SETTING +VALUE +WHAT IT MEANS$`,
		`(?m)^CORRECTIONS +controlled +a correction needs a second person when it changes the event's identity .*and for a pharmacy event whenever its record or the correction names a DEA schedule`,
		`(?m)^RELEASE POISON +true +releasing a poison event needs a second person$`,
		`(?m)^DRAIN MAX SELECTED +0 +no drain needs a second person for its size$`,
		`(?m)^HOLD LIFT +true +lifting a legal hold needs a second person$`,
		`(?m)^DISMISS WITHOUT APPROVAL +false +dismissing an event needs a second person$`,
		`(?m)^PENDING TTL +72h0m0s +a request waiting for a second person expires after 72h0m0s unless approved or rejected$`,
		`(?m)^SET +never: the default policy$`,
	} {
		if !regexp.MustCompile(want).MatchString(get) {
			t.Errorf("policy get lacks %s:\n%s", want, get)
		}
	}
	e.okAs(t, policyUser, "policy", "set", "--corrections", "all", "--drain-max-selected", "500", "--reason", "CAPA-7: Müller & Söhne <audit> \"two people\"")
	got := e.okAs(t, viewerUser, "policy", "get").stdout
	for _, want := range []string{
		`(?m)^CORRECTIONS +all +every correction needs a second person$`,
		`(?m)^DRAIN MAX SELECTED +500 +a drain selecting more than 500 events needs a second person$`,
		`(?m)^SET +` + regexp.QuoteMeta(policyUser) + ` at `,
	} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("policy get after a change lacks %s:\n%s", want, got)
		}
	}
}
