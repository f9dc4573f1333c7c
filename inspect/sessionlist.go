package inspect

import (
	"html/template"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SessionList is the session list of the page (its "sessions" fragment,
// without the empty case), written in Go with the markup and escaping
// the page's template had: it is the one fragment whose size grows with
// the sessions kept (Options.MaxSessions rows, redrawn at every event of
// a page's stream), and html/template, calling its escapers through
// reflection for each value, took about a millisecond to draw a hundred
// rows, the inspector's largest cost after its hooks.
func (v view) SessionList() template.HTML {
	var b strings.Builder
	b.Grow(64 + 200*len(v.Sessions))
	b.WriteString("<ul class=\"sessions\">\n")
	for _, s := range v.Sessions {
		b.WriteString(`<li class="`)
		if s.ID == v.Selected {
			b.WriteString("selected")
		}
		b.WriteString(`" data-session="`)
		escapeHTML(&b, s.ID)
		b.WriteString(`"><a href="?session=`)
		escapeQuery(&b, s.ID)
		b.WriteString(`">`)
		escapeHTML(&b, s.ID)
		b.WriteString("</a>\n  <span>")
		b.WriteString(strconv.Itoa(s.Requests))
		b.WriteString(" req</span>\n  ")
		if s.Open != 0 {
			b.WriteString(`<span class="open">`)
			b.WriteString(strconv.Itoa(s.Open))
			b.WriteString(" open</span>")
		}
		b.WriteString("\n  ")
		if s.Pending != 0 {
			b.WriteString(`<span class="pending">`)
			b.WriteString(strconv.Itoa(s.Pending))
			b.WriteString(" pending</span>")
		}
		b.WriteString("\n  ")
		if s.Approvals != 0 {
			n := strconv.Itoa(s.Approvals)
			b.WriteString(`<span class="approvals" data-approvals="`)
			b.WriteString(n)
			b.WriteString(`">`)
			b.WriteString(n)
			b.WriteString(" awaiting approval</span>")
		}
		b.WriteString("\n  ")
		if s.Answered {
			b.WriteString(`<span class="ok">answered</span>`)
		} else if s.Failed {
			b.WriteString(`<span class="bad">failed</span>`)
		}
		b.WriteString("\n</li>\n")
	}
	b.WriteString("</ul>")
	return template.HTML(b.String())
}

// htmlEscapes are html/template's replacements in text and quoted
// attributes.
var htmlEscapes = [...]string{0: "\uFFFD", '"': "&#34;", '&': "&amp;", '\'': "&#39;", '+': "&#43;", '<': "&lt;", '>': "&gt;"}

// escapeHTML writes s escaped as html/template escapes text and quoted
// attribute values.
func escapeHTML(b *strings.Builder, s string) {
	written := 0
	for i, w := 0, 0; i < len(s); i += w {
		var r rune
		r, w = utf8.DecodeRuneInString(s[i:])
		if int(r) < len(htmlEscapes) && htmlEscapes[r] != "" {
			b.WriteString(s[written:i])
			b.WriteString(htmlEscapes[r])
			written = i + w
		}
	}
	b.WriteString(s[written:])
}

// escapeQuery writes s escaped as html/template escapes a value in a
// URL's query: every byte but the unreserved ones percent-encoded.
func escapeQuery(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	written := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			continue
		default:
			b.WriteString(s[written:i])
			b.Write([]byte{'%', hex[c>>4], hex[c&15]})
			written = i + 1
		}
	}
	b.WriteString(s[written:])
}
