package inspect

import (
	"html/template"
	"strings"
	"testing"
)

// referenceSessions is the page's template of the session list before it
// was written in Go (SessionList): what it must still write.
var referenceSessions = template.Must(template.New("sessions").Parse(`{{if .Sessions}}<ul class="sessions">
{{range .Sessions}}<li class="{{if eq .ID $.Selected}}selected{{end}}" data-session="{{.ID}}"><a href="?session={{.ID}}">{{.ID}}</a>
  <span>{{.Requests}} req</span>
  {{if .Open}}<span class="open">{{.Open}} open</span>{{end}}
  {{if .Pending}}<span class="pending">{{.Pending}} pending</span>{{end}}
  {{if .Approvals}}<span class="approvals" data-approvals="{{.Approvals}}">{{.Approvals}} awaiting approval</span>{{end}}
  {{if .Answered}}<span class="ok">answered</span>{{else if .Failed}}<span class="bad">failed</span>{{end}}
</li>
{{end}}</ul>{{else}}<p class="empty">No session yet.</p>{{end}}`))

// The session list written in Go is the template's, byte for byte, for
// every state of a row and ids that need escaping (markup, quotes, URL
// delimiters, spaces, non-ASCII, noncharacters, invalid UTF-8).
func TestSessionList_AsTheTemplateWroteIt(t *testing.T) {
	ids := []string{"run-1", "s1#2", `<b>"x"&'y'</b>`, "a+b=c?d/e f%g", "naïve ☃", "\ufdd0\uffff", "bad\xffutf8", "\x00nul", ""}
	var v view
	for i, id := range ids {
		v.Sessions = append(v.Sessions, SessionSummary{ID: id, Requests: i, Open: i % 2, Pending: i % 3, Approvals: i % 4,
			Answered: i%5 == 1, Failed: i%2 == 0})
	}
	for _, selected := range []string{"", "s1#2", `<b>"x"&'y'</b>`} {
		v.Selected = selected
		var want strings.Builder
		if err := referenceSessions.Execute(&want, v); err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		if err := pageTemplate.ExecuteTemplate(&got, "sessions", v); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("selected %q: the page's session list\n%s\nwant the template's\n%s", selected, got.String(), want.String())
		}
	}
	var empty strings.Builder
	if err := pageTemplate.ExecuteTemplate(&empty, "sessions", view{}); err != nil || !strings.Contains(empty.String(), "No session yet.") {
		t.Fatalf("no session: %q (%v), want the empty note", empty.String(), err)
	}
}
