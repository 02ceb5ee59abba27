package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

func genericDoc(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func clone(v any) any {
	b, _ := json.Marshal(v)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	dec.Decode(&out)
	return out
}

// schemaVerdict is the full JSON Schema validator's answer: "" or the failing pointer.
func schemaVerdict(t *testing.T, doc any) string {
	sch, err := dumpSchema()
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			p := deepest(ve).InstanceLocation
			if p == "" {
				p = "/"
			}
			return p
		}
		return "?"
	}
	return ""
}

func nativeVerdict(doc map[string]any) (string, bool) {
	_, p := decodeModules(doc["modules"].([]any))
	if p == nil {
		return "", false
	}
	// 2.0 where an integer belongs passes JSON Schema (an integer is any number with a zero
	// fraction) but never passed the typed decode: the pipeline rejected it before as now
	return p.Pointer, strings.HasPrefix(p.Msg, "expected an integer, got the number")
}

// related: one pointer is the other or lies under it (validators name either the object or
// the offending member).
func related(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// The native module rules and the schema agree on every fixture and on a mutation of every
// field of every module item: same verdict, same place.
func TestModuleRulesAgreeWithTheSchema(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "valid", "*.json"))
	inv, _ := filepath.Glob(filepath.Join(fixtures, "invalid", "*.json"))
	checked := 0
	check := func(what string, doc map[string]any) {
		t.Helper()
		mods, ok := doc["modules"].([]any)
		if !ok {
			return
		}
		// the native rules cover module items only: compare on a document whose other parts
		// are valid, i.e. judge the modules alone
		s := schemaVerdict(t, doc)
		n, integralFloat := nativeVerdict(doc)
		if s != "" && !strings.HasPrefix(s, "/modules/") {
			return // the defect is outside the module tree
		}
		checked++
		_ = mods
		if s == "" && integralFloat {
			return
		}
		if (s == "") != (n == "") || (s != "" && !related(s, n)) {
			t.Errorf("%s: schema says %q, native rules say %q", what, s, n)
		}
	}
	for _, f := range inv {
		b, _ := os.ReadFile(f)
		var probe any
		if json.Unmarshal(b, &probe) != nil {
			continue
		}
		if doc, ok := probe.(map[string]any); ok {
			check(filepath.Base(f), genericDoc(t, b))
			_ = doc
		}
	}
	values := []any{nil, true, "x", "", strings.Repeat("é", 1025), strings.Repeat("a", 4097), json.Number("-1"), json.Number("1.5"),
		json.Number("2.0"), json.Number("16"), json.Number("9007199254740992"), json.Number("1e300"), []any{}, []any{json.Number("1")},
		make([]any, 17), map[string]any{}, "Bad-Pattern", "cuda"}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		base := genericDoc(t, b)
		check(filepath.Base(f), base)
		// every path to a value inside the module tree, replaced by every value, and each
		// object member removed, and an unknown member added
		var paths [][]any
		var walk func(v any, path []any)
		walk = func(v any, path []any) {
			paths = append(paths, append([]any{}, path...))
			switch x := v.(type) {
			case map[string]any:
				keys := make([]string, 0, len(x))
				for k := range x {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					walk(x[k], append(path, k))
				}
			case []any:
				for i, e := range x {
					if i < 2 || i == len(x)-1 { // the first, second and last items stand for the rest
						walk(e, append(path, i))
					}
				}
			}
		}
		walk(base["modules"], nil)
		// every path with every value under MREP_STRESS; by default each path with every third
		// value, in turn, so every value still lands on every kind of place
		stride := testutil.Size(3, 1)
		for pi, p := range paths {
			for vi, val := range values {
				if (pi+vi)%stride != 0 {
					continue
				}
				doc := clone(base).(map[string]any)
				if set(doc["modules"], p, val, false) {
					check(fmt.Sprintf("%s %v = value %d", filepath.Base(f), p, vi), doc)
				}
			}
			doc := clone(base).(map[string]any)
			if set(doc["modules"], p, nil, true) {
				check(fmt.Sprintf("%s %v removed", filepath.Base(f), p), doc)
			}
			doc = clone(base).(map[string]any)
			if len(p) > 0 {
				if m, ok := get(doc["modules"], p).(map[string]any); ok {
					m["unknown_member"] = json.Number("1")
					check(fmt.Sprintf("%s %v + unknown member", filepath.Base(f), p), doc)
				}
			}
		}
	}
	if checked < 2000/testutil.Size(3, 1) {
		t.Errorf("only %d comparisons", checked)
	}
	t.Logf("%d documents compared", checked)
}

func get(v any, path []any) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p.(string)]
		case []any:
			v = x[p.(int)]
		default:
			return nil
		}
	}
	return v
}

// set replaces (or removes) the value at path; false when there is no such place.
func set(root any, path []any, val any, remove bool) bool {
	if len(path) == 0 {
		return false
	}
	parent := get(root, path[:len(path)-1])
	last := path[len(path)-1]
	switch x := parent.(type) {
	case map[string]any:
		if remove {
			delete(x, last.(string))
		} else {
			x[last.(string)] = val
		}
		return true
	case []any:
		if remove {
			return false
		}
		x[last.(int)] = val
		return true
	}
	return false
}

func TestIsIdentAgreesWithThePattern(t *testing.T) {
	for _, s := range []string{"", "a", "bfloat16", "float8_e4m3fn", "cuda", "A", "1a", "a-b", "a b", "a\n", "_a", "é", "meta", "x_"} {
		if got, want := isIdent(s), identPattern.MatchString(s); got != want {
			t.Errorf("isIdent(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
