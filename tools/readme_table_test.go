package tools_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/polyweave/polyweave-go/tools"
)

// TestREADME_JSTableFieldsExist: the Go column of the README's table
// "From the JavaScript package" names fields of this package's option
// types that exist. A name Type.Field, or Type.Field.Field, is checked
// from Type; a bare name after it is a field of the same Type (as in
// "`Definition.Name`, `Description`"), and a bare type name makes it the
// Type of the names after it.
func TestREADME_JSTableFieldsExist(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## From the JavaScript package\n")
	if !ok {
		t.Fatal("the README has no section \"From the JavaScript package\"")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	types := map[string]reflect.Type{}
	for _, typ := range []reflect.Type{reflect.TypeFor[tools.Definition](), reflect.TypeFor[tools.RouterOptions](),
		reflect.TypeFor[tools.InstallerOptions](), reflect.TypeFor[tools.LoopOptions]()} {
		types[typ.Name()] = typ
	}
	name := regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$`)
	code := regexp.MustCompile("`([^`]*)`")
	checked := 0
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 4 {
			continue
		}
		var of reflect.Type // the type of bare names
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			bare := !strings.Contains(m[1], ".")
			if !name.MatchString(m[1]) || bare && !unicode.IsUpper(rune(m[1][0])) {
				continue // a call, a literal (false): not a name
			}
			path := strings.Split(m[1], ".")
			if typ, ok := types[path[0]]; ok {
				of, path = typ, path[1:]
			} else if len(path) > 1 {
				of = nil // a name of another package or type, not checked
				continue
			} else if of == nil {
				continue
			}
			typ := of
			for _, field := range path {
				f, ok := typ.FieldByName(field)
				if !ok {
					t.Errorf("README row %s: %s has no field %s (%s)", strings.TrimSpace(cells[1]), typ.Name(), field, m[1])
					break
				}
				typ, checked = f.Type, checked+1
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d names only: is the table still there?", checked)
	}
}
