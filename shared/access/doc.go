package access

import (
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/subjects"
)

// DocBegin and DocEnd are the markers around the generated tables in README.md and deploy/README.md;
// a test keeps what stands between them equal to DocTables.
const (
	DocBegin = "<!-- access tables: generated from shared/access, kept in step by TestDocs -->"
	DocEnd   = "<!-- end of access tables -->"
)

// DocTables renders the accounts, roles, example people and service users
// as Markdown: what each may do, exactly as ServerConfig generates it.
func DocTables() string {
	var b strings.Builder
	b.WriteString("| role (person) | account | may call | payload bytes |\n|---|---|---|---|\n")
	for _, r := range Roles {
		payload := "no"
		if r.ReadsPayloads() {
			payload = "yes (`audit.get` with `include_payload`, `audit.export`; with a reason, recorded in AUDIT first)"
		}
		if r == RolePublisher {
			fmt.Fprintf(&b, "| `%s` | `%s` (one per publisher; its `%s` is stored as `%s`) | %s, `$SRV.>` | %s |\n",
				r, PublisherAccount("<name>"), subjects.EventsAll, subjects.PublishedBy("<name>"), codeList(RoleEndpoints(r)), payload)
			continue
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s, `$SRV.>` | %s |\n", r, RoleAccount(r), codeList(RoleEndpoints(r)), payload)
	}
	b.WriteString("\n| example person (`make run`, a new kit) | display name | role |\n|---|---|---|\n")
	for _, p := range DefaultPeople() {
		display := p.DisplayName
		if display == "" {
			display = "(a party's service)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` |\n", p.Name, display, p.Role)
	}
	b.WriteString("\n| user (account `" + ServiceAccount + "`) | authenticates with | may publish | may subscribe |\n|---|---|---|---|\n")
	for _, s := range Specs() {
		if s.Unrestricted {
			fmt.Fprintf(&b, "| `%s` | password (bcrypt in the config) | everything in `%s` (break-glass: keep offline) | everything in `%s` |\n",
				s.Name, ServiceAccount, ServiceAccount)
			continue
		}
		fmt.Fprintf(&b, "| `%s` | nkey | %s | %s |\n", s.Name, codeList(s.Publish.Allow), codeList(s.Subscribe.Allow))
	}
	return b.String()
}

func codeList(subjects []string) string {
	out := make([]string, len(subjects))
	for i, s := range subjects {
		out[i] = "`" + s + "`"
	}
	return strings.Join(out, ", ")
}
