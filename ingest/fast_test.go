package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// agree decodes data on both paths and fails unless they give the same dump or the same error.
// It returns whether the fast path accepted the dump itself (rather than deferring).
func agree(t *testing.T, what string, data []byte) bool {
	t.Helper()
	ref, refErr := referenceDecode("d.json", data)
	got, gotErr := decodeBytes("d.json", data)
	switch {
	case (refErr == nil) != (gotErr == nil):
		t.Errorf("%s: reference says %v, fast-first says %v", what, refErr, gotErr)
	case refErr != nil && refErr.Error() != gotErr.Error():
		t.Errorf("%s: reference says %q, fast-first says %q", what, refErr, gotErr)
	case refErr == nil && !reflect.DeepEqual(ref, got):
		t.Errorf("%s: the two paths decode different dumps", what)
	}
	d, err := fastDecode(data)
	if err == nil && refErr != nil {
		t.Errorf("%s: the fast path accepts what the reference rejects (%v)", what, refErr)
	}
	return err == nil && d != nil
}

func gunzip(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The fast path is an optimisation, never a second opinion: on every fixture, every bundled
// dump in several spellings, and thousands of mutations, it gives what the reference gives,
// and it actually takes the valid dumps (or the speed-up would be silently lost).
func TestFastPathAgrees(t *testing.T) {
	defer func(n int) { minFastModules = n }(minFastModules)
	minFastModules = 2 // so the small fixtures and mutations go through it too

	fixtures, _ := filepath.Glob("../schemas/testdata/*/*.json")
	for _, f := range fixtures {
		b, _ := os.ReadFile(f)
		agree(t, filepath.Base(f), b)
	}

	dumps, _ := filepath.Glob("../examples/dumps/*.json.gz")
	if len(dumps) < 10 {
		t.Fatalf("only %d bundled dumps", len(dumps))
	}
	for _, p := range dumps {
		raw := gunzip(t, p)
		name := filepath.Base(p)
		if !agree(t, name, raw) {
			t.Errorf("%s: the fast path declined a valid dump", name)
		}
		// the same document indented, and with its keys in Go's order and HTML-escaped
		// strings: not canonical as written, still accepted fast
		var doc any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatal(err)
		}
		compact, _ := json.Marshal(doc) // sorted keys, no space: hashed as written
		if !agree(t, name+" compact", compact) {
			t.Errorf("%s compact: the fast path declined it", name)
		}
		ind, _ := json.MarshalIndent(doc, "", "  ")
		if !agree(t, name+" indented", ind) {
			t.Errorf("%s indented: the fast path declined it", name)
		}
	}

	// escapes and key order inside module items: the canonical form must be rebuilt
	good := valid(t)
	for _, m := range []struct{ name, from, to string }{
		{"escaped class", `"class": "Linear"`, `"class": "Lin\u0065ar"`},
		{"escaped slash", `"class": "Linear"`, `"class": "Lin\/ear"`},
	} {
		b := bytes.Replace(good, []byte(m.from), []byte(m.to), 1)
		if bytes.Equal(b, good) && m.from != m.to {
			t.Fatalf("%s: %q not in the fixture", m.name, m.from)
		}
		if rehashed, err := Rehash(b); err == nil {
			agree(t, m.name+" (rehashed)", rehashed)
		}
		agree(t, m.name, b)
	}

	// lexical and structural defects inside and around the module list
	for _, m := range []struct{ name, from, to string }{
		{"duplicate key in a module", `"numel": 32`, `"numel": 32, "numel": 64`},
		{"invalid UTF-8 in a module", `"class": "Linear"`, "\"class\": \"Lin\xffear\""},
		{"long number in a module", `"numel": 32`, `"numel": 123456789012345678901234567890123`},
		{"leading zero", `"numel": 32`, `"numel": 032`},
		{"bare decimal point", `"numel": 32`, `"numel": 32.`},
		{"plus sign", `"numel": 32`, `"numel": +32`},
		{"NaN", `"numel": 32`, `"numel": NaN`},
		{"trailing comma", `"numel": 32`, `"numel": 32,`},
		{"control character", `"class": "Linear"`, "\"class\": \"Lin\tear\""},
		{"bad escape", `"class": "Linear"`, `"class": "Lin\qear"`},
		{"lone surrogate", `"class": "Linear"`, `"class": "Lin\ud800ear"`},
		{"escaped modules key", `"modules"`, `"modul\u0065s"`},
		{"second modules key", `"modules"`, `"modules": [], "modules"`},
		{"truncated", `"numel": 32`, `"numel": 3`},
		{"deep nesting", `"numel": 32`, `"numel": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70)},
		{"unterminated string", `"class": "Linear"`, `"class": "Linear`},
	} {
		b := bytes.Replace(good, []byte(m.from), []byte(m.to), 1)
		agree(t, m.name, b)
		if rehashed, err := Rehash(b); err == nil {
			agree(t, m.name+" (rehashed)", rehashed)
		}
	}
	agree(t, "cut in half", good[:len(good)/2])
	agree(t, "trailing data", append(append([]byte{}, good...), "{}"...))

	// every module value replaced by a wrong one (the schema-rule mutations), rehashed so
	// that they reach the module checks
	base := genericDoc(t, good)
	n := 0
	for _, val := range []any{nil, "x", json.Number("-1"), json.Number("2.0"), []any{}, map[string]any{}} {
		for i := range base["modules"].([]any) {
			for _, key := range []string{"name", "class", "parent", "params", "buffers"} {
				doc := clone(base).(map[string]any)
				doc["modules"].([]any)[i].(map[string]any)[key] = val
				b, _ := json.Marshal(doc)
				if r, err := Rehash(b); err == nil {
					b = r
				}
				agree(t, fmt.Sprintf("modules/%d/%s = %v", i, key, val), b)
				n++
			}
		}
	}
	if n < 50 {
		t.Errorf("only %d mutations", n)
	}
}

// A module list of one item, or none, stays on the reference path and says the same.
func TestFastPathDeclinesSmallLists(t *testing.T) {
	if _, err := fastDecode(valid(t)); !errors.Is(err, errFallback) {
		t.Errorf("a 3-module fixture took the fast path (minimum %d): %v", minFastModules, err)
	}
}
