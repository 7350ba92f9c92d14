package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/shared/access"
)

// TestHelpNamesPeopleContexts: every context file a help text or example
// names is one `make run` writes, one per person of access.DefaultPeople
// (issue 40 O6), and no help speaks of a context per role.
func TestHelpNamesPeopleContexts(t *testing.T) {
	people := map[string]bool{}
	for _, p := range access.DefaultPeople() {
		people[p.Name] = true
	}
	roleContext := regexp.MustCompile(`(?i)<role>|per[- ]role|role context|contexts/(viewer|operator|inspector|approver|policy)\.json`)
	contextFile := regexp.MustCompile(`contexts/([^/\s)'"` + "`" + `]+)\.json`)
	a := &app{io: IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}}
	root := a.rootCommand()
	named := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		t.Run(strings.ReplaceAll(c.CommandPath(), " ", "_"), func(t *testing.T) {
			var b bytes.Buffer
			c.SetOut(&b)
			if err := c.Help(); err != nil {
				t.Fatal(err)
			}
			help := b.String()
			if m := roleContext.FindString(help); m != "" {
				t.Errorf("%s's help speaks of a context per role (%q)", c.CommandPath(), m)
			}
			for _, m := range contextFile.FindAllStringSubmatch(help, -1) {
				named++
				if !people[m[1]] && m[1] != "<person>" && m[1] != "publisher-<party>" {
					t.Errorf("%s's help names %s, no person's context", c.CommandPath(), m[0])
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if named == 0 {
		t.Error("no help names a context file")
	}
}
